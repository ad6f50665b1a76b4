"""The GPU's weight-only product (core/src/backend/cuda/codegen/kernels/weight_only_dot.cuh) against
numpy in float64 of the same quantization and against torch: int8 per output feature and int4 in
groups of 32, 64 and 128 with and without zero points, float32, float16 and bfloat16 activations,
rows 1 to 32 (each tile of rows) and, where x may have more, tiles of 8 rows (each reading the
weight again) up to 47 and from 48 the weight dequantized into the workspace for cuBLASLt (8 values
a lane, or one where K or the group is off 8) or, for int4 weights and bfloat16 x up to 128 rows,
the many-rows tile, N off every group of weight rows, K with a short or
odd tail (the single-value path), the tensor-core tiles from 8 rows (float16/bfloat16; lanes past
the last piece, a part-empty group of 16 weight rows; for int4 weights and bfloat16 x the ring or
the register-fed tile, at 8 and 16 rows; for int4, int8 and float8 weights up to 16 rows the
few-rows tile and at one row the one-row tile and the K-sliced one-row tile) and
below 8 where the tuner may take them, dynamic rows across both paths, CUDA graph replays (each
executable runs three times), and an LLM-sized product against torch; int4 weights held packed
(unpack_int4): decode and prefill executables sharing the bytes; float8 e4m3 weights per output
feature on each path. The quantized Llama on the GPU: tests/llm/test_quantized_llama.py (its
device-parametrized tests). Times nothing: bench/gpu_bench.py --weight-only does."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy import _C
from tripy.frontend.ops.quantize import unpack_int4

pytestmark = pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")

RNG = np.random.default_rng(27)
TOL = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 2e-2}


def _as(x, dtype, device="gpu"):
    t = tp.cast(tp.Tensor(np.ascontiguousarray(x, np.float32), device=tp.device(device)), getattr(tp, dtype))
    t.eval()
    return t


def _numpy(t):
    return np.from_dlpack(tp.copy(tp.cast(t, tp.float32), tp.device("cpu"))).astype(np.float64)


def _case(bits, N, K, group, zero, dtype, device="gpu"):
    """A quantized Linear on `device` and its dequantized weight [N, K] in float64 (the values the
    model holds)."""
    hi = 127 if bits == 8 else 7
    q = RNG.integers(-hi - 1, hi + 1, (N, K))
    groups = 1 if group is None else K // group
    scale = _as(RNG.uniform(0.002, 0.02, (N, groups)), dtype, device)
    # zero == "fractional": zero points off the integers (steps of 1/8), which no kernel may round.
    z = RNG.integers(-24, 25, (N, groups)) / 8.0 if zero == "fractional" else RNG.integers(-3, 4, (N, groups))
    zp = _as(z.astype(np.float32), dtype, device) if zero else None
    qdtype = tp.int8 if bits == 8 else tp.int4
    lin = tp.Linear(K, N, bias=False, dtype=getattr(tp, dtype), quant_dtype=qdtype,
                    weight_quant_dim=0 if group is None else None)
    qt = tp.cast(tp.Tensor(q.astype(np.int32), device=tp.device(device)), qdtype)
    state = {"weight": qt, "weight_scale": scale if group is not None else tp.reshape(scale, (N,))}
    if zp is not None:
        state["weight_zero_point"] = zp
    lin.load_state_dict(state)
    per = K if group is None else group
    s, z = _numpy(scale), (_numpy(zp) if zp is not None else 0.0)
    w = (q - (np.repeat(z, per, axis=1) if zp is not None else 0.0)) * np.repeat(s, per, axis=1)
    return lin, w


def _check(exe, lin_w, rows, K, dtype, device="gpu", x_scale=1.0):
    x = _as(RNG.standard_normal((rows, K)) * x_scale, dtype, device)
    want = _numpy(x) @ lin_w.T
    for _ in range(3):  # the first call, then graph replays
        got = _numpy(exe(x))
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype] * np.abs(want).max())
    return got


def _kinds(exe):
    return re.findall(r"^b\d+ = (\w+) '", exe._impl.program_text, re.M)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 8, 16, 32])
def test_int8_per_channel_each_tile_of_rows(dtype, rows):
    lin, w = _case(8, 4100, 512, None, False, dtype)
    exe = tp.compile(lin, args=[tp.InputInfo((rows, 512), dtype=getattr(tp, dtype))])
    assert _kinds(exe) == ["weight_only_dot"]
    _check(exe, w, rows, 512, dtype)


@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("zero", [False, True], ids=["symmetric", "zero_point"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_int4_groups_against_numpy(group, zero, dtype):
    lin, w = _case(4, 1030, 1024, group, zero, dtype)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 5, 32), 1024), dtype=getattr(tp, dtype))])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 5, 17, 32):
        _check(exe, w, rows, 1024, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("bits, K, group", [(4, 160, 32), (4, 96, 96), (8, 112, None), (8, 48, None)])
@pytest.mark.parametrize("rows", [8, 13, 16, 32])
def test_tensor_core_tiles_with_lanes_past_the_last_piece(dtype, bits, K, group, rows):
    """From 8 rows on, float16/bfloat16 x runs on tensor cores: K of 5 pieces of 32 int4 values (or
    7 and 3 pieces of 16 int8 ones) leaves lanes of the last step without a piece; 50 weight rows
    leave a group of 16 rows part empty; each tile of rows (8, 16, 32), full or not."""
    lin, w = _case(bits, 50, K, group, bits == 4, dtype)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, rows, rows), K), dtype=getattr(tp, dtype))])
    assert _kinds(exe) == ["weight_only_dot"]
    for m in sorted({1, rows - 1, rows}):
        _check(exe, w, m, K, dtype)


@pytest.mark.parametrize("mma", ["1", "0"], ids=["tensor_core_tile", "own_tile"])
@pytest.mark.parametrize("bits, group, zero", [(4, 128, False), (4, 64, True), (8, None, False)])
@pytest.mark.parametrize("rows", [1, 3, 7])
def test_fewer_than_8_rows_on_either_tile_the_tuner_may_choose(monkeypatch, tmp_path, mma, bits, group, zero, rows):
    """Below 8 rows the build times the CUDA-core tile against the tensor-core one for int4 weights
    (its rows past the last dropped; int8 keeps its own tile); TRIPY_WEIGHT_ONLY_MMA forces each
    here. A saved executable keeps the choice."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", mma)
    lin, w = _case(bits, 1040, 1024, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo((rows, 1024), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    _check(exe, w, rows, 1024, "bfloat16")
    exe.save(str(tmp_path / "wo.tpymodel"))
    _check(tp.Executable.load(str(tmp_path / "wo.tpymodel")), w, rows, 1024, "bfloat16")


@pytest.mark.parametrize("vec", ["ring", "frag"])
@pytest.mark.parametrize("bits, group, zero", [(4, 128, True), (4, 256, False), (8, None, False)])
@pytest.mark.parametrize("N", [1000, 40, 9])
def test_the_ring_with_weight_rows_off_its_groups_of_32(monkeypatch, vec, bits, group, zero, N):
    """Up to 8 rows of x, with K and the group whole steps of 4 pieces, the tensor-core tile streams
    the weight through a ring in shared memory, 32 weight rows a warp group (two tiles of 16): 1000
    rows leave the last group 8 rows, 40 a second tile of 8, 9 one partial tile. For int4 weights
    the register-fed tile may run instead (16 rows a warp group; groups of one or more chunks of
    128): TRIPY_WEIGHT_ONLY_MMA picks each."""
    if vec == "frag" and bits != 4:
        pytest.skip("the register-fed tile takes int4 weights")
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", vec)
    lin, w = _case(bits, N, 1024, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 8, 8), 1024), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 5, 8):
        _check(exe, w, rows, 1024, "bfloat16")


@pytest.mark.parametrize("vec", ["ring", "frag"])
@pytest.mark.parametrize("bits, group, zero", [(4, 128, True), (8, None, False)])
@pytest.mark.parametrize("most", [16, 32])
def test_16_or_32_rows_on_the_rings_tiles_of_8(monkeypatch, vec, bits, group, zero, most):
    """A kernel of up to 16 or 32 rows may take the ring's tile of 8 rows (timed against its own):
    TRIPY_WEIGHT_ONLY_MMA forces it here (the ring; or for int4 the register-fed tile, which at up to
    16 rows runs on the kernel's own tile of 16), 2 or 4 tiles of rows whose blocks take the same
    weight rows one after another, the last tile part empty."""
    if vec == "frag" and bits != 4:
        pytest.skip("the register-fed tile takes int4 weights")
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", vec)
    lin, w = _case(bits, 1000, 1024, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, most, most), 1024), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 9, most - 3, most):
        _check(exe, w, rows, 1024, "bfloat16")


@pytest.mark.parametrize("group, zero", [(128, True), (256, False)])
@pytest.mark.parametrize("N", [1000, 40])
def test_16_rows_on_the_register_fed_tile(monkeypatch, group, zero, N):
    """A kernel of up to 16 rows of int4 weights and bfloat16 x may run the register-fed tile on its
    own tile of 16 rows (two tiles of 8 rows of x meeting the same weight fragments):
    TRIPY_WEIGHT_ONLY_MMA=frag forces it here; rows past the last are computed and dropped."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "frag")
    lin, w = _case(4, N, 1024, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 16, 16), 1024), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 8, 9, 13, 16):
        _check(exe, w, rows, 1024, "bfloat16")


# TRIPY_WEIGHT_ONLY_MMA's value for the few-rows tile or its K-sliced form, and what TRIPY_DEBUG says.
FEW_FORMS = {"few": "the few-rows tile", "fewslice": r"the few-rows K-sliced tile, [12] tiles of 16 rows"}


@pytest.mark.parametrize("mode", ["few", "fewslice"])
@pytest.mark.parametrize("N, K, group, zero", [(1000, 1024, 128, True), (40, 1024, 256, False), (300, 4096, 4096, True),
                                           (1000, 512, 128, "fractional"), (77, 1536, 384, True)])
def test_9_to_16_rows_on_the_few_rows_tile(monkeypatch, capfd, tmp_path, mode, N, K, group, zero):
    """Up to 16 rows of bfloat16 x against int4 weights may run the few-rows tile (x laid out in the
    workspace as float16, scaled by a power of two a row and chunk; the weight's values as float16
    subnormals) or its K-sliced form: TRIPY_WEIGHT_ONLY_MMA=few (fewslice) forces it where a group
    is a power-of-two number of chunks of 128 or the whole row (else the register-fed tile runs), at
    every row count of the dynamic x. x from 1e-4 to 1e4, and a row with a chunk of zeros beside one
    3e3 times larger."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", mode)
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, w = _case(4, N, K, group, zero, "bfloat16")
    form = "the register-fed tile" if group == 384 else FEW_FORMS[mode]
    _check_few_rows(lin, w, K, 128, form, capfd, tmp_path / "few.tpymodel")


def _check_few_rows(lin, w, K, chunk, form, capfd, path):
    """`lin` compiled for up to 16 rows of bfloat16 x, on `form` (TRIPY_DEBUG says so) against numpy
    at every row count of the dynamic x: x from 1e-4 to 1e4, and a row with a chunk of zeros beside
    one 3e3 times larger. Saved to `path` and loaded, the executable keeps the form the build chose."""
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 16, 16), K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 5, 9, 13, 16):
        _check(exe, w, rows, K, "bfloat16")
    for x_scale in (1e4, 1e-4):
        _check(exe, w, 16, K, "bfloat16", x_scale=x_scale)
    x = RNG.standard_normal((11, K))
    x[3, chunk:2 * chunk] = 0.0
    x[3, :chunk] *= 3e3
    xb = _as(x, "bfloat16")
    want = _numpy(xb) @ w.T
    np.testing.assert_allclose(_numpy(exe(xb)), want, rtol=0, atol=TOL["bfloat16"] * np.abs(want).max())
    err = capfd.readouterr().err
    for rows in (1, 9, 16):
        assert re.search(rf"weight-only dot '[^']*' at {rows} rows: {form}", err), err
    exe.save(str(path))
    _check(tp.Executable.load(str(path)), w, 12, K, "bfloat16")
    assert re.search(rf"weight-only dot '[^']*' at 12 rows: {form}", capfd.readouterr().err)


def _check_one_row(exe, w, K, chunk, capfd, more, form="the one-row tile"):
    """One row of bfloat16 x on `form` (TRIPY_DEBUG says so) against numpy: x from 1e-4 to 1e4,
    then a chunk of zeros (its largest value 0) beside one 3e3 times larger; then 5 rows, which run
    `more`."""
    for x_scale in (1.0, 1e4, 1e-4):
        _check(exe, w, 1, K, "bfloat16", x_scale=x_scale)
    x = RNG.standard_normal((1, K))
    x[0, chunk:2 * chunk] = 0.0
    x[0, 8 * chunk:9 * chunk] *= 3e3
    xb = _as(x, "bfloat16")
    want = _numpy(xb) @ w.T
    np.testing.assert_allclose(_numpy(exe(xb)), want, rtol=0, atol=TOL["bfloat16"] * np.abs(want).max())
    _check(exe, w, 5, K, "bfloat16")
    err = capfd.readouterr().err
    assert re.search(rf"weight-only dot '[^']*' at 1 rows: {form}", err), err
    assert re.search(rf"weight-only dot '[^']*' at 5 rows: {more}", err), err


@pytest.mark.parametrize("bits, group, zero", [(4, 128, True), (4, 256, False), (4, 4096, True), (8, None, False)])
@pytest.mark.parametrize("N", [1000, 40, 9])
def test_one_row_on_the_one_row_tile(monkeypatch, capfd, bits, group, zero, N):
    """One row of bfloat16 x against int4 or int8 weights may run the one-row tile (x in shared
    memory as float16, scaled by a power of two a chunk; the weight's values as float16
    subnormals): TRIPY_WEIGHT_ONLY_MMA=row forces it where the kernel is built for one row, and
    TRIPY_DEBUG=1 says which form each launch takes. x from 1e-4 to 1e4, and a chunk of zeros; at
    more rows of the dynamic x the register-fed tile runs (int4; the same grid), or the ring (int8)."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "row")
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    K = 4096
    lin, w = _case(bits, N, K, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 1, 8), K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    _check_one_row(exe, w, K, 128 if bits == 4 else 64, capfd, "the register-fed tile" if bits == 4 else "the ring")


@pytest.mark.parametrize("bits, group, zero", [(4, 128, True), (4, 256, "fractional"), (4, "row", False),
                                              (8, None, False)])
@pytest.mark.parametrize("N, K", [(1000, 4096), (40, 14592), (9, 512)])
def test_one_row_on_the_k_sliced_tile(monkeypatch, capfd, tmp_path, bits, group, zero, N, K):
    """One row of bfloat16 x against int4 or int8 weights may run the K-sliced one-row tile (each
    warp a share of K's chunks, its x in registers, against 1, 2 or 4 tiles of 16 weight rows):
    TRIPY_WEIGHT_ONLY_MMA=slice times its shapes alone; any K of whole chunks (past the one-row
    tile's 14336), N off its tiles, a group of the whole row, zero points off the integers. The
    choice survives a save and load; at 5 rows of the dynamic x the register-fed tile runs (int4),
    or the ring (int8)."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "slice")
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, w = _case(bits, N, K, K if group == "row" else group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 1, 8), K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    form = r"the K-sliced tile, [124] tiles of 16 rows and (4|8|16) warps a block"
    more = "the register-fed tile" if bits == 4 else "the ring"
    _check_one_row(exe, w, K, 128 if bits == 4 else 64, capfd, more, form)
    exe.save(str(tmp_path / "sliced.tpymodel"))
    monkeypatch.delenv("TRIPY_WEIGHT_ONLY_MMA")
    _check(tp.Executable.load(str(tmp_path / "sliced.tpymodel")), w, 1, K, "bfloat16")
    assert re.search(rf"weight-only dot '[^']*' at 1 rows: {form}", capfd.readouterr().err)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("K, one_row", [(14336, True), (14464, False)])
def test_one_row_up_to_the_tiles_largest_k(monkeypatch, capfd, bits, K, one_row):
    """The one-row tile holds x's row of up to 14336 values in shared memory; past it another
    form runs."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "row")
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, w = _case(bits, 40, K, 128 if bits == 4 else None, bits == 4, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo((1, K), dtype=tp.bfloat16)])
    _check(exe, w, 1, K, "bfloat16")
    assert ("at 1 rows: the one-row tile" in capfd.readouterr().err) == one_row


@pytest.mark.parametrize("bits", [4, 8])
def test_k_off_the_16_byte_pieces_takes_the_single_value_path(bits):
    # K = 200: not a multiple of 32 (int4) or of a group of 40 (int8's pieces of 16 values).
    lin, w = _case(bits, 77, 200, 40 if bits == 4 else None, True if bits == 4 else False, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 3, 8), 200), dtype=tp.bfloat16)])
    assert "weight_only_dot" in _kinds(exe)
    for rows in (1, 3, 8):
        _check(exe, w, rows, 200, "bfloat16")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("bits, group, zero", [(4, 64, True), (4, 32, False), (8, None, False)])
def test_many_rows_take_tiles_then_the_dequantized_gemm(dtype, bits, group, zero):
    lin, w = _case(bits, 300, 256, group, zero, dtype)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 100, 300), 256), dtype=getattr(tp, dtype))])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (1, 33, 47, 48, 300):  # tiles of 8 rows up to 47, cuBLASLt from 48
        _check(exe, w, rows, 256, dtype)


@pytest.mark.parametrize("N, K, group, zero, block_rows", [(12288, 256, 128, True, 64), (12288, 256, 256, False, 64),
                                                         (1000, 1024, 128, False, 32), (40, 384, 384, True, 32),
                                                         (1000, 512, 128, "fractional", 32)])
def test_48_to_128_rows_on_the_many_rows_tile(monkeypatch, capfd, N, K, group, zero, block_rows):
    """From 48 to 128 rows of bfloat16 x, int4 weights in whole chunks of 128 values run the many-rows
    tile (x laid out in the workspace, the weight's values dequantized in registers): 64 rows of x a
    block where that grid covers most of the GPU, else 32 (TRIPY_DEBUG says which); past 128 rows
    the dequantized weight's GEMM."""
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, w = _case(4, N, K, group, zero, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 100, 300), K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (48, 77, 128, 129, 300):
        _check(exe, w, rows, K, "bfloat16")
    err = capfd.readouterr().err
    assert re.search(rf"at 128 rows: the many-rows tile, {block_rows} rows of x a block", err), err
    assert re.search(r"at 48 rows: the many-rows tile", err) and re.search(r"at 77 rows: the many-rows tile", err), err
    assert not re.search(r"at (129|300) rows: the many-rows tile", err), err


@pytest.mark.parametrize("bits, K, group", [(4, 250, 50), (4, 240, 12), (8, 100, None)])
def test_the_dequantization_off_8_values_takes_one_value_a_lane(bits, K, group):
    lin, w = _case(bits, 70, K, group, bits == 4, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo((80, K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    _check(exe, w, 80, K, "bfloat16")


def test_without_the_weight_only_product_the_dequantization_precedes_the_gemm(monkeypatch):
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_DOT", "0")
    lin, w = _case(4, 256, 256, 64, False, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo((64, 256), dtype=tp.bfloat16)])
    assert "weight_only_dot" not in _kinds(exe) and "dot" in _kinds(exe)
    _check(exe, w, 64, 256, "bfloat16")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("K", [512, 250])
def test_float8_weights_on_every_path(dtype, K):
    """float8 e4m3 weights per output feature (some below e4m3's normal range, some zero): one row
    on its own tile, 16 rows on theirs (tensor cores for float16 and bfloat16), and a prefill's
    kernel on the tile of 8 rows and through the GEMM; K = 250 takes the single-value paths. x of
    1e-15 and 1e15 in bfloat16, whose tensor-core fragments hold the values times 2^-112 and x times
    2^56."""
    w = RNG.standard_normal((300, K)).astype(np.float32) * 50
    w[:, :16] *= 1e-4
    w[:, 16:20] = 0
    w8 = tp.cast(_as(w, "float32"), tp.float8)
    w8.eval()
    scale = _as(RNG.uniform(0.002, 0.02, (300,)), dtype)
    lin = tp.Linear(K, 300, bias=False, dtype=getattr(tp, dtype), quant_dtype=tp.float8, weight_quant_dim=0)
    lin.load_state_dict({"weight": w8, "weight_scale": scale})
    want = _numpy(w8) * _numpy(scale)[:, None]
    for most, rows in ((1, (1,)), (16, (9, 16)), (300, (1, 3, 8, 47, 48, 300))):
        exe = tp.compile(lin, args=[tp.InputInfo(((1, most, most), K), dtype=getattr(tp, dtype))])
        assert _kinds(exe) == ["weight_only_dot"]
        for r in rows:
            _check(exe, want, r, K, dtype)
        if dtype == "bfloat16" and most == 16:
            for x_scale in (1e-15, 1e15):
                _check(exe, want, 16, K, dtype, x_scale=x_scale)


def _float8_case(N, K, edges=True):
    """A float8 e4m3 Linear per output feature (with `edges`, weights below e4m3's normal range and
    zeros among them) and its dequantized weight in float64."""
    w = RNG.standard_normal((N, K)).astype(np.float32) * 50
    if edges:
        w[:, :16] *= 1e-4
        w[:, 16:20] = 0
    w8 = tp.cast(_as(w, "float32"), tp.float8)
    w8.eval()
    scale = _as(RNG.uniform(0.002, 0.02, (N,)), "bfloat16")
    lin = tp.Linear(K, N, bias=False, dtype=tp.bfloat16, quant_dtype=tp.float8, weight_quant_dim=0)
    lin.load_state_dict({"weight": w8, "weight_scale": scale})
    return lin, _numpy(w8) * _numpy(scale)[:, None]


@pytest.mark.parametrize("K", [4096, 14336])
def test_float8_one_row_on_the_one_row_tile(monkeypatch, capfd, K):
    """float8 e4m3 weights per output feature at one row of bfloat16 x may run the one-row tile too
    (each two bytes a float16 pair by cvt, exact): forced, against numpy, x from 1e-4 to 1e4 and a
    chunk of zeros, weights below e4m3's normal range and zeros; at more rows the ring runs."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "row")
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, want = _float8_case(300, K)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 1, 8), K), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    _check_one_row(exe, want, K, 64, capfd, "the ring")


@pytest.mark.parametrize("K", [4096, 14400])
def test_float8_one_row_on_the_k_sliced_tile(monkeypatch, capfd, K):
    """float8 e4m3 weights per output feature at one row of bfloat16 x on the K-sliced tile (a lane
    2 values of x's chunk of 64, each weight pair a float16 pair by cvt): forced, against numpy, x
    from 1e-4 to 1e4 and a chunk of zeros, weights below e4m3's normal range and zeros, K past the
    one-row tile's; at more rows the ring runs."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", "slice")
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, want = _float8_case(300, K)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 1, 8), K), dtype=tp.bfloat16)])
    _check_one_row(exe, want, K, 64, capfd, "the ring", r"the K-sliced tile, [124] tiles of 16 rows")


@pytest.mark.parametrize("mode", ["few", "fewslice"])
@pytest.mark.parametrize("fmt", ["int8", "float8"])
@pytest.mark.parametrize("N, K", [(1000, 1024), (77, 4160), (300, 4096)])
def test_9_to_16_rows_of_8_bit_weights_on_the_few_rows_tile(monkeypatch, capfd, tmp_path, mode, fmt, N, K):
    """int8 and float8 weights per output feature at 9 to 16 rows of bfloat16 x may run the few-rows
    tile too, or its K-sliced form (chunks of 64 values: int8 bytes as q + 128, float8 pairs by cvt,
    both float16): forced, against numpy at every row count of the dynamic x (K = 4160: an odd count
    of chunks), x from 1e-4 to 1e4 and a row with a chunk of zeros beside one 3e3 times larger; saved
    and loaded."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_MMA", mode)
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    lin, w = _case(8, N, K, None, False, "bfloat16") if fmt == "int8" else _float8_case(N, K, edges=False)
    _check_few_rows(lin, w, K, 64, FEW_FORMS[mode], capfd, tmp_path / "few8.tpymodel")


def test_an_llm_sized_product_agrees_with_torch():
    torch = pytest.importorskip("torch")
    lin, w = _case(4, 2048, 4096, 128, True, "bfloat16")
    exe = tp.compile(lin, args=[tp.InputInfo((16, 4096), dtype=tp.bfloat16)])
    x = _as(RNG.standard_normal((16, 4096)), "bfloat16")
    got = _numpy(exe(x))
    xt = torch.from_dlpack(x).float()
    want = (xt @ torch.tensor(w, dtype=torch.float32, device=xt.device).T).double().cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL["bfloat16"] * np.abs(want).max())


def _packed_case(N, K, group, dtype="bfloat16"):
    """A Linear whose int4 weight is unpack_int4 of bytes on the GPU, the bytes, and its weight."""
    q = RNG.integers(-8, 8, (N, K))
    u = q + 8
    packed = tp.copy(tp.Tensor((u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8).view(np.int8)), tp.device("gpu"))
    packed.eval()
    scale = _as(RNG.uniform(0.002, 0.02, (N, K // group)), dtype)
    zp = _as(RNG.integers(-3, 4, (N, K // group)).astype(np.float32), dtype)
    lin = tp.Linear(K, N, bias=False, dtype=getattr(tp, dtype), quant_dtype=tp.int4)
    lin.load_state_dict({"weight": unpack_int4(packed, K), "weight_scale": scale, "weight_zero_point": zp})
    w = (q - np.repeat(_numpy(zp), group, axis=1)) * np.repeat(_numpy(scale), group, axis=1)
    return lin, w, packed


def test_decode_executables_share_packed_int4_weights_on_the_gpu():
    """Every decode-sized executable reads the model's packed bytes and scales in place: compiling
    more adds no copy of them (the bytes are 32 MiB; the scales and zero points 2 MiB; each
    executable's own kernels and workspace take a few MiB)."""
    N, K = 8192, 8192
    lin, w, packed = _packed_case(N, K, 128)

    def compiled(rows):
        exe = tp.compile(lin, args=[tp.InputInfo(((1, rows, rows), K), dtype=tp.bfloat16)])
        assert _kinds(exe) == ["weight_only_dot"]
        _check(exe, w, rows, K, "bfloat16")  # the first call loads the program
        return exe

    exes = [compiled(1)]
    before = _C._cuda_bytes_in_use()
    exes += [compiled(4), compiled(16), compiled(32)]
    grown = _C._cuda_bytes_in_use() - before
    assert grown < N * K // 2 // 2, grown / 2**20  # half of one copy of the bytes
    assert not lin.weight._node.is_evaluated


def test_a_prefill_sized_product_reads_the_packed_bytes():
    """Past the tiles' rows the product still reads the packed bytes in place: it dequantizes them
    into the workspace for the tensor-core GEMM, no constant of its own."""
    lin, w, packed = _packed_case(384, 512, 128)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 200, 300), 512), dtype=tp.bfloat16)])
    assert _kinds(exe) == ["weight_only_dot"]
    for rows in (33, 300):
        _check(exe, w, rows, 512, "bfloat16")
    assert not lin.weight._node.is_evaluated

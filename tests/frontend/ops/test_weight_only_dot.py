"""Weight-only quantization: a float activation times a dequantized constant int8, int4 or float8
weight compiles to one weight_only_dot kernel that reads the weight packed (flat::weight_only_dot),
for tp.Linear (x @ W.T) and x @ W alike. Checked against numpy in float64 of the same quantization
on the default device: int8 and float8 per output channel, int4 in groups of 32, 64 and 128 of the
input features (an odd count of groups), with and without zero points, N off every tile, 1 to 300
rows, float32 and bfloat16; and the errors for groups that do not divide the features or zero points that do not
fit the scale. int4 weights held two values a byte (pack_int4, unpack_int4) against numpy's
packing: read in place by the product (the weight stays a view of the bytes), unpacked for the
GEMM where the product is off, repacked along K for a [K, N] weight. The GPU's kernel past its
decode sizes, against torch too: test_weight_only_dot_gpu.py."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device
from tripy.frontend.ops.quantize import pack_int4, unpack_int4

RNG = np.random.default_rng(27)
N, K = 70, 384  # N off the CPU's 64-row tile and the GPU's row groups


def _kernels(exe):
    return re.findall(r"^b\d+ = (\w+) '", exe._impl.program_text, re.M)


def _rounded(values, dtype):
    """`values` as the model's dtype holds them, in float64 (the reference uses those values)."""
    return np.array(tp.cast(tp.Tensor(values.astype(np.float32)), dtype).cast(tp.float32).tolist(), np.float64)


def _weights(bits, group, zero, dtype):
    hi = 127 if bits == 8 else 7
    q = RNG.integers(-hi - 1, hi + 1, (N, K)).astype(np.float32)
    groups = 1 if group is None else K // group
    scale = _rounded(RNG.uniform(0.002, 0.02, (N, groups)), dtype)
    zp = _rounded(RNG.integers(-3, 4, (N, groups)).astype(np.float64), dtype) if zero else None
    per = K if group is None else group
    w = q.astype(np.float64) - (0 if zp is None else np.repeat(zp, per, axis=1))
    return q, scale, zp, w * np.repeat(scale, per, axis=1)


def _linear(bits, group, zero, dtype):
    """A tp.Linear holding the quantized weight, and the dequantized weight [N, K] in float64."""
    q, scale, zp, w = _weights(bits, group, zero, dtype)
    qdtype = tp.int8 if bits == 8 else tp.int4
    lin = tp.Linear(K, N, bias=False, dtype=dtype, quant_dtype=qdtype, weight_quant_dim=0 if group is None else None)
    qt = tp.cast(tp.Tensor(q.astype(np.int32), device=default_device()), qdtype)
    s = scale.reshape(-1) if group is None else scale
    state = {"weight": qt, "weight_scale": tp.cast(tp.Tensor(s.astype(np.float32)), dtype)}
    if zp is not None:
        state["weight_zero_point"] = tp.cast(tp.Tensor(zp.astype(np.float32)), dtype)
    lin.load_state_dict(state)
    return lin, w


def _run(exe, x, dtype):
    out = exe(tp.cast(tp.Tensor(x, device=default_device()), dtype))
    return np.array(tp.cast(out, tp.float32).tolist(), np.float64)


def _x(rows, dtype):
    return _rounded(RNG.standard_normal((rows, K)), dtype).astype(np.float32)


def _check(got, want, dtype):
    scale = np.abs(want).max()
    tol = 2e-5 if dtype == tp.float32 else 2e-2
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=0)


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_int8_per_channel_linear_reads_the_packed_weight(rows):
    lin, w = _linear(8, None, False, tp.float32)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=(rows, K), dtype=tp.float32)])
    assert "weight_only_dot" in _kernels(exe)
    x = _x(rows, tp.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)


@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("zero", [False, True], ids=["symmetric", "zero_point"])
def test_int4_groups_with_and_without_zero_points(group, zero):
    lin, w = _linear(4, group, zero, tp.float32)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 4, 32), K), dtype=tp.float32)])
    assert "weight_only_dot" in _kernels(exe)
    assert "dot" not in _kernels(exe)
    for rows in (1, 5, 32):
        x = _x(rows, tp.float32)
        _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)


def test_an_odd_count_of_groups_and_many_rows():
    global K
    saved, K = K, 96  # 3 groups of 32
    try:
        lin, w = _linear(4, 32, True, tp.float32)
        exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 8, 300), K), dtype=tp.float32)])
        assert "weight_only_dot" in _kernels(exe)
        for rows in (3, 300):
            x = _x(rows, tp.float32)
            _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)
    finally:
        K = saved


@pytest.mark.parametrize("bits, group, k", [(8, None, 1003), (4, 200, 1000), (4, 40, 1000)])
def test_one_to_four_rows_over_every_loop_of_the_integer_sums(bits, group, k):
    """One to four rows of x take the sums over the stored integers, 16 bytes a step into several
    chains (AVX-512), then 8 (AVX2), then one at a time: K and the groups leave bytes for each."""
    global K
    saved, K = K, k
    try:
        lin, w = _linear(bits, group, bits == 4, tp.float32)
        exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 2, 4), K), dtype=tp.float32)])
        assert "weight_only_dot" in _kernels(exe)
        for rows in (1, 2, 3, 4):
            x = _x(rows, tp.float32)
            _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)
    finally:
        K = saved


@pytest.mark.parametrize("bits", [4, 8])
def test_bfloat16_activations(bits):
    lin, w = _linear(bits, 64 if bits == 4 else None, bits == 4, tp.bfloat16)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 2, 16), K), dtype=tp.bfloat16)])
    assert "weight_only_dot" in _kernels(exe)
    x = _x(3, tp.bfloat16)
    _check(_run(exe, x, tp.bfloat16), x.astype(np.float64) @ w.T, tp.bfloat16)


def test_many_rows_over_several_chunks_of_the_weight():
    """K = 2048: the CPU dequantizes 2048 weight rows at a time for its float32 matmul, so 4100
    weight rows make two whole chunks and a last one of 4."""
    global N, K
    saved, (N, K) = (N, K), (4100, 2048)
    try:
        lin, w = _linear(4, 128, True, tp.float32)
        exe = tp.compile(lin, args=[tp.InputInfo(shape=(48, K), dtype=tp.float32)])
        assert _kernels(exe) == ["weight_only_dot"]
        x = _x(48, tp.float32)
        _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)
    finally:
        N, K = saved


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
def test_float8_per_channel_weights_are_read_as_stored(dtype):
    """float8 e4m3 values (some below its normal range, some zero) times a scale per output feature."""
    w = RNG.standard_normal((N, K)).astype(np.float32) * 50
    w[:, :16] *= 1e-4
    w[:, 16:20] = 0
    w8 = tp.cast(tp.Tensor(w, device=default_device()), tp.float8)
    q = np.array(tp.cast(w8, tp.float32).tolist(), np.float64)
    scale = _rounded(RNG.uniform(0.002, 0.02, (N,)), dtype)
    lin = tp.Linear(K, N, bias=False, dtype=dtype, quant_dtype=tp.float8, weight_quant_dim=0)
    lin.load_state_dict({"weight": w8, "weight_scale": tp.cast(tp.Tensor(scale.astype(np.float32)), dtype)})
    exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 8, 300), K), dtype=dtype)])
    assert _kernels(exe) == ["weight_only_dot"]
    for rows in (1, 8, 300):
        x = _x(rows, dtype)
        _check(_run(exe, x, dtype), x.astype(np.float64) @ (q * scale[:, None]).T, dtype)


def test_a_weight_stored_k_by_n_with_blocks_of_rows():
    """x @ dequantize(q [K, N], scale [K / 64, N]): the block-wise form along the weight's rows."""
    q = RNG.integers(-8, 8, (K, N)).astype(np.int32)
    scale = RNG.uniform(0.01, 0.1, (K // 64, N)).astype(np.float32)
    qt = tp.cast(tp.Tensor(q, device=default_device()), tp.int4)
    qt.eval()
    st = tp.Tensor(scale, device=default_device())

    def model(x):
        return x @ tp.dequantize(qt, st, tp.float32)

    exe = tp.compile(model, args=[tp.InputInfo(shape=((1, 2, 4), K), dtype=tp.float32)])
    assert "weight_only_dot" in _kernels(exe)
    x = _x(4, tp.float32)
    w = q * np.repeat(scale.astype(np.float64), 64, axis=0)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w, tp.float32)


def test_the_switch_keeps_dequantize_and_the_gemm(monkeypatch):
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_DOT", "0")
    lin, w = _linear(4, 32, False, tp.float32)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=(2, K), dtype=tp.float32)])
    assert "weight_only_dot" not in _kernels(exe) and "dot" in _kernels(exe)
    x = _x(2, tp.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)


def test_groups_that_do_not_divide_the_features_are_an_error():
    w = tp.cast(tp.Tensor(np.zeros((8, 100), np.int32)), tp.int4)
    with pytest.raises(tp.TripyException, match=r"block-wise scale of shape \(8, 3\) does not fit an input of shape \(8, 100\)"):
        tp.dequantize(w, tp.ones((8, 3)), tp.float32)


def test_a_zero_point_must_have_the_scales_shape_and_dtype():
    w = tp.cast(tp.Tensor(np.zeros((8, 64), np.int32)), tp.int4)
    with pytest.raises(tp.TripyException, match=r"zero point has shape \(8, 1\), but the scale has shape \(8, 2\)"):
        tp.dequantize(w, tp.ones((8, 2)), tp.float32, zero_point=tp.zeros((8, 1)))
    with pytest.raises(tp.TripyException, match=r"zero point has dtype float16, but the scale has dtype float32"):
        tp.dequantize(w, tp.ones((8, 2)), tp.float32, zero_point=tp.zeros((8, 2), dtype=tp.float16))


# -- int4 weights held two values a byte (pack_int4 / unpack_int4) ------------------------------

def _nibbles(q):
    """numpy's packing of int4 values q [..., K]: value k even in the low nibble, each as q + 8."""
    u = np.concatenate([q, np.full(q.shape[:-1] + (q.shape[-1] % 2,), -8)], axis=-1) + 8
    return (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8).view(np.int8)


@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 7), (1,)])
def test_pack_int4_writes_two_values_a_byte_and_unpack_int4_reads_them(shape):
    q = RNG.integers(-8, 8, shape)
    packed = pack_int4(tp.cast(tp.Tensor(q.astype(np.int32)), tp.int4))
    assert packed.dtype == tp.int8 and packed.shape == shape[:-1] + ((shape[-1] + 1) // 2,)
    assert np.array_equal(np.array(packed.tolist(), np.int8), _nibbles(q))
    back = unpack_int4(tp.Tensor(_nibbles(q)), shape[-1])
    assert back.dtype == tp.int4 and np.array_equal(np.array(tp.cast(back, tp.int32).tolist()), q)


def _packed_linear(K_, group, zero, dtype=tp.float32):
    """A Linear whose int4 weight is unpack_int4 of packed bytes, and its weight in float64."""
    q = RNG.integers(-8, 8, (N, K_))
    G = K_ // group
    scale = _rounded(RNG.uniform(0.002, 0.02, (N, G)), dtype)
    zp = _rounded(RNG.integers(-3, 4, (N, G)).astype(np.float64), dtype) if zero else np.zeros((N, G))
    packed = tp.Tensor(_nibbles(q), device=default_device())
    lin = tp.Linear(K_, N, bias=False, dtype=dtype, quant_dtype=tp.int4)
    state = {"weight": unpack_int4(packed, K_), "weight_scale": tp.cast(tp.Tensor(scale.astype(np.float32)), dtype)}
    if zero:
        state["weight_zero_point"] = tp.cast(tp.Tensor(zp.astype(np.float32)), dtype)
    lin.load_state_dict(state)
    w = (q - np.repeat(zp, group, axis=1)) * np.repeat(scale, group, axis=1)
    return lin, w, packed


@pytest.mark.parametrize("rows", [1, 5, 300])
def test_a_packed_int4_weight_is_read_in_place(rows):
    lin, w, packed = _packed_linear(K, 64, True)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, rows, rows), K), dtype=tp.float32)])
    assert "weight_only_dot" in _kernels(exe)
    # The kernel's weight is the packed bytes, [N, K / 2], and the model's weight a view of them.
    assert re.search(rf"= constant \d+ i8\[\$\d+, \$\d+\]", exe._impl.program_text)
    assert not lin.weight._node.is_evaluated
    x = _x(rows, tp.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)


@pytest.mark.parametrize("rows, cols", [((8, 40), (0, K)), ((0, N), (128, 256)), ((30, 70), (64, 192)), ((0, N), (0, 101))],
                         ids=["rows", "columns", "both", "odd_end"])
def test_a_window_of_a_packed_int4_weight_is_read_in_place(rows, cols):
    """A tensor-parallel rank's share: rows (column-parallel) or a byte-aligned range of the input
    features (row-parallel) of unpack_int4's view, dequantized with that window's scales (groups of
    8 with zero points; one scale per row where the window ends inside a group)."""
    q = RNG.integers(-8, 8, (N, K))
    packed = tp.Tensor(_nibbles(q), device=default_device())
    (r0, r1), (c0, c1) = rows, cols
    window = unpack_int4(packed, K)[r0:r1, c0:c1]
    if c1 % 8 == 0:
        scale = RNG.uniform(0.002, 0.02, (N, K // 8)).astype(np.float32)
        zp = RNG.integers(-3, 4, (N, K // 8)).astype(np.float32)
        s, z = (tp.Tensor(t[r0:r1, c0 // 8 : c1 // 8].copy(), device=default_device()) for t in (scale, zp))
        w = (q - np.repeat(zp, 8, axis=1)) * np.repeat(scale, 8, axis=1)
        dequantized = lambda: tp.dequantize(window, s, tp.float32, zero_point=z)
    else:
        scale = RNG.uniform(0.002, 0.02, (N,)).astype(np.float32)
        s = tp.Tensor(scale[r0:r1].copy(), device=default_device())
        w = q * scale[:, None]
        dequantized = lambda: tp.dequantize(window, s, tp.float32, dim=0)

    def model(x):
        return x @ tp.transpose(dequantized(), 0, 1)

    exe = tp.compile(model, args=[tp.InputInfo(shape=(3, c1 - c0), dtype=tp.float32)])
    assert _kernels(exe) == ["weight_only_dot"]
    x = RNG.standard_normal((3, c1 - c0)).astype(np.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w[r0:r1, c0:c1].T, tp.float32)


def test_a_window_starting_inside_a_byte_keeps_dequantize_and_the_gemm():
    q = RNG.integers(-8, 8, (N, K))
    packed = tp.Tensor(_nibbles(q), device=default_device())
    scale = tp.Tensor(np.full((N,), 0.5, np.float32), device=default_device())

    def model(x):
        return x @ tp.transpose(tp.dequantize(unpack_int4(packed, K)[:, 1:65], scale, tp.float32, dim=0), 0, 1)

    exe = tp.compile(model, args=[tp.InputInfo(shape=(2, 64), dtype=tp.float32)])
    assert "weight_only_dot" not in _kernels(exe)
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ (q[:, 1:65] * 0.5).T, tp.float32)


def test_a_packed_int4_weight_dequantizes_for_the_gemm_where_the_product_is_off(monkeypatch):
    """The GPU's form past its decode sizes: the bytes unpacked, dequantized, then the GEMM."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_DOT", "0")
    global K
    saved, K = K, 97  # an odd count of input features: the last byte holds one value
    try:
        lin, w, _ = _packed_linear(K, 97, False)
        exe = tp.compile(lin, args=[tp.InputInfo(shape=(4, K), dtype=tp.float32)])
        assert "weight_only_dot" not in _kernels(exe) and "dot" in _kernels(exe)
        x = _x(4, tp.float32)
        _check(_run(exe, x, tp.float32), x.astype(np.float64) @ w.T, tp.float32)
    finally:
        K = saved


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("packed", [True, False], ids=["packed_bytes", "int4_values"])
def test_a_dequantize_for_the_gemm_is_one_kernel_writing_the_weight(monkeypatch, packed, dtype):
    """The GPU's form past its decode sizes: one fused kernel reads the int4 bytes (or values) and
    the [N, groups] scales and zero points and writes the float weight, the GEMM's one temporary;
    no kernel of its own broadcasts the scales or unpacks the values."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_DOT", "0")
    lin, w = _packed_linear(K, 64, True, dtype)[:2] if packed else _linear(4, 64, True, dtype)
    exe = tp.compile(lin, args=[tp.InputInfo(shape=(40, K), dtype=dtype)])
    assert _kernels(exe) == ["fused", "dot"]
    temps = re.findall(r"^b\d+ = temp (\w+)\[", exe._impl.program_text, re.M)
    assert temps == ["f32" if dtype == tp.float32 else "bf16"]
    x = _x(40, dtype)
    _check(_run(exe, x, dtype), x.astype(np.float64) @ w.T, dtype)


def test_packed_bytes_of_a_k_by_n_weight_are_repacked_along_k():
    q = RNG.integers(-8, 8, (K, N))
    scale = RNG.uniform(0.01, 0.1, (K // 64, N)).astype(np.float32)
    packed = tp.Tensor(_nibbles(q), device=default_device())
    st = tp.Tensor(scale, device=default_device())

    def model(x):
        return x @ tp.dequantize(unpack_int4(packed, N), st, tp.float32)

    exe = tp.compile(model, args=[tp.InputInfo(shape=((1, 2, 4), K), dtype=tp.float32)])
    assert "weight_only_dot" in _kernels(exe)
    x = _x(3, tp.float32)
    _check(_run(exe, x, tp.float32), x.astype(np.float64) @ (q * np.repeat(scale.astype(np.float64), 64, axis=0)), tp.float32)


def test_unpack_int4_checks_its_bytes():
    with pytest.raises(tp.TripyException, match=r"cannot unpack to shape \(2, 7\)"):
        unpack_int4(tp.zeros((2, 3), dtype=tp.int8), 7)
    with pytest.raises(tp.TripyException, match="unpack_int4"):
        unpack_int4(tp.zeros((2, 4), dtype=tp.int32), 8)
    with pytest.raises(tp.TripyException, match="pack_int4 takes an int4 tensor"):
        pack_int4(tp.zeros((2, 4), dtype=tp.int8))


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("rows", [1, 3, 300])
def test_a_swiglus_down_product_reads_the_gate_and_up_halves_itself(dtype, rows):
    """down(silu(gate) * up) with gate and up the two halves of one value (a Llama MLP's gate_up
    product): the weight-only product reads that value and forms its x as it reads it where the
    backend's kernels do (the CPU's, at any rows; the GPU's read x as it is), the SiLU's own kernel
    gone, and computes what the separate kernels would (x rounded to its dtype before the product)."""
    down, w = _linear(4, 64, True, dtype)

    class Mlp(tp.Module):
        def __init__(self):
            super().__init__()
            self.down = down

        def forward(self, y):
            gate, up = tp.split(y, 2, dim=-1)
            return self.down(tp.silu(gate) * up)

    y = _rounded(RNG.standard_normal((rows, 2 * K)), dtype).astype(np.float32)
    exe = tp.compile(Mlp(), args=[tp.InputInfo((rows, 2 * K), dtype=dtype)])
    gated = default_device().kind == "cpu"
    assert _kernels(exe) == (["weight_only_dot"] if gated else ["fused", "weight_only_dot"]), exe._impl.program_text
    assert ("gated = true" in exe._impl.program_text) == gated
    g, u = y[:, :K].astype(np.float64), y[:, K:].astype(np.float64)
    x = _rounded(g / (1.0 + np.exp(-g)) * u, dtype)
    _check(_run(exe, y, dtype), x @ w.T, dtype)


def test_a_float8_weights_nan_reaches_only_its_outputs():
    """A NaN among float8 weights (S.1111.111) makes its output feature's values NaN, no others."""
    w = RNG.standard_normal((N, K)).astype(np.float32)
    w[3, 5] = np.nan
    w8 = tp.cast(tp.Tensor(w, device=default_device()), tp.float8)
    lin = tp.Linear(K, N, bias=False, dtype=tp.float32, quant_dtype=tp.float8, weight_quant_dim=0)
    lin.load_state_dict({"weight": w8, "weight_scale": tp.Tensor(np.full((N,), 0.5, np.float32))})
    exe = tp.compile(lin, args=[tp.InputInfo(shape=((1, 2, 4), K), dtype=tp.float32)])
    out = _run(exe, _x(2, tp.float32), tp.float32)
    assert np.isnan(out[:, 3]).all() and np.isfinite(np.delete(out, 3, axis=1)).all()

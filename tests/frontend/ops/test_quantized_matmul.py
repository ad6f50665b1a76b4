"""quantize/dequantize around a matmul compiles to a low-precision GEMM (flat::quantized_dot): the
dot reads the int8 / float8 values and accumulates in int32 / float32, then one rescale by the
folded scales (for float8 with per-tensor scales, the GEMM's own: it writes the dequantized dtype).
Checked against numpy in float64 on every device, static and dynamic shapes; forms
that must not match (scales computed at run time, a scale along the contracted axis) keep the float
GEMM and stay right; weight-only quantization (a float activation) becomes the weight-only product
instead (flat::weight_only_dot, test_weight_only_dot.py), never an int8 GEMM, and so does an int8
dot of decode sizes where the device says so (the GPU: up to 32 rows)."""

import re

import numpy as np
import pytest

import tripy as tp
from tripy import _C
from tripy.frontend.device import default_device
from test_weight_only_dot import _kernels  # the program's kernel kinds, in order

RNG = np.random.default_rng(5)
K, N = 64, 32  # multiples of 16: cuBLASLt's int8 and float8 alignment rules hold on the GPU
SX = 0.5  # the activation's scale: x is built from exact multiples of it


def _dev(data, **kwargs):
    return tp.Tensor(data, device=default_device(), **kwargs)


def _buffer_dtypes(text):
    return dict(re.findall(r"^(b\d+) = (?:input|temp|constant|output)(?: \d+)? (\w+)\[", text, re.M))


def _dot_dtypes(exe):
    """(lhs, rhs, result) dtypes of every dot kernel in the compiled program."""
    text = exe._impl.program_text
    dtypes = _buffer_dtypes(text)
    dots = re.findall(r"^(b\d+) = dot '[^']*'\((b\d+), (b\d+)", text, re.M)
    return [(dtypes.get(a), dtypes.get(b), dtypes.get(out)) for out, a, b in dots]


def _fires(device, qdtype):
    int8, float8, _ = _C._low_precision_gemms(device)
    return int8 if qdtype == tp.int8 else float8


def _weight_only(device, qdtype, rows):
    """Whether an int8 dot of at most `rows` rows with a constant weight is the weight-only product
    on `device` (the rows up to which it is: 0 never, -1 always)."""
    limit = _C._low_precision_gemms(device)[2] if qdtype == tp.int8 else 0
    return limit < 0 or rows <= limit


def _weight(qdtype, shape):
    """Quantized weight values that every dtype holds exactly (float8 e4m3: integers up to 16)."""
    hi = 127 if qdtype == tp.int8 else 16
    return RNG.integers(-hi, hi + 1, shape).astype(np.float64)


def _case(qdtype, dtype, layout, per_column):
    """The model and its float64 reference: x @ dequantize(w) with x quantized per tensor."""
    np_dtype = np.float32 if dtype == tp.float32 else np.float16
    w_shape = (K, N) if layout == "kn" else (N, K)
    wq = _weight(qdtype, w_shape)
    sw = np.linspace(0.1, 0.4, N) if per_column else np.array(0.25)
    sw = sw.astype(np_dtype)  # the model's scales are in its dtype: the reference uses those values
    # The weight goes in quantized: tp.quantize of exact values with scale 1 gives them unchanged.
    w_q = tp.quantize(tp.Tensor(wq.astype(np.float32)), 1.0, qdtype)
    w_q.eval()
    dim = None if not per_column else (1 if layout == "kn" else 0)
    w_scale = tp.Tensor(sw) if per_column else float(sw)

    def model(x):
        xa = tp.dequantize(tp.quantize(x, SX, qdtype), SX, dtype)
        wd = tp.dequantize(w_q, w_scale, dtype, dim=dim)
        return xa @ (wd if layout == "kn" else tp.transpose(wd, 0, 1))

    s64 = sw.astype(np.float64)
    w_ref = wq * (s64 if layout == "kn" else s64[:, None]) if per_column else wq * float(sw)
    w_kn = w_ref if layout == "kn" else w_ref.T
    return model, w_kn, np_dtype


def _x(rows, qdtype, np_dtype):
    return (_weight(qdtype, (rows, K)) * SX).astype(np_dtype)


@pytest.mark.parametrize("qdtype", [tp.int8, tp.float8], ids=["int8", "float8"])
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per_tensor", "per_column"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_quantized_matmul_runs_as_a_low_precision_gemm(qdtype, dtype, layout, per_column, dynamic, device):
    model, w_kn, np_dtype = _case(qdtype, dtype, layout, per_column)
    shape = ((1, 4, 8), K) if dynamic else (4, K)
    exe = tp.compile(model, args=[tp.InputInfo(shape, dtype=dtype)])
    # float8 with per-tensor scales: the rescale is the GEMM's, which writes x's dtype.
    scaled = qdtype == tp.float8 and not per_column
    float8_out = {tp.float32: "f32", tp.float16: "f16"}[dtype] if scaled else "f32"
    want = {tp.int8: ("i8", "i8", "i32"), tp.float8: ("f8", "f8", float8_out)}[qdtype]
    if _weight_only(device, qdtype, 8):  # the int8 weight read as it is stored
        assert _dot_dtypes(exe) == [] and re.search(r"^b\d+ = weight_only_dot ", exe._impl.program_text, re.M)
    elif _fires(device, qdtype):
        assert _dot_dtypes(exe) == [want], exe._impl.program_text
        # x's quantize, the GEMM, and the rescale unless the GEMM took it.
        assert len(_kernels(exe)) == (2 if scaled else 3), exe._impl.program_text
    for rows in (3, 8) if dynamic else (4,):
        x = _x(rows, qdtype, np_dtype)
        ref = x.astype(np.float64) @ w_kn
        out = np.asarray(exe(_dev(x))).astype(np.float64)
        tol = (1e-5 if dtype == tp.float32 else 2e-3) * np.abs(ref).max()
        np.testing.assert_allclose(out, ref, rtol=0, atol=tol)


def _float_gemm_stays(exe):
    return all(d[0] in ("f32", "f16") for d in _dot_dtypes(exe)) and _dot_dtypes(exe)


def test_scales_computed_at_run_time_keep_the_float_gemm(device):
    wq = _weight(tp.int8, (K, N))
    w_q = tp.Tensor(wq.astype(np.int8))

    def model(x, s):
        xa = tp.dequantize(tp.quantize(x, s, tp.int8), s, tp.float32)
        return xa @ tp.dequantize(w_q, s, tp.float32)

    exe = tp.compile(model, args=[tp.InputInfo((4, K), dtype=tp.float32), tp.InputInfo((), dtype=tp.float32)])
    assert _float_gemm_stays(exe), exe._impl.program_text
    x = _x(4, tp.int8, np.float32)
    ref = x.astype(np.float64) @ (wq * SX)
    out = np.asarray(exe(_dev(x), _dev(np.array(SX, dtype=np.float32))))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_a_weight_scale_along_the_contracted_axis_keeps_the_float_gemm(device):
    wq = _weight(tp.int8, (K, N))
    sk = np.linspace(0.1, 0.4, K).astype(np.float32)
    w_q = tp.Tensor(wq.astype(np.int8))

    def model(x):
        xa = tp.dequantize(tp.quantize(x, SX, tp.int8), SX, tp.float32)
        return xa @ tp.dequantize(w_q, tp.Tensor(sk), tp.float32, dim=0)  # per row of [K, N]: along K

    exe = tp.compile(model, args=[tp.InputInfo((4, K), dtype=tp.float32)])
    assert _float_gemm_stays(exe), exe._impl.program_text
    x = _x(4, tp.int8, np.float32)
    ref = x.astype(np.float64) @ (wq * sk.astype(np.float64)[:, None])
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_an_int8_weight_given_at_run_time_takes_the_int8_gemm(device):
    """A weight that is an input, not a constant, is no weight-only product's: the int8 GEMM takes it."""
    wq = _weight(tp.int8, (N, K))

    def model(x, w):
        xa = tp.dequantize(tp.quantize(x, SX, tp.int8), SX, tp.float32)
        return xa @ tp.transpose(tp.dequantize(w, 0.25, tp.float32), 0, 1)

    exe = tp.compile(model, args=[tp.InputInfo((4, K), dtype=tp.float32), tp.InputInfo((N, K), dtype=tp.int8)])
    if _fires(device, tp.int8):
        assert _dot_dtypes(exe) == [("i8", "i8", "i32")], exe._impl.program_text
    x = _x(4, tp.int8, np.float32)
    ref = x.astype(np.float64) @ (wq * 0.25).T
    out = np.asarray(exe(_dev(x), _dev(wq.astype(np.int8))))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_weight_only_quantization_reads_the_packed_weight_not_an_int8_gemm(device):
    wq = _weight(tp.int8, (K, N))
    w_q = tp.Tensor(wq.astype(np.int8))
    exe = tp.compile(lambda x: x @ tp.dequantize(w_q, 0.25, tp.float32), args=[tp.InputInfo((4, K), dtype=tp.float32)])
    assert _dot_dtypes(exe) == [], exe._impl.program_text
    assert re.search(r"^b\d+ = weight_only_dot ", exe._impl.program_text, re.M), exe._impl.program_text
    x = RNG.standard_normal((4, K)).astype(np.float32)
    ref = x.astype(np.float64) @ (wq * 0.25)
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), ref, rtol=1e-5, atol=1e-4)


def test_quantized_linear_saves_and_loads_with_its_int8_gemm(device, tmp_path):
    layer = tp.Linear(K, N, quant_dtype=tp.int8, weight_quant_dim=0)
    wq = _weight(tp.int8, (N, K))
    sw = np.linspace(0.1, 0.4, N).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    layer.load_state_dict(
        {
            "weight": tp.Tensor(wq.astype(np.int8)),
            "weight_scale": tp.Tensor(sw),
            "bias": tp.Tensor(bias),
            "input_scale": tp.Tensor(np.float32(SX)),
        }
    )
    # Up to 128 rows: past the GPU's decode sizes (the CPU's weight-only product takes any rows).
    exe = tp.compile(layer, args=[tp.InputInfo(((1, 2, 128), K), dtype=tp.float32)])
    if _weight_only(device, tp.int8, 128):
        assert re.search(r"^b\d+ = weight_only_dot ", exe._impl.program_text, re.M), exe._impl.program_text
    elif _fires(device, tp.int8):
        assert _dot_dtypes(exe) == [("i8", "i8", "i32")], exe._impl.program_text
    path = str(tmp_path / "qlinear.tpy")
    exe.save(path)
    loaded = tp.Executable.load(path)
    x = _x(3, tp.int8, np.float32)
    ref = x.astype(np.float64) @ (wq * sw.astype(np.float64)[:, None]).T + bias
    for e in (exe, loaded):
        np.testing.assert_allclose(np.asarray(e(_dev(x))), ref, rtol=0, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [tp.bfloat16, tp.float16], ids=["bf16", "f16"])
def test_a_float8_gemm_writes_its_rescaled_sum_in_the_dequantized_dtype(dtype, device, tmp_path):
    """Per-tensor scales: the GEMM scales its float32 sums and rounds them once to x's dtype (no
    float32 product in memory, no rescale kernel), through a saved and loaded executable too."""
    model, w_kn, _ = _case(tp.float8, dtype, "nk", per_column=False)
    exe = tp.compile(model, args=[tp.InputInfo((4, K), dtype=dtype)])
    if _fires(device, tp.float8):
        text = exe._impl.program_text
        assert _kernels(exe) == ["fused", "dot"], text
        assert re.search(r"^b\d+ = dot '[^']*'\(b\d+, b\d+\) \{transpose_rhs = true, scale = 0.125\}", text, re.M), text
    path = str(tmp_path / "f8.tpy")
    exe.save(path)
    x = _x(4, tp.float8, np.float32)
    ref = x.astype(np.float64) @ w_kn
    for e in (exe, tp.Executable.load(path)):
        out = np.asarray(tp.cast(e(tp.cast(_dev(x), dtype)), tp.float32)).astype(np.float64)
        # One rounding of the exact sum to the output dtype: half a unit in its last place.
        ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - (7 if dtype == tp.bfloat16 else 10))
        np.testing.assert_array_less(np.abs(out - ref), ulp / 2 + 1e-9)


def test_a_float8_linear_with_a_bias_adds_it_after_the_scaled_gemm(device):
    layer = tp.Linear(K, N, quant_dtype=tp.float8, dtype=tp.float16)
    wq = _weight(tp.float8, (N, K))
    bias = RNG.standard_normal(N).astype(np.float16)
    layer.load_state_dict(
        {
            "weight": tp.quantize(tp.Tensor(wq.astype(np.float32)), 1.0, tp.float8),
            "weight_scale": tp.Tensor(np.float16(0.25)),
            "bias": tp.Tensor(bias),
            "input_scale": tp.Tensor(np.float16(SX)),
        }
    )
    exe = tp.compile(layer, args=[tp.InputInfo((4, K), dtype=tp.float16)])
    if _fires(device, tp.float8):
        assert _dot_dtypes(exe) == [("f8", "f8", "f16")], exe._impl.program_text
    x = _x(4, tp.float8, np.float16)
    ref = x.astype(np.float64) @ (wq * 0.25).T + bias.astype(np.float64)
    out = np.asarray(exe(_dev(x))).astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-3 * np.abs(ref).max())

"""Quantization in nvtripy's forms: scales as numbers and lists, block-wise int4 scales, and a
quantized Linear that loads float weights (quantized at each call) or quantized ones, with an
optional input_scale; all against numpy in float64."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(3)


def _quant_ref(x, scale, lo, hi):
    # Round half to even, as numpy and tp.round do.
    return np.clip(np.round(x / scale), lo, hi)


def test_scalar_scale_as_a_python_number():
    x = RNG.standard_normal((3, 4)).astype(np.float32) * 3
    q = tp.quantize(tp.Tensor(x), 0.05, tp.int8)
    np.testing.assert_array_equal(np.asarray(q), _quant_ref(x.astype(np.float64), 0.05, -128, 127))
    back = tp.dequantize(q, 0.05, tp.float32)
    np.testing.assert_allclose(np.asarray(back), np.asarray(q).astype(np.float64) * 0.05, rtol=1e-6)


def test_per_channel_scale_as_a_list():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    scale = [0.01, 0.02, 0.03]
    q = tp.quantize(tp.Tensor(x), scale, tp.int8, dim=1)
    np.testing.assert_array_equal(np.asarray(q), _quant_ref(x.astype(np.float64), np.array(scale), -128, 127))


@pytest.mark.parametrize("rows, blocks", [(4, 1), (4, 2), (6, 3)])
def test_block_wise_int4_matches_numpy(rows, blocks):
    x = RNG.standard_normal((rows, 5)).astype(np.float32) * 4
    scale = RNG.uniform(0.5, 1.5, (blocks, 5)).astype(np.float32)
    q = tp.quantize(tp.Tensor(x), tp.Tensor(scale), tp.int4)
    out = tp.dequantize(q, scale.tolist(), tp.float32)
    per_row = np.repeat(scale.astype(np.float64), rows // blocks, axis=0)
    want = _quant_ref(x.astype(np.float64), per_row, -8, 7) * per_row
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


def test_block_wise_scale_that_does_not_fit_is_rejected():
    with pytest.raises(tp.TripyException, match=r"block-wise scale of shape \(3, 2\) does not fit"):
        tp.quantize(tp.ones((4, 2)), tp.ones((3, 2)), tp.int4)
    with pytest.raises(tp.TripyException, match="Block-wise .* are for int4 only"):
        tp.quantize(tp.ones((4, 2)), tp.ones((2, 2)), tp.int8)


def test_non_numeric_scale_is_rejected():
    with pytest.raises(tp.TripyException, match="A scale must be a tensor, a number or a list"):
        tp.quantize(tp.ones((2,)), "0.5", tp.int8)


def _linear_ref(x, w, scale, b, dim, lo, hi):
    shape = [-1, 1] if dim == 0 else [1, -1]
    s = np.asarray(scale, np.float64).reshape(shape) if dim is not None else np.float64(scale)
    return x @ (_quant_ref(w, s, lo, hi) * s).T + b


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_quantized_linear_loads_float_weights(dim):
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    scale = np.array(0.02, np.float32) if dim is None else RNG.uniform(0.01, 0.03, w.shape[dim]).astype(np.float32)
    linear = tp.Linear(4, 3, quant_dtype=tp.int8, weight_quant_dim=dim)
    linear.load_state_dict({"weight": tp.Tensor(w), "weight_scale": tp.Tensor(scale), "bias": tp.Tensor(b)})
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    want = _linear_ref(x.astype(np.float64), w.astype(np.float64), scale, b, dim, -128, 127)
    np.testing.assert_allclose(np.asarray(linear(tp.Tensor(x))), want, rtol=1e-5, atol=1e-5)
    exe = tp.compile(linear, args=[tp.InputInfo(((1, 2, 4), 4), dtype=tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-5, atol=1e-5)


def test_quantized_linear_keeps_accepting_quantized_weights():
    linear = tp.Linear(2, 1, quant_dtype=tp.int8)
    linear.load_state_dict({"weight": tp.Tensor([[3, -2]], dtype=tp.int8), "weight_scale": tp.Tensor(0.5),
                            "bias": tp.zeros((1,))})
    assert linear(tp.Tensor([[1.0, 1.0]])).tolist() == [[0.5]]
    with pytest.raises(tp.TripyException, match="it has dtype float32 or int8, but the new value has dtype int32"):
        linear.load_state_dict({"weight": tp.Tensor([[1, 1]], dtype=tp.int32)}, strict=False)


def test_block_wise_int4_linear():
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    scale = RNG.uniform(0.2, 0.4, (2, 6)).astype(np.float32)
    linear = tp.Linear(6, 4, bias=False, quant_dtype=tp.int4)
    linear.load_state_dict({"weight": tp.Tensor(w), "weight_scale": tp.Tensor(scale)})
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    per_row = np.repeat(scale.astype(np.float64), 2, axis=0)
    want = x.astype(np.float64) @ (_quant_ref(w.astype(np.float64), per_row, -8, 7) * per_row).T
    np.testing.assert_allclose(np.asarray(linear(tp.Tensor(x))), want, rtol=1e-5, atol=1e-5)


def test_input_scale_is_an_optional_parameter():
    linear = tp.Linear(2, 1, quant_dtype=tp.int8)
    assert "input_scale" not in linear.state_dict()
    weights = {"weight": tp.Tensor([[1.0, 1.0]]), "weight_scale": tp.Tensor(1.0), "bias": tp.zeros((1,))}
    assert linear.load_state_dict(weights) == ([], [])  # not missing
    linear.load_state_dict({**weights, "input_scale": tp.Tensor(0.5)})
    assert "input_scale" in linear.state_dict()
    # The input goes through int8 with scale 0.5: 0.7 -> round(1.4) * 0.5 = 0.5, 0.8 -> 1.0.
    assert linear(tp.Tensor([[0.7, 0.8]])).tolist() == [[1.5]]


# --- quantize/dequantize as core ops: dynamic dims, dtypes, errors naming the user's line --------

HERE = "test_quantize.py"


@pytest.mark.parametrize("form", ["tensor", "channel", "block"])
def test_compiled_round_trip_on_dynamic_dims_at_min_opt_max(form):
    if form == "tensor":
        scale, kwargs, dtype, lo, hi = 0.05, {}, tp.int8, -128, 127
        dims, sizes = ((1, 3, 7), (2, 5, 9)), [(1, 2), (3, 5), (7, 9)]
        ref_scale = lambda shape: np.float64(np.float32(0.05))
    elif form == "channel":
        s = RNG.uniform(0.01, 0.05, 4).astype(np.float32)
        scale, kwargs, dtype, lo, hi = tp.Tensor(s), {"dim": 1}, tp.int8, -128, 127
        dims, sizes = ((1, 3, 7), 4), [(1, 4), (3, 4), (7, 4)]
        ref_scale = lambda shape: s.astype(np.float64)[None, :]
    else:
        s = RNG.uniform(0.3, 0.6, (2, 5)).astype(np.float32)
        scale, kwargs, dtype, lo, hi = tp.Tensor(s), {}, tp.int4, -8, 7
        dims, sizes = ((2, 4, 8), 5), [(2, 5), (4, 5), (8, 5)]
        ref_scale = lambda shape: np.repeat(s.astype(np.float64), shape[0] // 2, axis=0)

    def f(x):
        return tp.dequantize(tp.quantize(x, scale, dtype, **kwargs), scale, tp.float32, **kwargs)

    exe = tp.compile(f, args=[tp.InputInfo(dims, dtype=tp.float32)])
    for shape in sizes:
        x = (RNG.standard_normal(shape) * 4).astype(np.float32)
        sc = ref_scale(shape)
        want = _quant_ref(x.astype(np.float64), sc, lo, hi) * sc
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_quantize_narrow_floats(dtype):
    x = (RNG.standard_normal((3, 8)) * 2).astype(np.float32)
    t = tp.cast(tp.Tensor(x), tp.bfloat16) if dtype == "bfloat16" else tp.Tensor(x.astype(np.float16))
    x64 = np.asarray(tp.cast(t, tp.float32)).astype(np.float64)  # the narrow input, exactly
    q = tp.quantize(t, 0.125, tp.int8)  # a power of two: the division is exact in any float
    assert q.dtype == tp.int8
    np.testing.assert_array_equal(np.asarray(q), _quant_ref(x64, 0.125, -128, 127))
    back = tp.dequantize(q, 0.125, t.dtype)
    assert back.dtype == t.dtype
    np.testing.assert_array_equal(np.asarray(tp.cast(back, tp.float32)), _quant_ref(x64, 0.125, -128, 127) * 0.125)


def test_float8_saturates_without_rounding_to_integers():
    q = tp.quantize(tp.Tensor([0.3, 1000.0, -1000.0]), 1.0, tp.float8)
    assert q.dtype == tp.float8
    back = np.asarray(tp.dequantize(q, 1.0, tp.float32))
    # e4m3 keeps 3 mantissa bits: 0.3 -> 0.3125 (not an integer), +-1000 saturate to +-448.
    np.testing.assert_array_equal(back, [0.3125, 448.0, -448.0])


def test_per_channel_scale_that_does_not_fit_a_dynamic_dim_is_an_error_of_the_call():
    def f(x):
        return tp.quantize(x, [0.1, 0.2, 0.3], tp.int8, dim=0)

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo(((1, 3, 5), 2), dtype=tp.float32)])
    assert np.asarray(exe(tp.Tensor(np.ones((3, 2), np.float32)))).tolist() == [[10, 10], [5, 5], [3, 3]]
    with pytest.raises(tp.TripyException, match="quantize") as e:
        exe(tp.Tensor(np.ones((4, 2), np.float32)))
    assert f"{HERE}:{line}" in str(e.value)


def test_bad_quantize_inputs_name_the_line():
    x, q = tp.ones((4, 2)), tp.Tensor([[1, 2]], dtype=tp.int8)
    for call, match in (
        (lambda: tp.quantize(x, 0.5, tp.int32), "quantize supports int8, int4 and float8, not int32"),
        (lambda: tp.quantize(tp.ones((2,), dtype=tp.int32), tp.Tensor(0.5), tp.int8), "takes a floating-point tensor"),
        (lambda: tp.quantize(x, [0.5, 0.5, 0.5], tp.int8, dim=1), r"per-channel scale of shape \(3,\) does not fit"),
        (lambda: tp.quantize(x, 0.5, tp.int8, dim=2), "dim 2 is out of range for a tensor of rank 2"),
        (lambda: tp.quantize(x, [0.5, 0.5], tp.int8), r"per-tensor scale must be a scalar, but it has shape \(2,\)"),
        (lambda: tp.quantize(x, [[0.5]], tp.int8, dim=0), "per-channel scale must be 1-D"),
        (lambda: tp.quantize(x, tp.Tensor(0.5, dtype=tp.float16), tp.int8), "the scale has dtype float16"),
        (lambda: tp.quantize(x, tp.ones((3, 2)), tp.int4), r"block-wise scale of shape \(3, 2\) does not fit"),
        (lambda: tp.quantize(x, 0.5, tp.int8, dim=0.5), "Expected dim to be an int or None"),
        (lambda: tp.dequantize(x, 0.5, tp.float32), "dequantize takes an int8, int4 or float8 tensor"),
        (lambda: tp.dequantize(q, 0.5, tp.int32), "returns a floating-point dtype, not int32"),
        (lambda: tp.dequantize(q, [1.0, 2.0, 3.0], tp.float32, dim=1), "does not fit dimension 1"),
    ):
        with pytest.raises(tp.TripyException, match=match) as e:
            call()
        assert f"{HERE}:{call.__code__.co_firstlineno}" in str(e.value)

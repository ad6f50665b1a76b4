"""Numeric edges a hostile user reaches first: Python integers that do not fit the dtype, int64
values past 2**53, reductions and normalisations of extreme values, and numpy integer scalars
where Python ints go. Each result is checked against numpy; errors point at the user's line."""

import math

import numpy as np
import pytest

import tripy as tp

INF = float("inf")


def _raises_here(match):
    """A TripyException whose message matches and whose location is this test file."""

    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(tp.TripyException, match=match)
            self._info = self._ctx.__enter__()
            return self._info

        def __exit__(self, *exc):
            suppressed = self._ctx.__exit__(*exc)
            assert "test_numeric_edges.py" in str(self._info.value)
            return suppressed

    return _Check()


# --- Python integers that do not fit the dtype --------------------------------------------------

@pytest.mark.parametrize(
    "value,dtype", [(300, tp.int8), (-129, tp.int8), (2**31, tp.int32), (-(2**31) - 1, tp.int32), (2**63, tp.int64)]
)
def test_full_rejects_an_integer_out_of_the_dtypes_range(value, dtype):
    with _raises_here(f"{value} is out of range for {dtype.name}"):
        tp.full((2,), value, dtype=dtype)


@pytest.mark.parametrize("value,dtype", [(127, tp.int8), (-128, tp.int8), (2**31 - 1, tp.int32), (-(2**31), tp.int32)])
def test_full_keeps_the_dtypes_extreme_integers(device, value, dtype):
    expected = np.full((2,), value, dtype=getattr(np, dtype.name))
    np.testing.assert_array_equal(np.asarray(tp.full((2,), value, dtype=dtype)), expected)


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 3, 2**63 - 1, -(2**63)])
def test_int64_fill_values_reach_the_program_exact(device, value):
    # A rank-0 full is its constant itself: what the Trace op and the binding carry.
    assert tp.full((), value, dtype=tp.int64).tolist() == value


# A one-element constant is a fused kernel's immediate (a double) only where it survives the
# double; an int64 past 2**53 is loaded from its buffer (flat/passes/fusion_codegen.cc).
@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 3])
def test_int64_fill_values_are_exact(device, value):
    out = tp.full((3,), value, dtype=tp.int64)
    np.testing.assert_array_equal(np.asarray(out), np.full((3,), value, dtype=np.int64))


# int64's extremes survive the double immediate: the smallest is a double, and the largest reads
# back as 2**63, which both backends saturate to it (rt::saturated_immediate).
@pytest.mark.parametrize("value", [2**63 - 1, -(2**63)])
def test_int64_extreme_fill_values_are_exact(device, value):
    out = tp.full((3,), value, dtype=tp.int64)
    np.testing.assert_array_equal(np.asarray(out), np.full((3,), value, dtype=np.int64))


def test_int64_scalar_operands_are_exact(device):
    x = tp.Tensor([0, 1], dtype=tp.int64)
    big = 2**53 + 1
    np.testing.assert_array_equal(np.asarray(x + big), np.array([0, 1], dtype=np.int64) + big)
    np.testing.assert_array_equal(np.asarray(tp.maximum(x, big)), np.full((2,), big, dtype=np.int64))


@pytest.mark.parametrize(
    "dtype,value", [(tp.int32, 2**31), (tp.int32, -(2**31) - 1), (tp.int8, 200), (tp.int64, 2**63)]
)
def test_binary_ops_reject_python_integers_out_of_the_tensors_range(dtype, value):
    x = tp.Tensor([1, 2], dtype=dtype)
    with _raises_here(f"{value} is out of range for {dtype.name}"):
        x * value
    with _raises_here(f"{value} is out of range for {dtype.name}"):
        value + x
    with _raises_here(f"{value} is out of range for {dtype.name}"):
        tp.where(tp.Tensor([True, False]), x, value)


def test_float_operands_too_large_for_a_double_are_an_error():
    with _raises_here("too large"):
        tp.ones((2,)) * 10**400
    with _raises_here("too large"):
        tp.full((2,), 10**400)


@pytest.mark.parametrize(
    "start,stop,step,dtype",
    [(250, 260, 1, tp.int8), (2**31 - 2, 2**31 + 1, 1, tp.int32), (0, -200, -1, tp.int8), (100, 300, 100, tp.int8)],
)
def test_arange_rejects_values_past_the_dtypes_range(start, stop, step, dtype):
    with _raises_here(f"out of range for {dtype.name}"):
        tp.arange(start, stop, step, dtype=dtype)


@pytest.mark.parametrize("start,stop,step,dtype", [(120, 128, 3, tp.int8), (2**31 - 3, 2**31, 1, tp.int32), (-128, -120, 2, tp.int8)])
def test_arange_reaches_the_dtypes_extremes(device, start, stop, step, dtype):
    expected = np.arange(start, stop, step, dtype=getattr(np, dtype.name))
    np.testing.assert_array_equal(np.asarray(tp.arange(start, stop, step, dtype=dtype)), expected)


def test_arange_is_exact_for_int64_past_2_pow_53(device):
    start = 2**53 + 1
    out = tp.arange(start, start + 4, dtype=tp.int64)
    np.testing.assert_array_equal(np.asarray(out), np.arange(start, start + 4, dtype=np.int64))


def test_cumsum_of_int8_follows_the_sum_rule_and_returns_int64(device):
    values = np.array([100, 100, 100, -50], dtype=np.int8)
    out = tp.cumsum(tp.Tensor(values), dim=0)
    assert out.dtype == tp.sum(tp.Tensor(values)).dtype == tp.int64
    np.testing.assert_array_equal(np.asarray(out), np.cumsum(values, dtype=np.int64))


# --- floating point: stable reductions and normalisations -------------------------------------

def _log_softmax_ref(x, axis=None):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


@pytest.mark.parametrize("values", [[1000.0, 0.0], [-1000.0, 0.0, 1000.0], [1e30, -1e30], [1e-30, -1e-30, 0.0]])
def test_log_softmax_of_extreme_values_is_finite_and_exact(device, values):
    out = np.asarray(tp.log_softmax(tp.Tensor(values), dim=0))
    np.testing.assert_allclose(out, _log_softmax_ref(np.float32(values)), rtol=1e-6)


def test_log_softmax_over_all_dims_and_of_float16(device):
    x = np.array([[80.0, 0.0], [-80.0, 10.0]], dtype=np.float32)
    np.testing.assert_allclose(np.asarray(tp.log_softmax(tp.Tensor(x))), _log_softmax_ref(x), rtol=1e-6)
    half = tp.log_softmax(tp.Tensor(x.astype(np.float16)), dim=1)
    assert half.dtype == tp.float16
    np.testing.assert_allclose(np.asarray(half).astype(np.float32), _log_softmax_ref(x, axis=1), rtol=1e-3)


def test_log_softmax_of_minus_infinity_is_minus_infinity(device):
    out = np.asarray(tp.log_softmax(tp.Tensor([-INF, 0.0]), dim=0))
    np.testing.assert_array_equal(out, np.array([-INF, 0.0], dtype=np.float32))


@pytest.mark.parametrize("values", [[1e30, -1e30, 0.0], [1000.0, 0.0], [-INF, 1.0, 2.0]])
def test_softmax_of_extreme_values(device, values):
    out = np.asarray(tp.softmax(tp.Tensor(values), dim=0))
    np.testing.assert_allclose(out, np.exp(_log_softmax_ref(np.float32(values), axis=0)), rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    "a,b,expected",
    [([INF], [-INF], False), ([INF], [INF], True), ([-INF], [-INF], True), ([INF], [1e30], False),
     ([1.0, INF], [1.0, INF], True), ([float("nan")], [float("nan")], False), ([1.0], [1.0 + 1e-7], True)],
)
def test_allclose_treats_infinities_as_numpy_does(device, a, b, expected):
    assert np.allclose(np.float32(a), np.float32(b)) == expected
    assert tp.allclose(tp.Tensor(a), tp.Tensor(b)) == expected


def test_allclose_of_integer_tensors(device):
    a = tp.Tensor([1, 2], dtype=tp.int32)
    assert tp.allclose(a, tp.Tensor([1, 2], dtype=tp.int32))
    assert not tp.allclose(a, tp.Tensor([1, 3], dtype=tp.int32))


def test_var_is_the_two_pass_variance(device):
    # E[x^2] - E[x]^2 would lose every digit here in float32.
    values = np.float32([10000.0 + 1, 10000.0 + 2, 10000.0 + 3, 10000.0 + 4])
    np.testing.assert_allclose(np.asarray(tp.var(tp.Tensor(values))), np.var(values, ddof=1), rtol=1e-6)


def test_var_of_float16_does_not_overflow(device):
    values = np.float16([200.0, -200.0, 0.0])  # a float16 sum of the squares, 80000, is inf
    out = tp.var(tp.Tensor(values))
    assert out.dtype == tp.float16
    np.testing.assert_allclose(np.float32(np.asarray(out)), np.var(values.astype(np.float32), ddof=1), rtol=1e-3)


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16])
def test_mean_of_narrow_floats_does_not_overflow(device, dtype):
    # The float16 sum, 170000, is inf; the mean is computed in float32 and rounded once.
    values = np.float32([60000.0, 60000.0, 50000.0])
    out = tp.mean(tp.cast(tp.Tensor(values), dtype))
    assert out.dtype == dtype
    np.testing.assert_allclose(np.float32(np.asarray(tp.cast(out, tp.float32))), np.mean(values), rtol=1e-2)
    rows = tp.mean(tp.cast(tp.Tensor(np.stack([values, -values])), dtype), dim=1, keepdim=True)
    np.testing.assert_allclose(np.asarray(tp.cast(rows, tp.float32)), [[np.mean(values)], [-np.mean(values)]], rtol=1e-2)


def test_sum_and_max_of_infinities(device):
    x = np.float32([INF, 1.0, -1e30])
    assert np.asarray(tp.sum(tp.Tensor(x))) == np.sum(x)
    assert np.asarray(tp.max(tp.Tensor(x))) == np.max(x)
    assert math.isnan(np.asarray(tp.sum(tp.Tensor([INF, -INF]))))


def test_layernorm_of_large_values(device):
    x = np.float32([[1e4 + 1, 1e4 + 2, 1e4 + 3, 1e4 + 4], [1e18, -1e18, 1e18, -1e18]])
    ln = tp.LayerNorm(4)
    ln.weight = tp.ones((4,))
    ln.bias = tp.zeros((4,))
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + ln.eps)
    np.testing.assert_allclose(np.asarray(ln(tp.Tensor(x))), ref, rtol=1e-4, atol=1e-4)


def _rmsnorm_ref(x, eps):
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)).astype(np.float32)


F32_MAX = float(np.finfo(np.float32).max)


# Squares past float32's range (x * x overflows past 1.8e19) and below its normal range (past
# 1e-19): the result is at most sqrt(n), so it is computed as in float64 and rounded once.
@pytest.mark.parametrize("eps", [0.0, 1e-5])
@pytest.mark.parametrize(
    "row",
    [[1e18, -1e18, 1e18, -1e18], [3e-20, 4e-20, 0.0, 0.0], [2e19, 1.0, -3e19, 0.5], [F32_MAX, F32_MAX, -F32_MAX, F32_MAX],
     [F32_MAX, 1e-30, 0.0, 3.0], [1e30, 1e30, 1e30, -1e30], [1e-30, 0.0, 0.0, 0.0], [1e-45, -1e-45, 0.0, 1e-45],
     [3.0, 4.0, 0.0, 0.0], [INF, 1.0, 2.0, 3.0], [float("nan"), 1.0, 2.0, 3.0]],
)
def test_rmsnorm_of_extreme_values(device, row, eps):
    x = np.float32([row, [3.0, 4.0, 0.0, 0.0]])  # a second, ordinary row beside it
    norm = tp.RMSNorm(4, eps=eps)
    norm.weight = tp.ones((4,))
    np.testing.assert_allclose(np.asarray(norm(tp.Tensor(x))), _rmsnorm_ref(x, eps), rtol=1e-6, atol=0)


def test_rmsnorm_of_float16_rows_past_the_float16_range_of_squares(device):
    x = np.float16([[60000.0, -60000.0, 1.0, 0.0], [1e-7, 0.0, 0.0, -1e-7]])
    norm = tp.RMSNorm(4, dtype=tp.float16, eps=0.0)
    norm.weight = tp.ones((4,), dtype=tp.float16)
    out = norm(tp.Tensor(x))
    assert out.dtype == tp.float16
    want = _rmsnorm_ref(x.astype(np.float32), 0.0).astype(np.float16)  # rounded once, into float16's subnormals too
    np.testing.assert_allclose(np.float32(np.asarray(out)), np.float32(want), rtol=1e-3, atol=6e-8)


def test_rmsnorm_of_huge_rows_compiled_with_a_dynamic_batch(device):
    norm = tp.RMSNorm(3, eps=1e-6)
    norm.weight = tp.Tensor([1.0, 2.0, -1.0])
    exe = tp.compile(norm, args=[tp.InputInfo(((1, 2, 4), 3), dtype=tp.float32)])
    x = np.float32([[1e25, -2e25, 3e25], [1.0, 2.0, 3.0], [F32_MAX, 0.0, -F32_MAX]])
    want = _rmsnorm_ref(x, 1e-6) * np.float32([1.0, 2.0, -1.0])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-6)


# --- validation: dims, indices and numpy integer scalars ---------------------------------------

def test_update_slice_rejects_a_float_dim():
    x = tp.ones((3,))
    with _raises_here("dim to be an int"):
        tp.update_slice(x, 0.7, 0, tp.ones((1,)))


@pytest.mark.parametrize("index", [np.int64(1), np.int32(-1), np.uint8(2), np.intp(0)])
def test_numpy_integer_indices_work_as_python_ints(device, index):
    values = np.float32([[1, 2], [3, 4], [5, 6]])
    x = tp.Tensor(values)
    np.testing.assert_array_equal(np.asarray(x[index]), values[index])
    np.testing.assert_array_equal(np.asarray(x[index, np.int64(1)]), values[index, np.int64(1)])
    np.testing.assert_array_equal(np.asarray(x[: np.int64(2), index % 2]), values[: np.int64(2), index % 2])


def test_numpy_integer_scalars_work_as_dims_and_shapes(device):
    x = tp.Tensor(np.float32([[1, 2], [3, 4]]))
    assert tp.update_slice(x, np.int64(1), np.int32(1), tp.Tensor([[9.0], [9.0]])).tolist() == [[1.0, 9.0], [3.0, 9.0]]
    assert tp.transpose(x, np.int64(0), np.int64(1)).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert tp.flatten(x, np.int64(0)).shape == (4,)
    assert tp.full((np.int64(2),), np.int64(7), dtype=tp.int64).tolist() == [7, 7]
    assert tp.arange(np.int64(3), dtype=tp.int32).tolist() == [0, 1, 2]
    assert tp.topk(x, np.int64(1), dim=np.int64(1))[0].tolist() == [[2.0], [4.0]]
    assert tp.split(x, np.int64(2), dim=np.int64(0))[1].tolist() == [[3.0, 4.0]]
    assert (x * np.int64(2)).tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert (x + np.float32(0.5)).tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert (tp.Tensor([1, 2], dtype=tp.int32) * np.int64(3)).tolist() == [3, 6]


def test_numpy_integer_scalar_out_of_range_is_an_error():
    with _raises_here("300 is out of range for int8"):
        tp.Tensor([1], dtype=tp.int8) + np.int64(300)


@pytest.mark.parametrize("step", [-(2**63), 2**63 - 1, -(2**62) - 5])
def test_slices_with_huge_steps_work_as_numpy(device, step):
    values = np.float32([1, 2, 3])
    np.testing.assert_array_equal(np.asarray(tp.Tensor(values)[::step]), values[::step])


@pytest.mark.parametrize("item", [slice(None, None, 2**63), slice(2**64, None), slice(None, -(2**70))])
def test_slices_with_bounds_past_64_bits_work_as_numpy(device, item):
    values = np.float32([1, 2, 3])
    np.testing.assert_array_equal(np.asarray(tp.Tensor(values)[item]), values[item])

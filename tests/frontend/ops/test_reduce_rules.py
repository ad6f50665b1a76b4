"""Reductions where numpy and torch have settled answers: NaN in argmax/argmin/topk, integer sums
that must not wrap, and empty axes that must raise at the call."""

import numpy as np
import pytest

import tripy as tp

NAN = float("nan")


@pytest.mark.parametrize("values", [[1.0, NAN, 3.0], [NAN, 1.0], [2.0, 5.0, NAN, NAN], [1.0, 2.0], [-np.inf, NAN]])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_pick_the_first_nan_like_numpy(device, name, values):
    got = getattr(tp, name)(tp.Tensor(values), dim=0).tolist()
    assert got == int(getattr(np, name)(np.array(values, np.float32)))


def test_arg_reductions_with_nan_per_row(device):
    x = np.array([[1.0, NAN, 3.0], [4.0, 2.0, 0.0], [NAN, NAN, 1.0]], np.float32)
    for name in ("argmax", "argmin"):
        for dim in (0, 1):
            got = np.array(getattr(tp, name)(tp.Tensor(x), dim=dim).tolist())
            np.testing.assert_array_equal(got, getattr(np, name)(x, axis=dim))


def test_topk_treats_nan_as_the_largest_like_torch(device):
    values, indices = tp.topk(tp.Tensor([1.0, NAN, 3.0]), 2, dim=0)
    v = values.tolist()
    assert np.isnan(v[0]) and v[1] == 3.0
    assert indices.tolist() == [1, 2]
    values, indices = tp.topk(tp.Tensor([NAN, 0.0, NAN, 5.0]), 3, dim=0)
    assert indices.tolist() == [0, 2, 3]
    assert np.isnan(values.tolist()[:2]).all() and values.tolist()[2] == 5.0


def test_int8_sums_return_int64_as_numpy_and_torch_do(device):
    out = tp.sum(tp.ones((256,), dtype=tp.int8), dim=0)
    assert out.dtype == tp.int64 and out.tolist() == 256
    x = np.full((3, 100), 100, np.int8)
    got = tp.prod(tp.Tensor(np.ascontiguousarray(x[:, :5])), dim=1)
    assert got.dtype == tp.int64 and got.tolist() == [10**10] * 3
    assert tp.sum(tp.Tensor(x), dim=1).tolist() == np.sum(x, axis=1).tolist()


def test_int32_sums_keep_their_dtype_and_are_exact_when_the_result_fits(device):
    # Partial sums leave int32's range, the result does not: int64 accumulation keeps it exact.
    x = tp.Tensor([2**30, 2**30, 2**30, -(2**31), -(2**30) + 5])
    out = tp.sum(x, dim=0)
    assert out.dtype == tp.int32 and out.tolist() == 5
    assert tp.sum(tp.cast(tp.Tensor([2**30] * 4), tp.int64), dim=0).tolist() == 2**32


def test_int32_max_and_min_keep_their_dtype(device):
    assert tp.max(tp.ones((4,), dtype=tp.int8), dim=0).dtype == tp.int8


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_a_reduction_over_an_empty_axis_raises_at_the_call(name):
    x = tp.ones((0, 3))
    with pytest.raises(tp.TripyException, match="size 0") as e:
        getattr(tp, name)(x, dim=0)
    assert f"test_reduce_rules.py:{e.tb.tb_lineno}" in str(e.value)
    # Reducing the other axis is fine: there is nothing to reduce per row, and no row.
    assert getattr(tp, name)(x, dim=1).shape == (0,)


def test_sums_over_an_empty_axis_are_their_identity(device):
    assert tp.sum(tp.ones((0, 3)), dim=0).tolist() == [0.0] * 3
    assert tp.prod(tp.ones((0, 2), dtype=tp.int32), dim=0).tolist() == [1, 1]


def test_an_empty_dynamic_axis_raises_at_run_time_naming_the_call():
    def f(x, n):
        return tp.max(x[:n], dim=0)

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32), tp.DimensionInputInfo((0, 1, 4))])
    assert exe(tp.ones((2, 3)), 1).tolist() == [1.0] * 3
    with pytest.raises(tp.TripyException, match="size 0 at run time") as e:
        exe(tp.ones((2, 3)), 0)
    assert "return tp.max(x[:n], dim=0)" in str(e.value)


# A rank-0 tensor has one element; reducing it over "all dims" (none) returns it, as numpy does.
RANK0 = {
    "sum": (tp.sum, np.sum), "prod": (tp.prod, np.prod), "max": (tp.max, np.max), "min": (tp.min, np.min),
    "mean": (tp.mean, np.mean), "argmax": (tp.argmax, np.argmax), "argmin": (tp.argmin, np.argmin),
}


@pytest.mark.parametrize("name", sorted(RANK0))
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_reductions_of_a_rank0_tensor_return_its_value(device, name, compiled):
    fn, ref = RANK0[name]
    f = tp.compile(fn, args=[tp.InputInfo((), tp.float32)]) if compiled else fn
    out = f(tp.Tensor(np.float32(-2.5)))
    want = ref(np.float32(-2.5))
    assert out.shape == () and out.tolist() == want


def test_rank0_reductions_with_dim_and_keepdim(device):
    assert tp.sum(tp.Tensor(2.0), dim=0).tolist() == 2.0
    assert tp.sum(tp.Tensor(2.0), dim=-1, keepdim=True).tolist() == 2.0
    assert tp.all(tp.Tensor(True)).tolist() is True and tp.any(tp.Tensor(False)).tolist() is False


def test_equal_on_rank0_tensors(device):
    assert tp.equal(tp.Tensor(1), tp.Tensor(1)) is True
    assert tp.equal(tp.Tensor(1), tp.Tensor(2)) is False
    assert tp.allclose(tp.Tensor(1.0), tp.Tensor(1.0))


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape", [(2, 3), (4,), (2, 1, 3), ()])
def test_softmax_without_dim_is_over_the_flattened_input_as_nvtripy_documents(device, shape):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    want = _np_softmax(x.reshape(-1), 0).reshape(shape)
    np.testing.assert_allclose(np.array(tp.softmax(tp.Tensor(x)).tolist()), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.array(tp.softmax(tp.Tensor(x), dim=None).tolist()), want, rtol=1e-6, atol=1e-7)
    exe = tp.compile(lambda t: tp.softmax(t, dim=None), args=[tp.InputInfo(shape, tp.float32)])
    np.testing.assert_allclose(np.array(exe(tp.Tensor(x)).tolist()), want, rtol=1e-6, atol=1e-7)


def test_softmax_without_dim_over_a_dynamic_input():
    exe = tp.compile(lambda t: tp.softmax(t), args=[tp.InputInfo(((1, 2, 5), 3), tp.float32)])
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        want = _np_softmax(x.reshape(-1), 0).reshape(x.shape)
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-6, atol=1e-7)


def test_var_without_degrees_of_freedom_is_nan_as_in_numpy(device):
    # N - correction <= 0: numpy and torch divide by max(N - correction, 0).
    assert np.isnan(tp.var(tp.ones((0, 3)), dim=0).tolist()).all()
    assert np.isnan(tp.var(tp.Tensor([2.0]), dim=0).tolist())
    assert tp.var(tp.Tensor([1.0, 3.0]), dim=0, correction=3).tolist() == np.inf

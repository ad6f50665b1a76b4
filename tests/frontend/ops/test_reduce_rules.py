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

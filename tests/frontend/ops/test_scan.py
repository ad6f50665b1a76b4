"""cumsum and topk against numpy: eager, compiled static and compiled dynamic, on every device."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(2)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _array(t):
    return np.array(t.tolist())


def _topk_ref(x, k, axis):
    # A stable sort of -x puts equal values in index order, as topk promises.
    order = np.argsort(-x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_cumsum_matches_numpy(dim, mode, device):
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    fn = lambda t: tp.cumsum(t, dim)
    if mode == "eager":
        out = fn(_dev(x))
    else:
        dims = (5, 7) if mode == "static" else ((1, 5, 8), (1, 7, 8))
        out = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])(_dev(x))
    np.testing.assert_allclose(_array(out), np.cumsum(x, axis=dim), rtol=1e-5, atol=1e-5)
    if mode == "dynamic":
        x2 = RNG.standard_normal((2, 3)).astype(np.float32)
        exe = tp.compile(fn, args=[tp.InputInfo(((1, 5, 8), (1, 7, 8)), dtype=tp.float32)])
        np.testing.assert_allclose(_array(exe(_dev(x2))), np.cumsum(x2, axis=dim), rtol=1e-5, atol=1e-5)


def test_cumsum_is_exact_on_integers(device):
    x = RNG.integers(-50, 50, (3, 33)).astype(np.int64)
    np.testing.assert_array_equal(_array(tp.cumsum(_dev(x), 1)), np.cumsum(x, 1))


@pytest.mark.parametrize("k,dim", [(1, 1), (3, 1), (4, 0), (2, -1)])
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_topk_matches_a_stable_sort(k, dim, mode, device):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    fn = lambda t: tp.topk(t, k, dim)
    if mode == "eager":
        values, indices = fn(_dev(x))
    else:
        # Only the dim not searched is dynamic: k must fit the searched one.
        other = 0 if dim % 2 == 1 else 1
        dims = [4, 6]
        if mode == "dynamic":
            dims[other] = (1, dims[other], 8)
        values, indices = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])(_dev(x))
    ref_values, ref_indices = _topk_ref(x, k, dim)
    np.testing.assert_allclose(_array(values), ref_values)
    np.testing.assert_array_equal(_array(indices), ref_indices)
    assert indices.dtype == tp.int32


def test_topk_breaks_ties_by_index_even_at_the_dtype_minimum(device):
    lo = -(2**31)
    x = np.array([[3, lo, 3, lo, 1]], dtype=np.int32)
    values, indices = tp.topk(_dev(x), 5, dim=1)
    assert values.tolist() == [[3, 3, 1, lo, lo]]
    assert indices.tolist() == [[0, 2, 4, 1, 3]]


def test_topk_rejects_k_larger_than_the_dim():
    with pytest.raises(tp.TripyException, match=r"k must be an int in \[1, 3\]") as e:
        tp.topk(tp.ones((2, 3)), 4, dim=1)
    assert "test_scan.py" in str(e.value)


def test_cumsum_rejects_bool_and_bad_dims():
    with pytest.raises(tp.TripyException, match="bool tensors are not summed"):
        tp.cumsum(_dev([True, False]), 0)
    with pytest.raises(tp.TripyException, match="dim 2 is out of range"):
        tp.cumsum(tp.ones((2, 2)), 2)


# --- cumsum and topk as core ops: dynamic scanned/searched dims, errors naming the user's line ----

HERE = "test_scan.py"


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_compiled_cumsum_along_a_dynamic_dim_at_min_opt_max(dtype):
    T = tp.NamedDimension("T", 1, 6, 37)
    exe = tp.compile(lambda x: tp.cumsum(x, 1), args=[tp.InputInfo((2, T, 3), dtype=getattr(tp, np.dtype(dtype).name))])
    for t in (1, 6, 37, 16, 17):
        x = (RNG.standard_normal((2, t, 3)) * 10).astype(dtype)
        got = np.asarray(exe(tp.Tensor(x)))
        want = np.cumsum(x.astype(np.float64), axis=1)
        assert got.shape == want.shape and got.dtype == dtype
        if dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        else:
            np.testing.assert_array_equal(got, want.astype(dtype))


def test_cumsum_of_float16_is_summed_in_float32():
    # Partial sums rounded to float16 at every step drift by several ulps over 4096 terms (a
    # float16 scan is off in about 1 of 4 places here); summed in float32, each result is the exact
    # sum rounded once.
    x = (np.random.default_rng(16).random(4096) + 0.5).astype(np.float16)  # exact in float32
    got = np.asarray(tp.cumsum(tp.Tensor(x), 0))
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64)).astype(np.float16))


def test_eager_cumsum_of_an_empty_dim_and_of_bfloat16():
    assert tp.cumsum(tp.Tensor(np.zeros((2, 0), np.float32)), 1).shape == (2, 0)
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    got = tp.cast(tp.cumsum(tp.cast(tp.Tensor(x), tp.bfloat16), 1), tp.float32)
    # bfloat16 has 8 bits of mantissa: the input and the result are each rounded once.
    np.testing.assert_allclose(np.asarray(got), np.cumsum(x.astype(np.float64), 1), rtol=2e-2, atol=4e-2)


def test_compiled_topk_along_a_dynamic_dim_at_min_opt_max():
    T = tp.NamedDimension("T", 3, 7, 12)
    exe = tp.compile(lambda x: tp.topk(x, 3, dim=1), args=[tp.InputInfo((2, T), dtype=tp.float32)])
    for t in (3, 7, 12):
        x = RNG.standard_normal((2, t)).astype(np.float32)
        x[0, 1] = x[0, 2]  # a tie
        values, indices = exe(tp.Tensor(x))
        ref_values, ref_indices = _topk_ref(x, 3, 1)
        np.testing.assert_array_equal(np.asarray(values), ref_values)
        np.testing.assert_array_equal(np.asarray(indices), ref_indices)


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int64])
def test_eager_topk_of_other_dtypes(dtype):
    x = RNG.permutation(40).reshape(5, 8).astype(dtype) - 20
    values, indices = tp.topk(tp.Tensor(x), 4, dim=0)
    ref_values, ref_indices = _topk_ref(x, 4, 0)
    assert values.dtype.name == np.dtype(dtype).name and indices.dtype == tp.int32
    np.testing.assert_array_equal(np.asarray(values), ref_values)
    np.testing.assert_array_equal(np.asarray(indices), ref_indices)


def test_topk_ranks_nan_above_every_number():
    x = np.array([[1.0, np.nan, 3.0, -np.inf]], dtype=np.float32)
    values, indices = tp.topk(tp.Tensor(x), 4, dim=1)
    np.testing.assert_array_equal(np.asarray(values), [[np.nan, 3.0, 1.0, -np.inf]])
    assert indices.tolist() == [[1, 2, 0, 3]]


def test_topk_larger_than_a_dynamic_dim_is_an_error_of_the_call_naming_the_topk():
    T = tp.NamedDimension("T", 1, 4, 8)

    def f(x):
        return tp.topk(x, 2, dim=0)[0]

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo((T,), dtype=tp.float32)])
    assert exe(tp.Tensor(np.array([1.0, 4.0], np.float32))).tolist() == [4.0, 1.0]
    with pytest.raises(tp.TripyException, match="k = 2 is larger than dimension 0") as e:
        exe(tp.Tensor(np.array([1.0], np.float32)))
    assert f"{HERE}:{line}" in str(e.value)


def test_static_bad_scans_name_the_line():
    x = tp.ones((2, 3))
    for call, match in (
        (lambda: tp.cumsum(tp.Tensor([True, False]), 0), "bool tensors are not summed"),
        (lambda: tp.cumsum(x, -3), "dim -3 is out of range"),
        (lambda: tp.cumsum(tp.Tensor(1.0), 0), "dim 0 is out of range for a tensor of rank 0"),
        (lambda: tp.cumsum(x, 0.5), "expected dim to be an int"),
        (lambda: tp.topk(x, 0, dim=1), r"k must be an int in \[1, 3\]"),
        (lambda: tp.topk(x, 2.0, dim=1), r"k must be an int in \[1, 3\]"),
        (lambda: tp.topk(x, 1, dim=2), "dim 2 is out of range"),
        (lambda: tp.topk(tp.Tensor([True]), 1, dim=0), "Unsupported data type for topk"),
    ):
        with pytest.raises(tp.TripyException, match=match) as e:
            call()
        assert f"{HERE}:{call.__code__.co_firstlineno}" in str(e.value)

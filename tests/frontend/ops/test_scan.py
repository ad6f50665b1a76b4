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

"""maxpool and avgpool against numpy window loops: 2-D and 3-D, stride, padding, both avgpool
counting rules; eager, compiled static and compiled dynamic (batch), on every device."""

import itertools

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(4)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _pool_ref(x, kernel, stride, padding, kind, count_include_pad=True):
    nd = len(kernel)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0)] + list(padding), constant_values=fill)
    real = np.pad(np.ones(x.shape[2:]), list(padding))
    out_sizes = [(xp.shape[2 + i] - kernel[i]) // stride[i] + 1 for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(out_sizes), dtype=np.float64)
    for pos in itertools.product(*(range(s) for s in out_sizes)):
        window = tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, stride, kernel))
        block = xp[(slice(None), slice(None)) + window].reshape(x.shape[:2] + (-1,))
        if kind == "max":
            out[(slice(None), slice(None)) + pos] = block.max(-1)
        else:
            count = np.prod(kernel) if count_include_pad else real[window].sum()
            out[(slice(None), slice(None)) + pos] = block.sum(-1) / count
    return out.astype(np.float32)


# (kernel, stride, padding)
CASES = {
    "2d": ((2, 2), (2, 2), None),
    "2d_overlap": ((3, 2), (1, 2), None),
    "2d_padded": ((3, 3), (2, 2), [(1, 1), (1, 0)]),
    "3d": ((2, 2, 2), (1, 2, 2), [(0, 1), (1, 0), (0, 0)]),
}


def _shape(kernel):
    return (2, 3, 6, 5) if len(kernel) == 2 else (2, 2, 4, 5, 4)


@pytest.mark.parametrize("kind", ["max", "avg", "avg_exclude_pad"])
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_pooling_matches_numpy(kind, name, mode, device):
    kernel, stride, padding = CASES[name]
    if kind == "max":
        fn = lambda t: tp.maxpool(t, kernel, stride, padding)
    else:
        include = kind == "avg"
        fn = lambda t: tp.avgpool(t, kernel, stride, padding, count_include_pad=include)
    shape = _shape(kernel)
    x = RNG.standard_normal(shape).astype(np.float32)
    ref = _pool_ref(x, kernel, stride, padding or [(0, 0)] * len(kernel), kind[:3], kind == "avg")
    if mode == "eager":
        out = fn(_dev(x))
    else:
        dims = shape if mode == "static" else ((1, 2, 3),) + shape[1:]
        exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])
        out = exe(_dev(x))
        if mode == "dynamic":
            np.testing.assert_allclose(np.array(exe(_dev(x[:1].copy())).tolist()), ref[:1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-5, atol=1e-5)


def test_maxpool_on_integers_pads_with_the_dtype_minimum(device):
    x = -np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4) - 100
    out = tp.maxpool(_dev(x), (2, 2), (2, 2), [(1, 1), (1, 1)])
    np.testing.assert_array_equal(np.array(out.tolist()), _pool_ref(x.astype(np.float32), (2, 2), (2, 2), [(1, 1), (1, 1)], "max"))


def test_pooling_rejects_a_kernel_larger_than_the_input():
    with pytest.raises(tp.TripyException, match=r"the kernel \(5, 5\) is larger than the padded input's spatial size \(4, 4\)") as e:
        tp.maxpool(tp.ones((1, 1, 4, 4)), (5, 5))
    assert "test_pooling.py" in str(e.value)


def test_pooling_rejects_bad_arguments():
    with pytest.raises(tp.TripyException, match="a 2-D window needs an input of rank 4"):
        tp.avgpool(tp.ones((1, 4, 4)), (2, 2))
    with pytest.raises(tp.TripyException, match="kernel sizes and strides must be positive"):
        tp.maxpool(tp.ones((1, 1, 4, 4)), (2, 0))
    with pytest.raises(tp.TripyException, match="one entry per spatial dim"):
        tp.maxpool(tp.ones((1, 1, 4, 4)), (2, 2), stride=(1,))
    with pytest.raises(tp.TripyException, match="expected a float tensor"):
        tp.avgpool(tp.ones((1, 1, 4, 4), dtype=tp.int32), (2, 2))
    with pytest.raises(tp.TripyException, match=r"must be at most 2\^30") as e:
        tp.maxpool(tp.ones((1, 1, 4, 4)), (2, 2), padding=((0, 2**63 - 1), (0, 0)))
    assert "test_pooling.py" in str(e.value)


def test_pooling_is_one_kernel_with_dynamic_spatial_dims(device, capsys):
    """ResNet's stem pool over a dynamic batch, height and width: one pooling kernel, right at
    every size in the range."""
    from test_conv import _kernels_of

    fn = lambda t: tp.maxpool(t, (3, 3), (2, 2), [(1, 1), (1, 1)])
    exe, kinds = _kernels_of(
        lambda: tp.compile(fn, args=[tp.InputInfo(((1, 2, 3), 4, (5, 8, 12), (6, 9, 11)), dtype=tp.float32)]), capsys)
    assert kinds == [("pooling", "maxpool")], kinds
    for shape in [(2, 4, 8, 9), (1, 4, 5, 11), (3, 4, 12, 6)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exe(_dev(x))), _pool_ref(x, (3, 3), (2, 2), [(1, 1), (1, 1)], "max"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int64"])
def test_pooling_keeps_narrow_and_integer_dtypes(dtype, device):
    x = RNG.standard_normal((2, 3, 7, 6)) * 20
    tp_dtype = getattr(tp, dtype)
    if dtype == "bfloat16":  # numpy has no bfloat16: values that bfloat16 holds exactly
        x = np.round(x)
        data = tp.cast(_dev(x.astype(np.float32)), tp_dtype)
    else:
        x = x.astype(dtype)
        data = _dev(x)
    out = tp.maxpool(data, (2, 3), (2, 1), [(1, 0), (1, 1)])
    got = np.asarray(tp.cast(out, tp.float32) if dtype == "bfloat16" else out).astype(np.float64)
    np.testing.assert_array_equal(got, _pool_ref(x.astype(np.float64), (2, 3), (2, 1), [(1, 0), (1, 1)], "max"))
    if dtype.startswith("float") or dtype == "bfloat16":
        avg = tp.avgpool(data, (2, 2), (2, 2))
        got = np.asarray(tp.cast(avg, tp.float32)).astype(np.float64)
        tol = 1e-2 if dtype == "bfloat16" else 2e-3
        np.testing.assert_allclose(got, _pool_ref(x.astype(np.float64), (2, 2), (2, 2), [(0, 0), (0, 0)], "avg"),
                                   rtol=tol, atol=tol * 20)


def test_pooling_1d_and_nan_wins_the_max(device):
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    x[0, 1, 3] = np.nan
    out = np.asarray(tp.maxpool(_dev(x), (3,), (2,), [(1, 1)]))
    ref = _pool_ref(x, (3,), (2,), [(1, 1)], "max")
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(out[~np.isnan(out)], ref[~np.isnan(ref)])
    assert np.isnan(ref).sum() == 2  # the NaN is in two overlapping windows
    avg = np.asarray(tp.avgpool(_dev(x), (4,), (3,), [(2, 1)], count_include_pad=False))
    np.testing.assert_allclose(avg, _pool_ref(x, (4,), (3,), [(2, 1)], "avg", False), rtol=1e-5, atol=1e-6)


def test_pooling_rejects_a_dynamic_size_too_small_for_the_kernel():
    fn = lambda t: tp.maxpool(t, (4, 4))
    with pytest.raises(tp.TripyException, match=r"smallest padded input's spatial size \(3, 8\)") as e:
        tp.compile(fn, args=[tp.InputInfo((1, 1, (3, 6, 9), 8), dtype=tp.float32)])
    assert "test_pooling.py" in str(e.value)


def test_pooling_executables_save_and_load(tmp_path, device):
    fn = lambda t: tp.avgpool(tp.maxpool(t, (2, 2), (1, 1)), (2, 2), (2, 2), [(1, 0), (0, 1)], count_include_pad=False)
    exe = tp.compile(fn, args=[tp.InputInfo(((1, 2, 2), 2, (4, 6, 8), 5), dtype=tp.float32)])
    path = str(tmp_path / "pool.tpy")
    exe.save(path)
    loaded = tp.Executable.load(path)
    x = RNG.standard_normal((2, 2, 7, 5)).astype(np.float32)
    ref = _pool_ref(_pool_ref(x, (2, 2), (1, 1), [(0, 0), (0, 0)], "max"), (2, 2), (2, 2), [(1, 0), (0, 1)], "avg", False)
    np.testing.assert_allclose(np.asarray(loaded(_dev(x))), ref, rtol=1e-5, atol=1e-6)

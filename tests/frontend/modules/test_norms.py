"""GroupNorm, InstanceNorm and BatchNorm against numpy: eager and compiled with a dynamic batch,
on every device; placeholder parameters and channel checks."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(7)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _group_norm_ref(x, groups, weight, bias, eps=1e-5):
    g = x.reshape(x.shape[0], groups, -1).astype(np.float64)
    normed = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    shape = [1, -1] + [1] * (x.ndim - 2)
    return (normed.reshape(x.shape) * weight.reshape(shape) + bias.reshape(shape)).astype(np.float32)


def _affine(channels):
    return RNG.standard_normal(channels).astype(np.float32), RNG.standard_normal(channels).astype(np.float32)


def _run(module, x, mode):
    if mode == "eager":
        return np.array(module(_dev(x)).tolist())
    exe = tp.compile(module, args=[tp.InputInfo(((1, x.shape[0], 4),) + x.shape[1:], dtype=tp.float32)])
    return np.array(exe(_dev(x)).tolist())


@pytest.mark.parametrize("mode", ["eager", "dynamic"])
@pytest.mark.parametrize("groups,shape", [(2, (2, 4, 3, 5)), (1, (3, 6, 7)), (3, (2, 3, 2, 2, 2))])
def test_group_norm_matches_numpy(groups, shape, mode, device):
    x = RNG.standard_normal(shape).astype(np.float32) * 3 + 1
    w, b = _affine(shape[1])
    norm = tp.GroupNorm(groups, shape[1])
    norm.load_state_dict({"weight": _dev(w), "bias": _dev(b)})
    np.testing.assert_allclose(_run(norm, x, mode), _group_norm_ref(x, groups, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["eager", "dynamic"])
def test_instance_norm_is_one_group_per_channel(mode, device):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w, b = _affine(3)
    norm = tp.InstanceNorm(3, eps=1e-3)
    norm.load_state_dict({"weight": _dev(w), "bias": _dev(b)})
    np.testing.assert_allclose(_run(norm, x, mode), _group_norm_ref(x, 3, w, b, 1e-3), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["eager", "dynamic"])
def test_batch_norm_uses_the_running_statistics(mode, device):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    w, b = _affine(3)
    mean, var = RNG.standard_normal(3).astype(np.float32), RNG.uniform(0.5, 2, 3).astype(np.float32)
    norm = tp.BatchNorm(3)
    norm.load_state_dict({"weight": _dev(w), "bias": _dev(b), "running_mean": _dev(mean),
                          "running_var": _dev(var)})
    ref = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * w[:, None] + b[:, None]
    np.testing.assert_allclose(_run(norm, x, mode), ref, rtol=1e-4, atol=1e-4)


def test_norm_placeholders_are_arange():
    assert list(tp.BatchNorm(2).state_dict()) == ["weight", "bias", "running_mean", "running_var"]
    assert tp.BatchNorm(2).running_var.tolist() == [0.0, 1.0]
    assert tp.GroupNorm(2, 4).weight.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert list(tp.InstanceNorm(3).state_dict()) == ["weight", "bias"]


def test_norms_reject_mismatched_channels():
    with pytest.raises(tp.TripyException, match=r"GroupNorm expects an input of shape \(N, 4, ...\)") as e:
        tp.GroupNorm(2, 4)(tp.ones((1, 3, 2)))
    assert "test_norms.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="BatchNorm expects an input of shape"):
        tp.BatchNorm(4)(tp.ones((1, 3)))
    with pytest.raises(tp.TripyException, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"):
        tp.GroupNorm(2, 5)


@pytest.mark.parametrize("cls", ["group", "instance"])
def test_float16_statistics_are_computed_in_float32(cls, device):
    # An offset mean and many elements per group: float16 sums lose the statistics' low bits.
    x = (RNG.standard_normal((2, 4, 16, 16)) * 2 + 30).astype(np.float16)
    w, b = _affine(4)
    groups = 2 if cls == "group" else 4
    norm = tp.GroupNorm(groups, 4, dtype=tp.float16) if cls == "group" else tp.InstanceNorm(4, dtype=tp.float16)
    norm.load_state_dict({"weight": _dev(w.astype(np.float16)), "bias": _dev(b.astype(np.float16))})
    out = np.array(norm(_dev(x)).tolist())
    ref = _group_norm_ref(x.astype(np.float64), groups, w.astype(np.float16).astype(np.float64),
                          b.astype(np.float16).astype(np.float64))
    # One rounding to float16 at the end: within half an ulp (2**-11 relative) plus the statistics'
    # own float32 error.
    np.testing.assert_allclose(out, ref, rtol=2**-10, atol=2e-4)

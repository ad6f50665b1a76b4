"""tp.Conv and tp.ConvTranspose (the convolution Trace op) against straightforward numpy loops:
stride, padding, dilation and groups, eager and compiled with a dynamic batch, on every device."""

import itertools

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(3)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _conv_ref(x, w, b, stride, padding, dilation, groups):
    """Direct N-d convolution: out[n, o, p] = sum_{c in group, k} x_padded[n, c, p * s + k * d] * w[o, c, k]."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(padding))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    out_sizes = [(x.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    out = np.zeros((n, o, *out_sizes), dtype=np.float64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for pos in itertools.product(*(range(s) for s in out_sizes)):
            for tap in itertools.product(*(range(k) for k in kernel)):
                at = tuple(pos[i] * stride[i] + tap[i] * dilation[i] for i in range(nd))
                patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + at]  # (n, cg)
                out[(slice(None), oc) + pos] += patch @ w[(oc, slice(None)) + tap]
    if b is not None:
        out += b.reshape([1, o] + [1] * nd)
    return out.astype(np.float32)


def _conv_transpose_ref(x, w, b, stride, padding, dilation, groups):
    """Scatter form: each input element adds its value times the kernel at p * s + k * d - pad."""
    nd = x.ndim - 2
    n, cin = x.shape[:2]
    og = w.shape[1]
    kernel = w.shape[2:]
    full = [(x.shape[2 + i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 for i in range(nd)]
    out = np.zeros((n, og * groups, *full), dtype=np.float64)
    cg = cin // groups
    for ci in range(cin):
        g = ci // cg
        for pos in itertools.product(*(range(s) for s in x.shape[2:])):
            for tap in itertools.product(*(range(k) for k in kernel)):
                at = tuple(pos[i] * stride[i] + tap[i] * dilation[i] for i in range(nd))
                value = x[(slice(None), ci) + pos]
                out[(slice(None), slice(g * og, (g + 1) * og)) + at] += value[:, None] * w[(ci, slice(None)) + tap]
    crop = tuple(slice(lo, s - hi) for (lo, hi), s in zip(padding, full))
    out = out[(slice(None), slice(None)) + crop]
    if b is not None:
        out += b.reshape([1, -1] + [1] * nd)
    return out.astype(np.float32)


# (in, out, kernel, stride, padding pairs, dilation, groups, input spatial size)
CONV_CASES = {
    "plain_2d": (3, 4, (3, 3), (1, 1), [(0, 0), (0, 0)], (1, 1), 1, (6, 5)),
    "stride_pad_2d": (2, 3, (3, 2), (2, 1), [(1, 1), (0, 2)], (1, 1), 1, (7, 6)),
    "dilation_2d": (2, 2, (2, 3), (1, 2), [(1, 0), (2, 2)], (2, 1), 1, (6, 6)),
    "groups_2d": (4, 6, (3, 3), (1, 1), [(1, 1), (1, 1)], (1, 1), 2, (5, 5)),
    "depthwise_2d": (3, 3, (3, 3), (2, 2), [(1, 1), (1, 1)], (1, 1), 3, (6, 6)),
    "conv_1d": (2, 3, (3,), (2,), [(1, 2)], (2,), 1, (9,)),
    "conv_3d": (2, 2, (2, 2, 2), (1, 2, 1), [(0, 0), (1, 1), (0, 1)], (1, 1, 1), 2, (3, 4, 3)),
}


def _load(module, weight_shape, out_channels):
    w = RNG.standard_normal(weight_shape).astype(np.float32)
    b = RNG.standard_normal((out_channels,)).astype(np.float32)
    module.load_state_dict({"weight": _dev(w), "bias": _dev(b)})
    return w, b


@pytest.mark.parametrize("name", sorted(CONV_CASES))
@pytest.mark.parametrize("mode", ["eager", "dynamic"])
def test_conv_matches_numpy(name, mode, device):
    cin, cout, kernel, stride, padding, dilation, groups, size = CONV_CASES[name]
    conv = tp.Conv(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    w, b = _load(conv, (cout, cin // groups, *kernel), cout)
    x = RNG.standard_normal((2, cin, *size)).astype(np.float32)
    ref = _conv_ref(x, w, b, stride, padding, dilation, groups)
    if mode == "eager":
        out = conv(_dev(x))
    else:
        exe = tp.compile(conv, args=[tp.InputInfo(((1, 2, 3), cin, *size), dtype=tp.float32)])
        out = exe(_dev(x))
        x1 = x[:1].copy()
        np.testing.assert_allclose(np.array(exe(_dev(x1)).tolist()), ref[:1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-4, atol=1e-4)


CONV_T_CASES = {
    "plain_2d": (2, 3, (3, 3), (1, 1), [(0, 0), (0, 0)], (1, 1), 1, (4, 3)),
    "stride_pad_2d": (3, 2, (3, 2), (2, 3), [(1, 1), (0, 1)], (1, 1), 1, (3, 4)),
    "dilation_groups_2d": (4, 2, (2, 2), (2, 1), [(1, 0), (0, 0)], (2, 1), 2, (3, 3)),
    "conv_1d": (1, 2, (4,), (3,), [(2, 1)], (1,), 1, (5,)),
}


@pytest.mark.parametrize("name", sorted(CONV_T_CASES))
def test_conv_transpose_matches_numpy(name, device):
    cin, cout, kernel, stride, padding, dilation, groups, size = CONV_T_CASES[name]
    deconv = tp.ConvTranspose(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    w, b = _load(deconv, (cin, cout // groups, *kernel), cout)
    x = RNG.standard_normal((2, cin, *size)).astype(np.float32)
    ref = _conv_transpose_ref(x, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(np.array(deconv(_dev(x)).tolist()), ref, rtol=1e-4, atol=1e-4)


def test_conv_placeholder_parameters_are_arange():
    conv = tp.Conv(2, 3, (1, 1))
    assert conv.weight.shape == (3, 2, 1, 1) and conv.weight.tolist()[2] == [[[4.0]], [[5.0]]]
    assert conv.bias.tolist() == [0.0, 1.0, 2.0]
    assert tp.ConvTranspose(4, 6, (2,), groups=2).weight.shape == (4, 3, 2)


def test_conv_rejects_mismatched_channels():
    conv = tp.Conv(3, 4, (3, 3))
    with pytest.raises(tp.TripyException, match="the input has 2 channels, but the weight of shape") as e:
        conv(tp.ones((1, 2, 5, 5)))
    assert "test_conv.py" in str(e.value)


def test_conv_rejects_a_kernel_larger_than_the_input():
    conv = tp.Conv(1, 1, (5, 5), dilation=2)
    with pytest.raises(tp.TripyException, match="spans 9 elements in spatial dim 0, more than the padded input's 6") as e:
        conv(tp.ones((1, 1, 6, 6)))
    assert "test_conv.py" in str(e.value)


def test_conv_rejects_bad_configuration():
    with pytest.raises(tp.TripyException, match=r"must both be divisible by groups \(2\)"):
        tp.Conv(3, 4, (3, 3), groups=2)
    with pytest.raises(tp.TripyException, match="stride to be an int or 2 ints"):
        tp.Conv(1, 1, (3, 3), stride=(1, 1, 1))
    with pytest.raises(tp.TripyException, match="has rank 4"):
        tp.Conv(1, 1, (3, 3))(tp.ones((1, 1, 5)))
    with pytest.raises(tp.TripyException, match="padding"):
        tp.ConvTranspose(1, 1, (2, 2), padding=2)

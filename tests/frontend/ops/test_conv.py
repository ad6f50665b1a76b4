"""tp.Conv and tp.ConvTranspose (the convolution Trace op and kernel) against straightforward numpy
loops in float64: stride, padding, dilation, groups, depthwise, transposed with output padding,
float32/float16/bfloat16, eager and compiled with dynamic batch and spatial dims, on every
device; the epilogue fusion (bias, residual, relu) of a ResNet block and its kernel count."""

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


def _conv_transpose_ref(x, w, b, stride, padding, dilation, groups, output_padding=None):
    """Scatter form: each input element adds its value times the kernel at p * s + k * d - pad."""
    nd = x.ndim - 2
    n, cin = x.shape[:2]
    og = w.shape[1]
    kernel = w.shape[2:]
    extra = output_padding or [0] * nd
    full = [(x.shape[2 + i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 + extra[i] for i in range(nd)]
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
    "depthwise_3d": (3, 3, (2, 2, 2), (2, 1, 2), [(0, 0), (1, 1), (1, 0)], (1, 1, 1), 3, (2, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(CONV_T_CASES))
@pytest.mark.parametrize("mode", ["eager", "dynamic"])
def test_conv_transpose_matches_numpy(name, mode, device):
    cin, cout, kernel, stride, padding, dilation, groups, size = CONV_T_CASES[name]
    deconv = tp.ConvTranspose(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    w, b = _load(deconv, (cin, cout // groups, *kernel), cout)
    x = RNG.standard_normal((2, cin, *size)).astype(np.float32)
    ref = _conv_transpose_ref(x, w, b, stride, padding, dilation, groups)
    if mode == "eager":
        out = deconv(_dev(x))
    else:
        spatial = [(s, s + 1, s + 2) for s in size]
        exe = tp.compile(deconv, args=[tp.InputInfo(((1, 2, 3), cin, *spatial), dtype=tp.float32)])
        out = exe(_dev(x))
        bigger = RNG.standard_normal((3, cin, *(s + 2 for s in size))).astype(np.float32)
        np.testing.assert_allclose(np.array(exe(_dev(bigger)).tolist()),
                                   _conv_transpose_ref(bigger, w, b, stride, padding, dilation, groups),
                                   rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,output_padding,dilation", [((2, 3), (1, 2), (1, 1)), ((1, 2), (1, 0), (2, 1))])
def test_conv_transpose_output_padding_extends_the_end(stride, output_padding, dilation, device):
    deconv = tp.ConvTranspose(4, 2, (3, 2), stride=stride, padding=[(1, 1), (0, 1)], dilation=dilation, groups=2,
                              output_padding=output_padding)
    w, b = _load(deconv, (4, 1, 3, 2), 2)
    x = RNG.standard_normal((1, 4, 3, 4)).astype(np.float32)
    ref = _conv_transpose_ref(x, w, b, stride, [(1, 1), (0, 1)], dilation, 2, list(output_padding))
    out = np.array(deconv(_dev(x)).tolist())
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_conv_spatial_dims_may_be_dynamic(device):
    conv = tp.Conv(3, 4, (3, 3), stride=2, padding=1)
    w, b = _load(conv, (4, 3, 3, 3), 4)
    exe = tp.compile(conv, args=[tp.InputInfo(((1, 1, 2), 3, (5, 8, 12), (4, 7, 9)), dtype=tp.float32)])
    for shape in [(1, 3, 5, 4), (2, 3, 12, 9), (1, 3, 8, 7)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        ref = _conv_ref(x, w, b, (2, 2), [(1, 1), (1, 1)], (1, 1), 1)
        np.testing.assert_allclose(np.array(exe(_dev(x)).tolist()), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("transposed", [False, True])
def test_conv_narrow_floats_match_float64(dtype, transposed, device):
    tp_dtype = getattr(tp, dtype)
    cls = tp.ConvTranspose if transposed else tp.Conv
    conv = cls(4, 6, (3, 3), stride=2, padding=1, groups=2, dtype=tp_dtype)
    wshape = (4, 3, 3, 3) if transposed else (6, 2, 3, 3)
    w = RNG.standard_normal(wshape).astype(np.float32)
    b = RNG.standard_normal((6,)).astype(np.float32)
    # Values that the narrow dtype holds exactly, so the reference sees the same inputs.
    rnd = (lambda a: a.astype(np.float16).astype(np.float32)) if dtype == "float16" else (lambda a: np.round(a * 8) / 8)
    w, b = rnd(w), rnd(b)
    conv.load_state_dict({"weight": tp.cast(_dev(w), tp_dtype), "bias": tp.cast(_dev(b), tp_dtype)})
    x = rnd(RNG.standard_normal((2, 4, 6, 5)).astype(np.float32))
    ref_fn = _conv_transpose_ref if transposed else _conv_ref
    ref = ref_fn(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (2, 2), [(1, 1), (1, 1)], (1, 1), 2)
    out = tp.cast(conv(tp.cast(_dev(x), tp_dtype)), tp.float32)
    tol = 2e-2 if dtype == "float16" else 8e-2
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=tol, atol=tol)


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
    with pytest.raises(tp.TripyException, match="padding") as e:
        tp.ConvTranspose(1, 1, (2, 2), padding=2)(tp.ones((1, 1, 1, 1)))
    assert "test_conv.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="output_padding") as e:
        tp.ConvTranspose(1, 1, (2, 2), stride=2, output_padding=2)(tp.ones((1, 1, 2, 2)))
    assert "test_conv.py" in str(e.value)
    # Past 2^30 the size rule's arithmetic would overflow: a clear error, not a wrong shape.
    with pytest.raises(tp.TripyException, match=r"must be at most 2\^30") as e:
        tp.Conv(1, 1, (1, 1), padding=((0, 2**62), (0, 0)))(tp.ones((1, 1, 2, 2)))
    assert "test_conv.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"must be at most 2\^30"):
        tp.Conv(1, 1, (1, 1), dilation=(2**40, 1))(tp.ones((1, 1, 2, 2)))


def test_conv_rejects_a_weight_of_the_wrong_rank_or_dtype():
    from tripy.frontend.modules.conv import _convolution

    x = tp.ones((1, 2, 5, 5))
    with pytest.raises(tp.TripyException, match="the weight has rank 3") as e:
        _convolution(x, tp.ones((2, 2, 3)), [1, 1], [(0, 0), (0, 0)], [1, 1], 1)
    assert "test_conv.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="float16") as e:
        _convolution(x, tp.ones((2, 2, 3, 3), dtype=tp.float16), [1, 1], [(0, 0), (0, 0)], [1, 1], 1)
    assert "test_conv.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="integers that fit in 64 bits|int"):
        _convolution(x, tp.ones((2, 2, 3, 3)), ["a", 1], [(0, 0), (0, 0)], [1, 1], 1)


def test_conv_rejects_a_dynamic_size_too_small_for_the_kernel():
    conv = tp.Conv(1, 1, (5, 5))
    with pytest.raises(tp.TripyException, match="smallest padded input's 3") as e:
        tp.compile(conv, args=[tp.InputInfo((1, 1, (3, 6, 9), 8), dtype=tp.float32)])
    assert "test_conv.py" in str(e.value) or "conv.py" in str(e.value)


def _kernels_of(compile_fn, capsys):
    """The kernel kinds of a compiled program, from its 'program' dump."""
    import re

    capsys.readouterr()
    with tp.logger.use_verbosity({"warning", "ir"}):
        exe = compile_fn()
    dump = capsys.readouterr().err
    program = dump[dump.rindex("[tripy][ir] program:"):]
    kinds = re.findall(r"^b[\d, b]* = (\w+) '([\w]+)'", program, flags=re.M)
    return exe, kinds


class _Bottleneck(tp.Module):
    """ResNet's bottleneck with BatchNorm already folded into each convolution's bias."""

    def __init__(self, cin, mid, cout, stride):
        super().__init__()
        self.conv1 = tp.Conv(cin, mid, (1, 1))
        self.conv2 = tp.Conv(mid, mid, (3, 3), stride=stride, padding=1)
        self.conv3 = tp.Conv(mid, cout, (1, 1))
        self.down = tp.Conv(cin, cout, (1, 1), stride=stride)

    def __call__(self, x):
        out = tp.relu(self.conv1(x))
        out = tp.relu(self.conv2(out))
        return tp.relu(self.conv3(out) + self.down(x))


def test_bottleneck_is_four_convolution_kernels_and_matches_numpy(device, capsys):
    block = _Bottleneck(8, 4, 16, 2)
    params = {}
    for name, conv in [("conv1", block.conv1), ("conv2", block.conv2), ("conv3", block.conv3), ("down", block.down)]:
        w = RNG.standard_normal(conv.weight.shape).astype(np.float32) * 0.3
        b = RNG.standard_normal(conv.bias.shape).astype(np.float32)
        conv.load_state_dict({"weight": _dev(w), "bias": _dev(b)})
        params[name] = (w, b)
    exe, kinds = _kernels_of(lambda: tp.compile(block, args=[tp.InputInfo(((1, 2, 2), 8, 9, 9), dtype=tp.float32)]),
                             capsys)
    # Four convolutions with their epilogues fused. On the CPU the chain runs channels-last
    # (oneDNN's float32 kernels read NHWC): one transpose in, one out.
    edges = [("transpose", "transpose")] if device == "cpu" else []
    assert [k for k, _ in kinds] == [k for k, _ in edges] + ["convolution"] * 4 + [k for k, _ in edges], kinds
    assert [n for k, n in kinds if k == "convolution"][-1] == "conv_bias_add_relu", kinds
    x = RNG.standard_normal((2, 8, 9, 9)).astype(np.float32)
    relu = lambda a: np.maximum(a, 0)
    pad1 = [(1, 1), (1, 1)]
    zero = [(0, 0), (0, 0)]
    h = relu(_conv_ref(x, *params["conv1"], (1, 1), zero, (1, 1), 1))
    h = relu(_conv_ref(h, *params["conv2"], (2, 2), pad1, (1, 1), 1))
    ref = relu(_conv_ref(h, *params["conv3"], (1, 1), zero, (1, 1), 1) + _conv_ref(x, *params["down"], (2, 2), zero, (1, 1), 1))
    np.testing.assert_allclose(np.array(exe(_dev(x)).tolist()), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device_and_switch", [("cpu", "TRIPY_CPU_CONV", "direct"), ("gpu", "TRIPY_CUDNN", "0")])
def test_direct_fallback_matches_numpy(device_and_switch, monkeypatch):
    """TRIPY_CPU_CONV=direct (CPU) and TRIPY_CUDNN=0 (GPU) run the kernels that stand in where
    oneDNN declines or cuDNN is absent."""
    from tripy import _C

    device, variable, value = device_and_switch
    if device == "gpu" and not _C.gpu_available():
        pytest.skip("no GPU on this machine")
    monkeypatch.setattr(tp.config, "default_device", device)
    conv = tp.Conv(4, 6, (3, 2), stride=(2, 1), padding=[(1, 0), (0, 1)], dilation=(1, 2), groups=2)
    w, b = _load(conv, (6, 2, 3, 2), 6)
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    ref = _conv_ref(x, w, b, (2, 1), [(1, 0), (0, 1)], (1, 2), 2)
    monkeypatch.setenv(variable, value)
    exe = tp.compile(conv, args=[tp.InputInfo((2, 4, 7, 6), dtype=tp.float32)])
    np.testing.assert_allclose(np.array(exe(_dev(x)).tolist()), ref, rtol=1e-4, atol=1e-4)
    transposed = tp.ConvTranspose(4, 2, (3, 3), stride=2, padding=1, output_padding=1)
    w, b = _load(transposed, (4, 2, 3, 3), 2)
    ref = _conv_transpose_ref(x, w, b, (2, 2), [(1, 1), (1, 1)], (1, 1), 1, [1, 1])
    np.testing.assert_allclose(np.array(transposed(_dev(x)).tolist()), ref, rtol=1e-4, atol=1e-4)

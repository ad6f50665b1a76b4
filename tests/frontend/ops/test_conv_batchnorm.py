"""Inference BatchNorm after a convolution is folded at compile time into the convolution's weights
and bias (fold_conv_affine), and the bias, residual and activation run in the convolution's
epilogue: one kernel per convolution, against numpy in float64, on every device."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

from test_conv import _conv_ref, _conv_transpose_ref, _kernels_of

RNG = np.random.default_rng(11)
ACTIVATIONS = {
    "relu": (tp.relu, lambda a: np.maximum(a, 0)),
    "silu": (tp.silu, lambda a: a / (1 + np.exp(-a))),
    "none": (lambda a: a, lambda a: a),
}


def _dev(data, **kwargs):
    return tp.Tensor(data, device=default_device(), **kwargs)


def _bn_params(c, dtype):
    w, b = 1 + 0.3 * RNG.standard_normal(c), 0.5 * RNG.standard_normal(c)
    mean, var = 0.5 * RNG.standard_normal(c), RNG.uniform(0.3, 2.0, c)
    return {k: v.astype(dtype) for k, v in (("weight", w), ("bias", b), ("running_mean", mean), ("running_var", var))}


def _bn_ref(y, p, eps=1e-5):
    shape = [1, -1] + [1] * (y.ndim - 2)
    f = {k: v.astype(np.float64).reshape(shape) for k, v in p.items()}
    return (y - f["running_mean"]) / np.sqrt(f["running_var"] + eps) * f["weight"] + f["bias"]


class _ConvBn(tp.Module):
    def __init__(self, conv, channels, act, dtype):
        super().__init__()
        self.conv = conv
        self.bn = tp.BatchNorm(channels, dtype=dtype)
        self.act = act

    def __call__(self, x):
        return self.act(self.bn(self.conv(x)))


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("conv_bias", [False, True])
def test_conv_batchnorm_activation_is_one_kernel_and_matches_numpy(act, conv_bias, device, capsys):
    tp_act, np_act = ACTIVATIONS[act]
    conv = tp.Conv(3, 6, (3, 3), stride=2, padding=1, groups=1, bias=conv_bias)
    w = RNG.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.4
    b = RNG.standard_normal(6).astype(np.float32) if conv_bias else None
    model = _ConvBn(conv, 6, tp_act, tp.float32)
    bn = _bn_params(6, np.float32)
    state = {"conv.weight": _dev(w), **{"bn." + k: _dev(v) for k, v in bn.items()}}
    if conv_bias:
        state["conv.bias"] = _dev(b)
    model.load_state_dict(state)
    exe, kinds = _kernels_of(lambda: tp.compile(model, args=[tp.InputInfo(((1, 2, 3), 3, 9, 8), dtype=tp.float32)]),
                             capsys)
    want_name = "conv_bias" + ("" if act == "none" else "_" + act)
    assert kinds == [("convolution", want_name)], kinds
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    y = _conv_ref(x.astype(np.float64), w.astype(np.float64), b, (2, 2), [(1, 1), (1, 1)], (1, 1), 1)
    ref = np_act(_bn_ref(y.astype(np.float64), bn))
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), ref, rtol=2e-5, atol=2e-5)


def test_grouped_transposed_conv_batchnorm_folds_per_output_channel(device, capsys):
    # Transposed weights are (C, O / groups, k...): the scale goes along dim 1 within each group.
    deconv = tp.ConvTranspose(4, 6, (2, 2), stride=2, groups=2, bias=False)
    w = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    model = _ConvBn(deconv, 6, tp.relu, tp.float32)
    bn = _bn_params(6, np.float32)
    model.load_state_dict({"conv.weight": _dev(w), **{"bn." + k: _dev(v) for k, v in bn.items()}})
    exe, kinds = _kernels_of(lambda: tp.compile(model, args=[tp.InputInfo((2, 4, 3, 3), dtype=tp.float32)]), capsys)
    assert kinds == [("convolution", "conv_transpose_bias_relu")], kinds
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    y = _conv_transpose_ref(x, w, None, (2, 2), [(0, 0), (0, 0)], (1, 1), 2)
    ref = np.maximum(_bn_ref(y.astype(np.float64), bn), 0)
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), ref, rtol=2e-5, atol=2e-5)


def test_float16_folding_is_exact_to_rounding(device):
    # The folded weights are rounded once to float16: the result is as close to float64 as the
    # float16 output allows (a few units in the last place).
    conv = tp.Conv(8, 8, (3, 3), padding=1, bias=False, dtype=tp.float16)
    w = (RNG.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float16)
    model = _ConvBn(conv, 8, tp.relu, tp.float16)
    bn = _bn_params(8, np.float16)
    model.load_state_dict({"conv.weight": _dev(w), **{"bn." + k: _dev(v) for k, v in bn.items()}})
    exe = tp.compile(model, args=[tp.InputInfo((2, 8, 6, 6), dtype=tp.float16)])
    x = RNG.standard_normal((2, 8, 6, 6)).astype(np.float16)
    y = _conv_ref(x.astype(np.float64), w.astype(np.float64), None, (1, 1), [(1, 1), (1, 1)], (1, 1), 1)
    ref = np.maximum(_bn_ref(y.astype(np.float64), bn), 0)
    got = np.asarray(exe(_dev(x))).astype(np.float64)
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() <= 4e-3 * scale, np.abs(got - ref).max() / scale


class _Block(tp.Module):
    """ResNet's bottleneck with BatchNorm after every convolution and a downsampling shortcut."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = tp.Conv(4, 2, (1, 1), bias=False), tp.BatchNorm(2)
        self.c2, self.b2 = tp.Conv(2, 2, (3, 3), stride=2, padding=1, bias=False), tp.BatchNorm(2)
        self.c3, self.b3 = tp.Conv(2, 8, (1, 1), bias=False), tp.BatchNorm(8)
        self.cd, self.bd = tp.Conv(4, 8, (1, 1), stride=2, bias=False), tp.BatchNorm(8)

    def __call__(self, x):
        h = tp.relu(self.b1(self.c1(x)))
        h = tp.relu(self.b2(self.c2(h)))
        return tp.relu(self.b3(self.c3(h)) + self.bd(self.cd(x)))


def test_bottleneck_with_batchnorm_is_four_convolution_kernels(device, capsys):
    block = _Block()
    weights, stats, state = {}, {}, {}
    for name, cout, cin, k in (("c1", 2, 4, 1), ("c2", 2, 2, 3), ("c3", 8, 2, 1), ("cd", 8, 4, 1)):
        weights[name] = RNG.standard_normal((cout, cin, k, k)).astype(np.float32) * 0.5
        stats[name] = _bn_params(cout, np.float32)
        state[name + ".weight"] = _dev(weights[name])
        state.update({"b" + name[1] + "." + k: _dev(v) for k, v in stats[name].items()})
    block.load_state_dict(state)
    exe, kinds = _kernels_of(lambda: tp.compile(block, args=[tp.InputInfo(((1, 2, 2), 4, 7, 7), dtype=tp.float32)]),
                             capsys)
    # On the CPU the float32 chain runs channels-last: one transpose in, one out.
    edge = ["transpose"] if device == "cpu" else []
    assert [k for k, _ in kinds] == edge + ["convolution"] * 4 + edge, kinds
    assert [n for k, n in kinds if k == "convolution"][-1] == "conv_bias_add_relu", kinds
    x = RNG.standard_normal((2, 4, 7, 7)).astype(np.float32)
    zero, one = [(0, 0), (0, 0)], [(1, 1), (1, 1)]

    def conv_bn(name, y, stride, pad):
        return _bn_ref(_conv_ref(y, weights[name], None, (stride, stride), pad, (1, 1), 1).astype(np.float64), stats[name])

    h = np.maximum(conv_bn("c1", x, 1, zero), 0)
    h = np.maximum(conv_bn("c2", h, 2, one), 0)
    ref = np.maximum(conv_bn("c3", h, 1, zero) + conv_bn("cd", x, 2, zero), 0)
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), ref, rtol=1e-4, atol=1e-4)


def test_resnet50_runs_56_kernels_per_call(device, capsys):
    """examples/resnet50.py at a small width: BatchNorm folded into all 53 convolutions, their
    epilogues fused, the stem's max pool one kernel, the global average pool one reduction and the
    classifier one GEMM: 56 kernels (issue 11 asks for at most 80), and no copies."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    import resnet50 as rn

    model = rn.ResNet(rn.RESNET50_LAYERS, width=4, num_classes=10)
    weights = rn.random_weights(rn.RESNET50_LAYERS, width=4, num_classes=10)
    rn.load_resnet(model, {k: _dev(v) for k, v in weights.items()})
    exe, kinds = _kernels_of(
        lambda: tp.compile(model, args=[tp.InputInfo(((1, 2, 2), 3, (32, 32, 48), (32, 32, 48)), dtype=tp.float32)]),
        capsys)
    counts = {}
    for kind, _ in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    # float32 runs channels-last on the CPU (oneDNN reads NHWC): a transpose in, and the global
    # average pool reads the last NHWC value back channels-first.
    edges = {"transpose": 2} if device == "cpu" else {}
    assert counts == {"convolution": 53, "pooling": 1, "fused": 1, "dot": 1, **edges}, counts
    # Each convolution is plain or ends in relu: one cuDNN call each on the GPU (the shortcut's
    # biases are summed into the later convolution: merge_conv_biases).
    assert {name for kind, name in kinds if kind == "convolution"} == {"conv", "conv_bias_relu", "conv_bias_add_relu"}
    assert len(kinds) <= 80
    for size in (32, 40):
        x = RNG.standard_normal((2, 3, size, size)).astype(np.float32)
        want = rn.numpy_forward(weights, x)
        got = np.asarray(exe(_dev(x)))
        assert rn.ref.max_relative_error(got, want) < 1e-4

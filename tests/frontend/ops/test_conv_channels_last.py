"""Channels-last convolutions (the channels_last pass): on GPUs float16/bfloat16 convolutions run
NHWC with the bias, residual, activation and pooling between them, and layouts change only at the
program's edges. TRIPY_CHANNELS_LAST=1 applies the pass to every float convolution on every
device, so these tests run the channels-last kernels on the CPU too; TRIPY_CHANNELS_LAST=0 turns it
off. Each compiled program is checked against numpy in float64 and its transposes are counted."""

import os
import sys

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

from test_conv import _conv_ref, _kernels_of
from test_pooling import _pool_ref

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
import resnet50 as rn  # noqa: E402

RNG = np.random.default_rng(12)
DTYPES = {"float32": (tp.float32, np.float32, 2e-4), "float16": (tp.float16, np.float16, 2e-2)}


def _dev(data, **kwargs):
    return tp.Tensor(data, device=default_device(), **kwargs)


def _counts(kinds):
    counts = {}
    for kind, _ in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


class _Net(tp.Module):
    """A stem convolution, max pool, a bottleneck with a strided shortcut and a global average:
    every op the pass moves into channels-last, and a reduction that needs channels-first."""

    def __init__(self, dtype):
        super().__init__()
        self.stem = tp.Conv(3, 8, (3, 3), stride=2, padding=1, dtype=dtype)
        self.c1 = tp.Conv(8, 4, (1, 1), dtype=dtype)
        self.c2 = tp.Conv(4, 4, (3, 3), stride=2, padding=1, groups=2, dtype=dtype)
        self.c3 = tp.Conv(4, 16, (1, 1), dtype=dtype)
        self.down = tp.Conv(8, 16, (1, 1), stride=2, dtype=dtype)

    def __call__(self, x):
        x = tp.maxpool(tp.relu(self.stem(x)), (3, 3), stride=(2, 2), padding=((1, 1), (1, 1)))
        h = tp.relu(self.c1(x))
        h = tp.relu(self.c2(h))
        y = tp.relu(self.c3(h) + self.down(x))
        return tp.mean(tp.avgpool(y, (2, 2), stride=(1, 1)), dim=(2, 3))


def _net(dtype_name):
    tp_dtype, np_dtype, _ = DTYPES[dtype_name]
    net = _Net(tp_dtype)
    params = {}
    for name in ("stem", "c1", "c2", "c3", "down"):
        conv = getattr(net, name)
        w = (RNG.standard_normal(conv.weight.shape) * 0.3).astype(np_dtype)
        b = RNG.standard_normal(conv.bias.shape).astype(np_dtype)
        conv.load_state_dict({"weight": _dev(w), "bias": _dev(b)})
        params[name] = (w.astype(np.float64), b.astype(np.float64))
    return net, params


def _net_ref(params, x):
    relu = lambda a: np.maximum(a, 0)
    one, zero = [(1, 1), (1, 1)], [(0, 0), (0, 0)]
    x = relu(_conv_ref(x, *params["stem"], (2, 2), one, (1, 1), 1).astype(np.float64))
    x = _pool_ref(x, (3, 3), (2, 2), one, "max").astype(np.float64)
    h = relu(_conv_ref(x, *params["c1"], (1, 1), zero, (1, 1), 1))
    h = relu(_conv_ref(h, *params["c2"], (2, 2), one, (1, 1), 2))
    y = relu(_conv_ref(h, *params["c3"], (1, 1), zero, (1, 1), 1) + _conv_ref(x, *params["down"], (2, 2), zero, (1, 1), 1))
    return _pool_ref(y, (2, 2), (1, 1), zero, "avg").astype(np.float64).mean(axis=(2, 3))


def _compile_net(net, dtype, capsys):
    return _kernels_of(lambda: tp.compile(net, args=[tp.InputInfo(((1, 2, 3), 3, 16, (12, 16, 20)), dtype=dtype)]),
                       capsys)


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_forced_channels_last_transposes_only_at_the_edges_and_matches_numpy(dtype_name, device, capsys, monkeypatch):
    monkeypatch.setenv("TRIPY_CHANNELS_LAST", "1")
    tp_dtype, np_dtype, tol = DTYPES[dtype_name]
    net, params = _net(dtype_name)
    exe, kinds = _compile_net(net, tp_dtype, capsys)
    counts = _counts(kinds)
    # The input image in, the block's output out (before the reduction); the five convolutions
    # (bias, relu and the residual in their epilogues) and both pools read and write NHWC.
    assert counts == {"transpose": 2, "convolution": 5, "pooling": 2, "fused": 1}, kinds
    assert kinds[0][0] == "transpose" and kinds[-2][0] == "transpose", kinds
    assert kinds[-3] == ("pooling", "avgpool"), kinds
    for batch, width in ((2, 16), (1, 20)):
        x = RNG.standard_normal((batch, 3, 16, width)).astype(np_dtype)
        want = _net_ref(params, x.astype(np.float64))
        got = np.asarray(exe(_dev(x))).astype(np.float64)
        assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max()), np.abs(got - want).max()


def test_channels_last_off_keeps_every_kernel_channels_first(device, capsys, monkeypatch):
    monkeypatch.setenv("TRIPY_CHANNELS_LAST", "0")
    net, params = _net("float16")
    exe, kinds = _compile_net(net, tp.float16, capsys)
    assert "transpose" not in _counts(kinds), kinds
    x = RNG.standard_normal((2, 3, 16, 12)).astype(np.float16)
    want = _net_ref(params, x.astype(np.float64))
    assert np.abs(np.asarray(exe(_dev(x))).astype(np.float64) - want).max() <= 2e-2 * max(1.0, np.abs(want).max())


def test_by_default_gpus_take_narrow_floats_and_the_cpu_float32_chains(device, capsys, monkeypatch):
    monkeypatch.delenv("TRIPY_CHANNELS_LAST", raising=False)
    for dtype_name in sorted(DTYPES):
        net, _ = _net(dtype_name)
        _, kinds = _compile_net(net, DTYPES[dtype_name][0], capsys)
        last = dtype_name == "float16" if device == "gpu" else dtype_name == "float32"
        expected = 2 if last else 0
        assert _counts(kinds).get("transpose", 0) == expected, (dtype_name, kinds)


def test_channels_last_executables_save_and_load(tmp_path, device, monkeypatch):
    monkeypatch.setenv("TRIPY_CHANNELS_LAST", "1")
    net, params = _net("float32")
    exe = tp.compile(net, args=[tp.InputInfo((1, 3, 16, 16), dtype=tp.float32)])
    path = str(tmp_path / "net.tpy")
    exe.save(path)
    loaded = tp.Executable.load(path)
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(loaded(_dev(x))), np.asarray(exe(_dev(x))), rtol=0, atol=0)
    np.testing.assert_allclose(np.asarray(loaded(_dev(x))), _net_ref(params, x.astype(np.float64)), rtol=2e-4, atol=2e-4)


def test_channels_last_direct_gpu_kernel_matches_numpy(capsys, monkeypatch):
    """TRIPY_CUDNN=0: the CUDA direct kernel (the fallback where cuDNN declines) reads NHWC too."""
    from tripy import _C

    if not _C.gpu_available():
        pytest.skip("no GPU on this machine")
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    monkeypatch.setenv("TRIPY_CUDNN", "0")
    monkeypatch.setenv("TRIPY_CHANNELS_LAST", "1")
    net, params = _net("float32")
    exe, kinds = _compile_net(net, tp.float32, capsys)
    assert _counts(kinds)["transpose"] == 2, kinds
    x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(exe(_dev(x))), _net_ref(params, x.astype(np.float64)), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("forced", [False, True])
def test_resnet50_channels_last_runs_58_kernels_with_two_transposes(forced, device, capsys, monkeypatch):
    """examples/resnet50.py in float16 at a small width: channels-last where the pass runs (the
    GPU, or forced), adding only the two edge transposes to its 56 kernels; against numpy."""
    if forced:
        monkeypatch.setenv("TRIPY_CHANNELS_LAST", "1")
    else:
        monkeypatch.delenv("TRIPY_CHANNELS_LAST", raising=False)
        if device != "gpu":
            pytest.skip("the pass runs by default on GPUs only")
    model = rn.ResNet(rn.RESNET50_LAYERS, width=8, num_classes=10, dtype=tp.float16)
    weights = rn.random_weights(rn.RESNET50_LAYERS, width=8, num_classes=10)
    rn.load_resnet(model, weights)  # converted to each parameter's dtype
    exe, kinds = _kernels_of(
        lambda: tp.compile(model, args=[tp.InputInfo(((1, 2, 2), 3, 32, 32), dtype=tp.float16)]), capsys)
    assert _counts(kinds) == {"convolution": 53, "pooling": 1, "fused": 1, "dot": 1, "transpose": 2}, _counts(kinds)
    assert kinds[0][0] == "transpose" and kinds[-3][0] == "transpose", kinds
    x = RNG.standard_normal((2, 3, 32, 32)).astype(np.float16)
    want = rn.numpy_forward({k: v.astype(np.float16).astype(np.float64) for k, v in weights.items()},
                            x.astype(np.float64))
    got = np.asarray(exe(_dev(x))).astype(np.float64)
    assert rn.ref.max_relative_error(got, want) < 3e-2

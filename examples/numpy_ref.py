"""Float64 numpy references for the model examples: the layers they are built from, written plainly
so that each example can check Tripy against an independent implementation where torch is absent.
Every function takes and returns float64 arrays in torch's layouts ((N, C, H, W), (out, in) weights)."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """The exact (erf) GELU, as torch.nn.GELU() computes it."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


def layer_norm(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def batch_norm(x, weight, bias, mean, var, eps=1e-5):
    """Inference BatchNorm over (N, C, ...) with stored statistics."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * weight.reshape(shape) + bias.reshape(shape)


def conv2d(x, weight, bias=None, stride=1, padding=0, groups=1):
    """Cross-correlation of (N, C, H, W) with (O, C / groups, kh, kw), zero padding, as torch's conv2d."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg]
        wg = weight[g * og : (g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, groups=1):
    """torch's conv_transpose2d with (C_in, O / groups, kh, kw) weights: each input pixel scatters its
    kernel-weighted values onto a stride-spaced output grid, which is then cropped by ``padding``."""
    n, c, h, w = x.shape
    _, og, kh, kw = weight.shape
    cg = c // groups
    full = np.zeros((n, og * groups, (h - 1) * stride + kh, (w - 1) * stride + kw))
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg]
        wg = weight[g * cg : (g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
                rows = slice(i, i + stride * (h - 1) + 1, stride)
                cols = slice(j, j + stride * (w - 1) + 1, stride)
                full[:, g * og : (g + 1) * og, rows, cols] += contrib
    out = full[:, :, padding : full.shape[2] - padding, padding : full.shape[3] - padding]
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out


def max_pool2d(x, kernel, stride, padding):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), constant_values=-np.inf)
    oh = (x.shape[2] - kernel) // stride + 1
    ow = (x.shape[3] - kernel) // stride + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(kernel):
        for j in range(kernel):
            rows = slice(i, i + stride * (oh - 1) + 1, stride)
            cols = slice(j, j + stride * (ow - 1) + 1, stride)
            out = np.maximum(out, x[:, :, rows, cols])
    return out


def max_relative_error(got, want):
    """max |got - want| / max |want|: one number that a tolerance can judge whatever the scale."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shapes differ: {got.shape} vs {want.shape}")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


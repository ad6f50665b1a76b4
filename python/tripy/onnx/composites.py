"""ONNX ops that Tripy has no single op for, written with Tripy's ops (each a function of tensors
and the node's settings; ``converters.py`` reads the node and calls them): inverse trigonometry,
Hardmax, OneHot, EyeLike, LRN, ReverseSequence, edge and wrap padding."""

import math

from tripy.frontend import dtypes
from tripy.frontend.ops.creation import iota
from tripy.frontend.ops.elementwise import maximum, sqrt, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.reduce import argmax
from tripy.frontend.ops.shape_ops import flatten, gather, reshape, unsqueeze
from tripy.frontend.tensor import Tensor


def _like(value, x):
    return Tensor(value, dtype=x.dtype)


def atan(x):
    """arctan to float32 precision: |x| > 1 through pi/2 - atan(1/x), then |x| > tan(pi/8) through
    pi/4 + atan((x - 1) / (x + 1)), then Cephes' odd polynomial (atanf)."""
    a = abs(x)
    big = a > 1.0
    r = where(big, 1.0 / maximum(a, _like(1e-30, x)), a)  # in [0, 1]
    mid = r > 0.41421356237309503
    r = where(mid, (r - 1.0) / (r + 1.0), r)
    z = r * r
    p = (((z * 8.05374449538e-2 - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * r + r
    p = where(mid, p + math.pi / 4, p)
    p = where(big, math.pi / 2 - p, p)
    return where(x < 0, -p, p)


def asin(x):
    return atan(x / sqrt(maximum(1.0 - x * x, _like(0.0, x))))


def acos(x):
    return math.pi / 2 - asin(x)


def hardmax(x, axis):
    """1 where ``x`` has the first maximum along ``axis``, 0 elsewhere."""
    index = argmax(x, axis, True)
    hit = iota(list(x.shape), axis, dtypes.int32) == index
    return cast(cast(hit, dtypes.int32), x.dtype) if x.dtype != dtypes.bool else hit


def hardmax_2d(x, axis):
    """Hardmax before opset 13: over the dims from ``axis`` on, flattened together."""
    if axis == x.rank - 1:
        return hardmax(x, axis)
    shape = list(x.shape)
    flat = flatten(x, axis, -1) if axis > 0 else reshape(x, [1, -1])
    out = hardmax(flat, flat.rank - 1)
    return reshape(out, shape)


def one_hot(indices, depth, off, on, axis):
    """``on`` where the new ``axis`` (of size ``depth``) equals the index, ``off`` elsewhere."""
    indices = cast(indices, dtypes.int64) if indices.dtype != dtypes.int64 else indices
    indices = where(indices < 0, indices + depth, indices)
    rank = indices.rank + 1
    axis = axis + rank if axis < 0 else axis
    shape = list(indices.shape)
    shape.insert(axis, depth)
    hit = iota(shape, axis, dtypes.int64) == unsqueeze(indices, axis)
    return where(hit, on, off)


def eye_like(x, k, dtype):
    rows, cols = x.shape
    hit = (iota([rows, cols], 0, dtypes.int64) + k) == iota([rows, cols], 1, dtypes.int64)
    return cast(cast(hit, dtypes.int32), dtype) if dtype != dtypes.bool else hit


def lrn(x, size, alpha, beta, bias):
    """x / (bias + alpha / size * sum of squares over the channel window) ** beta."""
    channels = x.shape[1]
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    square = x * x
    padded = pad(square, [(0, 0), (before, after)] + [(0, 0)] * (x.rank - 2))
    total = None
    for offset in range(size):
        window = padded[(slice(None), slice(offset, offset + channels))]
        total = window if total is None else total + window
    return x / (total * (alpha / size) + bias) ** beta


def reverse_sequence(x, lengths, batch_axis, time_axis):
    """Each batch entry's first ``lengths[b]`` steps along ``time_axis`` reversed (static shapes)."""
    shape = list(x.shape)
    lengths = cast(lengths, dtypes.int64) if lengths.dtype != dtypes.int64 else lengths
    view = [1] * x.rank
    view[batch_axis] = shape[batch_axis]
    length = reshape(lengths, view)
    t = iota(shape, time_axis, dtypes.int64)
    source = where(t < length, length - 1 - t, t)
    return take_along(x, source, time_axis)


def take_along(data, index, axis):
    """data[..., index[i, j, ...], ...] along ``axis`` (static shapes): one gather from the flattened
    data at row-major positions built from the index and an iota per other dim."""
    shape = list(data.shape)
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    index = cast(index, dtypes.int64) if index.dtype != dtypes.int64 else index
    index = where(index < 0, index + shape[axis], index)
    position = index * strides[axis]
    for k in range(data.rank):
        if k != axis:
            position = position + iota(list(index.shape), k, dtypes.int64) * strides[k]
    return gather(flatten(data), 0, position)


def edge_pad(x, pads, wrap=False):
    """``x`` padded by repeating its edge values (or, with ``wrap``, its values from the other end):
    per dim, a gather at clamped (or wrapped) positions."""
    for d, (before, after) in enumerate(pads):
        if not before and not after:
            continue
        n = x.shape[d]
        index = [(i - before) % n if wrap else min(max(i - before, 0), n - 1) for i in range(n + before + after)]
        x = gather(x, d, Tensor(index))
    return x

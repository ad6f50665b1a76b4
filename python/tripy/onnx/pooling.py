"""ONNX's pooling ops: MaxPool and AveragePool as Tripy's pooling ops where they fit (no dilation,
no Indices output); otherwise, and for LpPool, as one strided slice of the padded input per kernel
offset, combined (the max, with its position for Indices; the sum). GlobalX pools reduce the
spatial dims; MaxUnpool scatters values back to their positions. Their rows join the converter
table in ``converters.py``."""

import builtins
import itertools
import math

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full, iota
from tripy.frontend.ops.elementwise import maximum, sqrt, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.pooling import avgpool, maxpool
from tripy.frontend.ops.reduce import max, mean, sum
from tripy.frontend.ops.shape_ops import flatten, reshape
from tripy.onnx import scatter as scatter_ops
from tripy.onnx.converters_nn import _spatial_pads
from tripy.onnx.graph import _static
from tripy.onnx.rows import Row


def _static_spatial(n, x):
    if not _static(x.shape):
        _raise_here(f"ONNX {n.describe()}: this pooling needs static shapes, but the input's is {list(x.shape)}.")
    return list(x.shape[2:])


def _window_settings(ctx, n, x):
    """kernel, strides, dilations and (before, after) padding per spatial dim, the ends grown for
    ceil_mode (windows that start inside the front-padded input are kept)."""
    kernel = n.attr("kernel_shape")
    nd = len(kernel)
    strides = n.attr("strides", [1] * nd)
    dilations = n.attr("dilations", [1] * nd)
    padding = _spatial_pads(ctx, n, x, kernel, strides, dilations)
    if n.attr("ceil_mode", 0):
        grown = []
        for i, (lo, hi) in enumerate(padding):
            size = x.shape[2 + i]
            if not isinstance(size, int):
                _raise_here(f"ONNX {n.describe()}: ceil_mode needs static spatial sizes.")
            span = (kernel[i] - 1) * dilations[i] + 1
            out = -(-(size + lo + hi - span) // strides[i]) + 1
            if (out - 1) * strides[i] >= size + lo:
                out -= 1
            grown.append((lo, builtins.max(hi, (out - 1) * strides[i] + span - size - lo)))
        padding = grown  # padded elements never win a max and count_include_pad=0 averages skip them
    return kernel, strides, dilations, padding


def _windows(x, kernel, strides, dilations, padding, fill):
    """(offset, window) per kernel offset: the padded input's elements that offset reads, one per output."""
    padded = pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in padding], value=fill)
    spatial = list(x.shape[2:])
    outs = [(s + lo + hi - (k - 1) * d - 1) // st + 1
            for s, (lo, hi), k, d, st in zip(spatial, padding, kernel, dilations, strides)]
    for offset in itertools.product(*[range(k) for k in kernel]):
        index = (slice(None), slice(None)) + tuple(slice(o * d, o * d + (out - 1) * st + 1, st)
                                                   for o, d, out, st in zip(offset, dilations, outs, strides))
        yield offset, padded[index], outs


def _lowest(x):
    if issubclass(x.dtype, dtypes.floating):
        return float("-inf")
    return {dtypes.int8: -(1 << 7), dtypes.int32: -(1 << 31), dtypes.int64: -(1 << 63)}[x.dtype]


def _max_pool_sliced(n, x, kernel, strides, dilations, padding, indices):
    """The max of each window and, with ``indices``, the flat position of its first maximum in the
    input (row-major, or column-major over the spatial dims with storage_order=1)."""
    spatial = _static_spatial(n, x)
    best, where_best = None, None
    column_major = bool(n.attr("storage_order", 0))
    for offset, window, outs in _windows(x, kernel, strides, dilations, padding, _lowest(x)):
        if indices:
            position = iota(list(window.shape), 0, dtypes.int64) * math.prod(x.shape[1:]) + \
                iota(list(window.shape), 1, dtypes.int64) * math.prod(spatial)
            dims = range(len(spatial) - 1, -1, -1) if column_major else range(len(spatial))
            stride = 1
            for i in reversed(list(dims)):
                coordinate = iota(list(window.shape), 2 + i, dtypes.int64) * strides[i] + (
                    offset[i] * dilations[i] - padding[i][0])
                position = position + coordinate * stride
                stride *= spatial[i]
        if best is None:
            best, where_best = window, position if indices else None
            continue
        if indices:
            where_best = where(window > best, position, where_best)
        best = maximum(best, window)
    return [best, where_best] if indices else best


def _avg_pool_sliced(x, kernel, strides, dilations, padding, count_include_pad):
    total = None
    for _, window, _ in _windows(x, kernel, strides, dilations, padding, 0):
        total = window if total is None else total + window
    if count_include_pad:
        return total / float(math.prod(kernel))
    ones = full(list(x.shape), 1.0, x.dtype)
    count = None
    for _, window, _ in _windows(ones, kernel, strides, dilations, padding, 0):
        count = window if count is None else count + window
    return total / count


def _pool(kind):
    def run(ctx, n):
        x = ctx.tensor(n.inputs[0])
        kernel, strides, dilations, padding = _window_settings(ctx, n, x)
        indices = kind == "max" and len(n.outputs) > 1 and bool(n.outputs[1])
        if kind == "max" and (indices or any(d != 1 for d in dilations)):
            return _max_pool_sliced(n, x, kernel, strides, dilations, padding, indices)
        include_pad = bool(n.attr("count_include_pad", 0))
        if any(d != 1 for d in dilations):
            _static_spatial(n, x)
            return _avg_pool_sliced(x, kernel, strides, dilations, padding, include_pad)
        if kind == "max":
            return maxpool(x, kernel, strides, padding)
        return avgpool(x, kernel, strides, padding, count_include_pad=include_pad)

    return run


def _lp_pool(ctx, n):
    """(sum over the window of |x|^p)^(1/p): an average pool counting the zero padding, times the window size."""
    x = ctx.tensor(n.inputs[0])
    p = n.attr("p", 2)
    kernel, strides, dilations, padding = _window_settings(ctx, n, x)
    powered = abs(x) ** float(p) if p != 2 else x * x
    if any(d != 1 for d in dilations):
        _static_spatial(n, x)
        total = _avg_pool_sliced(powered, kernel, strides, dilations, padding, True) * float(math.prod(kernel))
    else:
        total = avgpool(powered, kernel, strides, padding, count_include_pad=True) * float(math.prod(kernel))
    return _root(total, p)


def _root(total, p):
    return sqrt(total) if p == 2 else total if p == 1 else total ** (1.0 / p)


def _global_pool(fn):
    return lambda ctx, n: fn(ctx.tensor(n.inputs[0]), list(range(2, ctx.tensor(n.inputs[0]).rank)), True)


def _global_lp_pool(ctx, n):
    x = ctx.tensor(n.inputs[0])
    p = n.attr("p", 2)
    powered = abs(x) ** float(p) if p != 2 else x * x
    return _root(sum(powered, list(range(2, x.rank)), True), p)


def _max_unpool(ctx, n):
    """Zeros of the unpooled shape with each value of X at its flat position in I; a larger
    output_shape pads that at the end of each spatial dim (ONNX's reference places each value at
    the same coordinates, read in the unpooled shape)."""
    x, index = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    spatial = _static_spatial(n, x)
    kernel = n.attr("kernel_shape")
    nd = len(kernel)
    strides, pads = n.attr("strides", [1] * nd), n.attr("pads", [0] * (2 * nd))
    shape = list(x.shape[:2]) + [(s - 1) * st + k - pads[i] - pads[i + nd]
                                 for i, (s, st, k) in enumerate(zip(spatial, strides, kernel))]
    fail = lambda message: _raise_here(f"ONNX {n.describe()}: {message}.")  # noqa: E731
    zeros = full([math.prod(shape)], 0.0, x.dtype) if issubclass(x.dtype, dtypes.floating) else \
        cast(full([math.prod(shape)], 0, dtypes.int32), x.dtype)
    out = reshape(scatter_ops.scatter_nd(zeros, reshape(flatten(index), [-1, 1]), flatten(x), "none", fail), shape)
    if n.input(2) is not None:
        wanted = [int(v) for v in ctx.ints(n.inputs[2], n)]
        if len(wanted) != len(shape) or any(w < s for w, s in zip(wanted, shape)):
            fail(f"output_shape {wanted} is smaller than the unpooled shape {shape}")
        out = pad(out, [(0, w - s) for w, s in zip(wanted, shape)])
    return out


def _avg_pool_check(n):
    if n.attr("ceil_mode", 0) and n.attr("count_include_pad", 0):
        return "ceil_mode=1 with count_include_pad=1 is not supported"
    return None


_POOL_ATTRS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")

ROWS = {
    "AveragePool": Row(_pool("avg"), _POOL_ATTRS + ("count_include_pad",), check=_avg_pool_check),
    "GlobalAveragePool": Row(_global_pool(mean)),
    "GlobalLpPool": Row(_global_lp_pool, ("p",), first=2),
    "GlobalMaxPool": Row(_global_pool(max)),
    "LpPool": Row(_lp_pool, _POOL_ATTRS + ("p",), first=11),
    "MaxPool": Row(_pool("max"), _POOL_ATTRS + ("storage_order",)),
    "MaxUnpool": Row(_max_unpool, ("kernel_shape", "pads", "strides"), first=11),
}

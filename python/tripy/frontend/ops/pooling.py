"""Pooling over N-d windows of (N, C, spatial...) tensors: pad, take one strided slice per window
tap, and combine the taps elementwise (max or sum), which the compiler fuses into one kernel."""

import itertools
import math

import numpy as np

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import maximum
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.shape_ops import TO_END
from tripy.frontend.trace_call import _raise_here, make

_INT_MIN = {"int8": -(2**7), "int32": -(2**31), "int64": -(2**63)}


def _window(input, kernel_dims, stride, padding, op):
    """Checks the arguments; returns (kernel, stride, padding pairs, spatial sizes)."""
    kernel = [int(k) for k in kernel_dims]
    nd = len(kernel)
    if input.rank != nd + 2:
        _raise_here(
            f"{op}: a {nd}-D window needs an input of rank {nd + 2} (N, C, spatial...), but the input has shape "
            f"{input.shape}."
        )
    stride = [1] * nd if stride is None else [int(s) for s in stride]
    padding = [(0, 0)] * nd if padding is None else [(int(lo), int(hi)) for lo, hi in padding]
    if len(stride) != nd or len(padding) != nd:
        _raise_here(f"{op}: kernel_dims, stride and padding need one entry per spatial dim ({nd}).")
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(lo < 0 or hi < 0 for lo, hi in padding):
        _raise_here(f"{op}: kernel sizes and strides must be positive and paddings non-negative, but got kernel "
                    f"{tuple(kernel)}, stride {tuple(stride)}, padding {padding}.")
    sizes = input._node.shape[2:]
    for d, (n, k, (lo, hi)) in enumerate(zip(sizes, kernel, padding)):
        if isinstance(n, str):
            _raise_here(f"{op}: spatial dimension {d + 2} is dynamic ({n}); pooling needs static spatial sizes.")
        if k > n + lo + hi:
            _raise_here(f"{op}: the kernel {tuple(kernel)} is larger than the padded input's spatial size "
                        f"{tuple(n + lo + hi for n, (lo, hi) in zip(sizes, padding))}.")
    return kernel, stride, padding, list(sizes)


def _taps(input, kernel, stride, padding, sizes, fill):
    """Yields, for each kernel tap, the (N, C, out...) slice of the padded input it reads."""
    if any(lo or hi for lo, hi in padding):
        input = pad(input, [(0, 0), (0, 0)] + padding, value=fill)
    out = [(n + lo + hi - k) // s + 1 for n, k, s, (lo, hi) in zip(sizes, kernel, stride, padding)]
    for tap in itertools.product(*(range(k) for k in kernel)):
        limits = [t + s * (o - 1) + 1 for t, s, o in zip(tap, stride, out)]
        yield make("slice", [input], starts=[0, 0, *tap], limits=[TO_END, TO_END, *limits], steps=[1, 1, *stride])


def maxpool(input, kernel_dims, stride=None, padding=None):
    """
    The maximum over each window of ``kernel_dims`` (2-D or 3-D) on an (N, C, H, W) or
    (N, C, D, H, W) tensor. ``stride`` defaults to 1 per dim; ``padding`` is one
    ``(before, after)`` pair per spatial dim (default none), and padded elements never win.

    Example::

        import tripy as tp

        x = tp.reshape(tp.arange(16), (1, 1, 4, 4))
        out = tp.maxpool(x, (2, 2), stride=(2, 2))
        assert out.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    kernel, stride, padding, sizes = _window(input, kernel_dims, stride, padding, "maxpool")
    if input.dtype == dtypes.bool or input.dtype.name not in ("float32", "float16", "bfloat16", *_INT_MIN):
        _raise_here(f"maxpool: unsupported dtype {input.dtype.name}.")
    fill = float("-inf") if issubclass(input.dtype, dtypes.floating) else _INT_MIN[input.dtype.name]
    out = None
    for tap in _taps(input, kernel, stride, padding, sizes, fill):
        out = tap if out is None else maximum(out, tap)
    return out


def _window_counts(kernel, stride, padding, sizes):
    """How many real (unpadded) elements each output window covers, per output position."""
    per_dim = []
    for n, k, s, (lo, hi) in zip(sizes, kernel, stride, padding):
        starts = np.arange((n + lo + hi - k) // s + 1) * s - lo
        per_dim.append(np.minimum(starts + k, n) - np.maximum(starts, 0))
    counts = per_dim[0]
    for c in per_dim[1:]:
        counts = np.multiply.outer(counts, c)
    return counts.astype(np.float32)


def avgpool(input, kernel_dims, stride=None, padding=None, count_include_pad=True):
    """
    The mean over each window of ``kernel_dims`` (2-D or 3-D) on an (N, C, H, W) or
    (N, C, D, H, W) float tensor. ``stride`` defaults to 1 per dim; ``padding`` is one
    ``(before, after)`` pair per spatial dim (default none), padding with zeros. With
    ``count_include_pad=False`` each window divides by its count of unpadded elements.

    Example::

        import tripy as tp

        x = tp.reshape(tp.arange(16), (1, 1, 4, 4))
        out = tp.avgpool(x, (2, 2), stride=(2, 2))
        assert out.tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    from tripy.frontend.ops.misc import cast
    from tripy.frontend.tensor import Tensor

    kernel, stride, padding, sizes = _window(input, kernel_dims, stride, padding, "avgpool")
    if not issubclass(input.dtype, dtypes.floating):
        _raise_here(f"avgpool: expected a float tensor, but got dtype {input.dtype.name}.")
    total = None
    for tap in _taps(input, kernel, stride, padding, sizes, 0):
        total = tap if total is None else total + tap
    if count_include_pad or not any(lo or hi for lo, hi in padding):
        return total * (1.0 / math.prod(kernel))
    counts = Tensor(_window_counts(kernel, stride, padding, sizes), device=input.device)
    return total / cast(counts, input.dtype)

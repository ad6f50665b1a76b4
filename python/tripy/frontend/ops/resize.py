"""Resizing by interpolation, one dim at a time (nearest, linear and cubic are separable): the source
indices and weights are computed at trace time (plain Python lists, so tripy needs no numpy) and
applied with gathers and a weighted sum."""

import math

from tripy.frontend import dtypes
from tripy.frontend.ops.shape_ops import gather
from tripy.frontend.trace_call import _raise_here

_CUBIC_A = -0.75  # the Keys kernel coefficient PyTorch and OpenCV use


def _source_coords(n_in, n_out, ratio, align_corners):
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return [i * scale for i in range(n_out)]
    return [(i + 0.5) * ratio - 0.5 for i in range(n_out)]


def _cubic_weights(t):
    """Weights of the 4 taps at offsets -1, 0, 1, 2 for the fractional position ``t``: a float,
    or a float32 tensor of them (the dynamic path), hence the operand order (tensor first)."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((x * (a + 2) - (a + 3)) * x) * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _taps(mode, n_in, n_out, ratio, align_corners):
    """[(indices, weights or None)] for one dim: out[i] = sum over taps of weight[i] * in[index[i]]."""
    if mode == "nearest":
        return [([min(math.floor(i * ratio), n_in - 1) for i in range(n_out)], None)]
    src = _source_coords(n_in, n_out, ratio, align_corners)
    if mode == "linear":
        src = [max(x, 0.0) for x in src]
        lo = [min(math.floor(x), n_in - 1) for x in src]
        hi = [min(i + 1, n_in - 1) for i in lo]
        t = [x - i for x, i in zip(src, lo)]
        return [(lo, [1.0 - w for w in t]), (hi, t)]
    base = [math.floor(x) for x in src]
    weights = list(zip(*(_cubic_weights(x - b) for x, b in zip(src, base))))
    return [([min(max(b + off, 0), n_in - 1) for b in base], w) for off, w in zip((-1, 0, 1, 2), weights)]


def _dynamic_taps(mode, n_in, n_out, align_corners):
    """_taps for a dim whose input size ``n_in`` (a tp.DimensionSize) is known at run time only,
    resized to the static ``n_out``: the same rules computed in the graph. Source positions are
    p / q with integers p and q, so their floor is an exact integer division and only the
    fractions are floats. (int32: exact while 2 * n_in * n_out < 2**31.)"""
    from tripy.frontend.ops.elementwise import maximum, minimum
    from tripy.frontend.ops.creation import arange
    from tripy.frontend.ops.misc import cast

    i = arange(n_out, dtype=dtypes.int32)
    if mode == "nearest":
        return [(i * n_in // n_out, None)]  # below n_in, as i < n_out
    if align_corners:  # i * (n_in - 1) / (n_out - 1)
        p, q = i * (n_in - 1), max(n_out - 1, 1)
    else:  # (i + 0.5) * n_in / n_out - 0.5 = ((2i + 1) * n_in - n_out) / (2 n_out)
        p, q = (i * 2 + 1) * n_in - n_out, 2 * n_out
    if mode == "linear":
        p = maximum(p, 0)  # positions before the first centre read the first element
    base = p // q
    t = cast(p - base * q, dtypes.float32) * (1.0 / q)
    if mode == "linear":
        # Positions never pass the last element (at most n_in - 1), so base is a valid index.
        return [(base, 1.0 - t), (minimum(base + 1, n_in - 1), t)]
    weights = _cubic_weights(t)
    return [(minimum(maximum(base + off, 0), n_in - 1), w) for off, w in zip((-1, 0, 1, 2), weights)]


def _resize_dim(x, dim, taps):
    from tripy.frontend.ops.shape_ops import reshape
    from tripy.frontend.tensor import Tensor

    out = None
    for index, weight in taps:
        if not isinstance(index, Tensor):
            index = Tensor(index, dtype=dtypes.int32, device=x.device)
        picked = gather(x, dim, index)
        if weight is not None:
            w = weight if isinstance(weight, Tensor) else Tensor(weight, dtype=dtypes.float32, device=x.device)
            if x.dtype != dtypes.float32:
                from tripy.frontend.ops.misc import cast

                w = cast(w, x.dtype)
            picked = picked * reshape(w, [index.shape[0]] + [1] * (x.rank - dim - 1))
        out = picked if out is None else out + picked
    return out


def resize(input, output_shape=None, scales=None, mode="linear", align_corners=False):
    """
    Resizes ``input`` to ``output_shape`` (one size per dim), or by ``scales`` (one factor per dim;
    a size n becomes ``floor(n * scale)``), interpolating each dim whose size changes. Inside
    ``tp.compile`` a dynamic dim can be resized to an int size of ``output_shape`` (not by a
    scale), or kept at its own size (``x.shape[d]``). ``mode`` is ``"nearest"`` (the source ``floor(i * in / out)``), ``"linear"`` or
    ``"cubic"`` (Keys, a = -0.75), both sampling at pixel centres unless ``align_corners``.
    The results match ``torch.nn.functional.interpolate``.

    Example::

        import tripy as tp

        x = tp.Tensor([[[[1.0, 2.0]]]])
        assert tp.resize(x, output_shape=(1, 1, 1, 4), mode="nearest").tolist() == [[[[1.0, 1.0, 2.0, 2.0]]]]
        assert tp.resize(x, scales=(1, 1, 1, 2), mode="linear").tolist() == [[[[1.0, 1.25, 1.75, 2.0]]]]
    """
    if mode not in ("nearest", "linear", "cubic"):
        _raise_here(f"resize: unsupported mode {mode!r}; use 'nearest', 'linear' or 'cubic'.")
    if (output_shape is None) == (scales is None):
        _raise_here("resize: give exactly one of output_shape and scales.")
    if mode != "nearest" and not issubclass(input.dtype, dtypes.floating):
        _raise_here(f"resize: {mode} interpolation needs a float tensor, but got dtype {input.dtype.name}.")
    rank = input.rank
    given = output_shape if output_shape is not None else scales
    if len(given) != rank:
        _raise_here(f"resize: expected {rank} entries (one per dim), but got {len(given)}: {tuple(given)}.")
    out = input
    for dim, (n_in, entry) in enumerate(zip(input._node.shape, given)):
        if scales is not None and float(entry) == 1.0:
            continue
        if isinstance(n_in, str):
            if output_shape is not None and not isinstance(entry, int):
                continue  # a dynamic dim kept at its own (symbolic) size
            if scales is not None:
                _raise_here(
                    f"resize: dimension {dim} is dynamic ({n_in}); resize it with output_shape (an int size), "
                    "not scales."
                )
            if int(entry) < 1:
                _raise_here(f"resize: dimension {dim} would have size {int(entry)}; sizes must be at least 1.")
            out = _resize_dim(out, dim, _dynamic_taps(mode, input.shape[dim], int(entry), align_corners))
            continue
        if scales is not None:
            if float(entry) <= 0:
                _raise_here(f"resize: scales must be positive, but got {tuple(scales)}.")
            n_out, ratio = int(math.floor(n_in * float(entry))), 1.0 / float(entry)
        else:
            n_out = int(entry)
            ratio = n_in / n_out if n_out > 0 else 0.0
        if n_out < 1:
            _raise_here(f"resize: dimension {dim} would have size {n_out}; sizes must be at least 1.")
        if n_out == n_in and scales is None:
            continue
        out = _resize_dim(out, dim, _taps(mode, n_in, n_out, ratio, align_corners))
    return out

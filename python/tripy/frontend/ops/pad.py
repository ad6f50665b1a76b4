"""Ops that grow a tensor along its dims: pad (constant, reflect) and repeat, as composites of
concatenate, slice, expand and reshape, so every backend runs them unchanged."""

from tripy.frontend import dtypes
from tripy.frontend.ops.shape_ops import concatenate, expand, reshape, slice_dim, unsqueeze
from tripy.frontend.trace_call import _raise_here, make


def full_on(input, shape, value):
    """A ``value``-filled tensor of ``shape`` with ``input``'s dtype and device (shape entries may be
    DimensionSizes, so blocks next to dynamic dims follow them)."""
    from tripy.frontend.ops.shape_ops import _sizes

    return make("full", [], shape=_sizes(shape, "a shape"), value=float(value), dtype=input.dtype.name,
                device=input._node.device)


def _pad_pairs(input, pad):
    try:
        pairs = [(int(before), int(after)) for before, after in pad]
    except (TypeError, ValueError):
        _raise_here(f"pad: expected a sequence of (before, after) pairs of ints, one per dim, but got: {pad!r}.")
    if len(pairs) != input.rank:
        _raise_here(f"pad: got {len(pairs)} (before, after) pairs for a tensor of rank {input.rank}; give one per dim.")
    if any(before < 0 or after < 0 for before, after in pairs):
        _raise_here(f"pad: padding sizes must be non-negative, but got: {pairs}.")
    return pairs


def _static_size(input, dim, op):
    size = input._node.shape[dim]
    if isinstance(size, str):
        _raise_here(f"{op}: dimension {dim} is dynamic ({size}); this needs a static size.")
    return size


def pad(input, pad, mode="constant", value=0):
    """
    Pads each dim ``d`` with ``pad[d] = (before, after)`` elements.

    ``mode="constant"`` fills with ``value``; ``mode="reflect"`` mirrors the tensor without
    repeating its edge (``[1, 2, 3]`` padded by ``(2, 1)`` is ``[3, 2, 1, 2, 3, 2]``), which needs
    ``before`` and ``after`` smaller than the dim's (static) size.

    Example::

        import tripy as tp

        x = tp.Tensor([[1.0, 2.0, 3.0]])
        assert tp.pad(x, [(0, 0), (1, 2)]).tolist() == [[0.0, 1.0, 2.0, 3.0, 0.0, 0.0]]
        assert tp.pad(x, [(0, 0), (2, 1)], mode="reflect").tolist() == [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    """
    pairs = _pad_pairs(input, pad)
    if mode not in ("constant", "reflect"):
        _raise_here(f"pad: unsupported mode {mode!r}; use 'constant' or 'reflect'.")
    if mode == "constant" and isinstance(value, float) and not issubclass(input.dtype, dtypes.floating):
        if value != int(value):
            _raise_here(f"pad: cannot fill a {input.dtype.name} tensor with the float value {value}.")
    out = input
    for dim, (before, after) in enumerate(pairs):
        if before == 0 and after == 0:
            continue
        if mode == "constant":
            parts = []
            for n in (before, None, after):
                if n is None:
                    parts.append(out)
                elif n > 0:
                    shape = list(out.shape)
                    shape[dim] = n
                    parts.append(full_on(out, shape, value))
        else:
            size = _static_size(out, dim, "pad")
            if before >= size or after >= size:
                _raise_here(
                    f"pad: reflect padding of {(before, after)} on dimension {dim} needs both sides smaller than "
                    f"its size {size}."
                )
            # Mirror images exclude the edge element: indices before..1 and size-2..size-1-after.
            parts = [slice_dim(out, dim, before, 0, -1)] if before else []
            parts.append(out)
            if after:
                parts.append(slice_dim(out, dim, size - 2, size - 2 - after, -1))
        out = concatenate(parts, dim)
    return out


def repeat(input, repeats, dim):
    """
    Repeats each element ``repeats`` times along ``dim`` (like ``torch.repeat_interleave``).

    Example::

        import tripy as tp

        x = tp.Tensor([[1, 2], [3, 4]])
        assert tp.repeat(x, 2, dim=1).tolist() == [[1, 1, 2, 2], [3, 3, 4, 4]]
        assert tp.repeat(x, 2, dim=0).tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]
    """
    if not isinstance(repeats, int) or repeats < 0:
        _raise_here(f"repeat: repeats must be a non-negative int, but got: {repeats!r}.")
    rank = input.rank
    if not -rank <= dim < rank:
        _raise_here(f"repeat: dim {dim} is out of range for a tensor of rank {rank}.")
    dim %= rank
    shape = list(input.shape)
    # A new unit dim after `dim`, broadcast to `repeats`, then merged: each element is repeated.
    spread = expand(unsqueeze(input, dim + 1), shape[: dim + 1] + [repeats] + shape[dim + 1 :])
    return reshape(spread, shape[:dim] + [shape[dim] * repeats] + shape[dim + 1 :])

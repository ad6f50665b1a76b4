"""Ops that grow a tensor along its dims: pad (the core op ``pad``, core/src/trace/ops_pad.cc) and
repeat (a composite of expand and reshape)."""

import numbers

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import _sizes, expand, reshape, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import fill_attrs, literal, make


def full_on(input, shape, value):
    """A ``value``-filled tensor of ``shape`` with ``input``'s dtype and device (shape entries may be
    DimensionSizes, so blocks next to dynamic dims follow them)."""
    return literal(value, input.dtype, _sizes(shape, "a shape"), input._node.device)


def _pad_pairs(pad):
    """(before, after) pairs of ints or tp.DimensionSizes, as two lists the core checks."""
    try:
        pairs = [tuple(pair) for pair in pad]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError
    except (TypeError, ValueError):
        _raise_here(f"pad: expected a sequence of (before, after) pairs of ints, one per dim, but got: {pad!r}.")
    what = "the padding sizes"
    return _sizes([p[0] for p in pairs], what), _sizes([p[1] for p in pairs], what)


def pad(input, pad, mode="constant", value=0):
    """
    Pads each dim ``d`` with ``pad[d] = (before, after)`` elements (ints or
    ``tp.DimensionSize`` values).

    ``mode="constant"`` fills with ``value``; ``mode="reflect"`` mirrors the tensor without
    repeating its edge (``[1, 2, 3]`` padded by ``(2, 1)`` is ``[3, 2, 1, 2, 3, 2]``), which needs
    ``before`` and ``after`` smaller than the dim's size. Dims may be dynamic inside
    ``tp.compile``: a reflection that does not fit a dynamic size is an error of the call.

    Args:
        input (tp.Tensor): The tensor to pad.
        pad (Sequence[tuple[int | tp.DimensionSize, int | tp.DimensionSize]]): One
            ``(before, after)`` pair per dim.
        mode (str): ``"constant"`` or ``"reflect"``.
        value (number): The fill value of ``"constant"`` mode.

    Returns:
        tp.Tensor: the padded tensor, of ``input``'s dtype.

    Raises:
        tp.TripyException: if ``pad`` does not have one pair per dim, a pad is negative, ``mode`` is
            unknown, a reflection does not fit the dim, or ``value`` does not fit the dtype.

    Example::

        import tripy as tp

        x = tp.Tensor([[1.0, 2.0, 3.0]])
        assert tp.pad(x, [(0, 0), (1, 2)]).tolist() == [[0.0, 1.0, 2.0, 3.0, 0.0, 0.0]]
        assert tp.pad(x, [(0, 0), (2, 1)], mode="reflect").tolist() == [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    """
    before, after = _pad_pairs(pad)
    if not isinstance(mode, str):
        _raise_here(f"pad: expected mode to be a string, but got: {mode!r}.")
    if isinstance(value, Tensor) or not isinstance(value, numbers.Real):
        _raise_here(f"pad: expected value to be a Python number, but got: {value!r}.")
    if issubclass(input.dtype, dtypes.integer) and not float(value).is_integer():
        _raise_here(f"pad: cannot fill a {input.dtype.name} tensor with the float value {value!r}.")
    return make("pad", [input], starts=before, limits=after, mode=mode, **fill_attrs(value, input.dtype))


def repeat(input, repeats, dim):
    """
    Repeats each element ``repeats`` times along ``dim`` (like ``torch.repeat_interleave``).

    Args:
        input (tp.Tensor): The tensor to repeat.
        repeats (int | tp.DimensionSize): How many times each element appears.
        dim (int): The dim to repeat along.

    Returns:
        tp.Tensor: ``input`` with ``dim`` ``repeats`` times longer.

    Raises:
        tp.TripyException: if ``repeats`` is negative or ``dim`` is out of range.

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

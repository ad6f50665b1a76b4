"""Shape ops: reshape, flatten, squeeze/unsqueeze, transpose/permute, expand, concatenate,
stack, split, flip, gather, update_slice, outer."""

import numbers
import operator

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import literal, make

# A slice limit meaning "to the end of the dim" (works for dynamic dims too).
TO_END = 1 << 62


def _ints(values, what):
    if isinstance(values, numbers.Integral):
        return [values]
    try:
        return [operator.index(v) for v in values]
    except (TypeError, ValueError):
        _raise_here(f"Expected {what} to be a sequence of ints, but got: {values!r}.")


def _dim(dim):
    try:
        return operator.index(dim)
    except TypeError:
        _raise_here(f"Expected dim to be an int, but got: {dim!r}.")


def _sizes(values, what):
    """Shape entries: ints, or DimensionSizes passed through as their (symbolic) nodes."""
    if isinstance(values, (numbers.Integral, Tensor)):
        values = [values]
    try:
        # operator.index, not int(): a float size (2.5) is a mistake to report, not to truncate.
        return [v._node if isinstance(v, Tensor) else operator.index(v) for v in values]
    except (TypeError, ValueError):
        _raise_here(f"Expected {what} to be a sequence of ints or tp.DimensionSizes, but got: {values!r}.")


def reshape(input, shape):
    """
    The same elements in a new shape; one entry may be -1 (inferred).

    Args:
        input (tp.Tensor): The tensor to reshape.
        shape (Sequence[int | tp.DimensionSize]): The new shape, with as many elements in all; one
            entry may be -1.

    Returns:
        tp.Tensor: ``input``'s elements, in row-major order, in ``shape``.

    Raises:
        tp.TripyException: if the element counts differ or more than one entry is -1.

    Example::

        import tripy as tp

        assert tp.reshape(tp.arange(6), (2, -1)).shape == (2, 3)
    """
    return make("reshape", [input], shape=_sizes(shape, "the shape"))


def flatten(input, start_dim=0, end_dim=-1):
    """
    Merges dims ``start_dim..end_dim`` into one.

    Args:
        input (tp.Tensor): The tensor to flatten.
        start_dim (int): The first dim to merge (negative counts from the end).
        end_dim (int): The last dim to merge.

    Returns:
        tp.Tensor: ``input`` with dims ``start_dim..end_dim`` merged into one.

    Raises:
        tp.TripyException: if a dim is out of range or ``start_dim`` comes after ``end_dim``.

    Example::

        import tripy as tp

        assert tp.flatten(tp.ones((2, 3, 4)), 1).shape == (2, 12)
    """
    rank = input.rank
    start_dim, end_dim = _dim(start_dim), _dim(end_dim)
    for what, d in (("start_dim", start_dim), ("end_dim", end_dim)):
        if not -max(rank, 1) <= d < max(rank, 1):
            _raise_here(f"flatten: {what} {d} is out of range for a tensor of rank {rank}.")
    s, e = start_dim % max(rank, 1), end_dim % max(rank, 1)
    if s > e:
        _raise_here(f"flatten: start_dim ({start_dim}) comes after end_dim ({end_dim}).")
    shape = list(input.shape)  # ints, and DimensionSizes for dynamic dims
    merged = 1
    for d in shape[s : e + 1]:
        merged = d * merged
    return reshape(input, shape[:s] + [merged] + shape[e + 1 :])


def squeeze(input, dims):
    """
    Removes the given dims, which must have size 1.

    Args:
        input (tp.Tensor): The tensor to squeeze.
        dims (int | Sequence[int]): The dims to remove.

    Returns:
        tp.Tensor: ``input`` without those dims.

    Raises:
        tp.TripyException: if a dim is out of range or its size is not 1.

    Example::

        import tripy as tp

        assert tp.squeeze(tp.ones((1, 3, 1)), (0, 2)).shape == (3,)
    """
    return make("squeeze", [input], dims=_ints(dims, "dims"))


def unsqueeze(input, dim):
    """
    Inserts a dim of size 1 at ``dim``.

    Args:
        input (tp.Tensor): The tensor to extend.
        dim (int): Where the new dim goes, in the result (negative counts from the end).

    Returns:
        tp.Tensor: ``input`` with one more dim, of size 1.

    Raises:
        tp.TripyException: if ``dim`` is out of range.

    Example::

        import tripy as tp

        assert tp.unsqueeze(tp.ones((3,)), 0).shape == (1, 3)
    """
    return make("unsqueeze", [input], axis=_dim(dim))


def permute(input, perm):
    """
    Reorders dims: output dim i is input dim ``perm[i]``.

    Args:
        input (tp.Tensor): The tensor to permute.
        perm (Sequence[int]): A permutation of ``range(input.rank)``.

    Returns:
        tp.Tensor: the permuted tensor.

    Raises:
        tp.TripyException: if ``perm`` is not a permutation of ``input``'s dims.

    Example::

        import tripy as tp

        assert tp.permute(tp.ones((2, 3, 4)), (2, 0, 1)).shape == (4, 2, 3)
    """
    return make("permute", [input], dims=_ints(perm, "the permutation"))


def transpose(input, dim0, dim1):
    """
    Swaps two dims.

    Args:
        input (tp.Tensor): The tensor to transpose.
        dim0 (int): One dim (negative counts from the end).
        dim1 (int): The other dim.

    Returns:
        tp.Tensor: ``input`` with ``dim0`` and ``dim1`` swapped.

    Raises:
        tp.TripyException: if a dim is out of range.

    Example::

        import tripy as tp

        assert tp.transpose(tp.Tensor([[1, 2]]), 0, 1).tolist() == [[1], [2]]
    """
    perm = list(range(input.rank))
    dim0, dim1 = _dim(dim0), _dim(dim1)
    try:
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    except IndexError:
        _raise_here(f"transpose: dims ({dim0}, {dim1}) are out of range for a tensor of rank {input.rank}.")
    return permute(input, perm)


def expand(input, sizes):
    """
    Broadcasts size-1 dims to ``sizes`` (-1 keeps a dim).

    Args:
        input (tp.Tensor): The tensor to broadcast.
        sizes (Sequence[int | tp.DimensionSize]): The new shape (at least ``input``'s rank; new
            dims go in front); -1 keeps a dim's size.

    Returns:
        tp.Tensor: ``input`` broadcast to ``sizes``.

    Raises:
        tp.TripyException: if a dim whose size is not 1 would change.

    Example::

        import tripy as tp

        assert tp.expand(tp.ones((1, 2)), (3, -1)).shape == (3, 2)
    """
    return make("expand", [input], shape=_sizes(sizes, "sizes"))


def concatenate(tensors, dim):
    """
    Joins tensors along an existing dim.

    Args:
        tensors (Sequence[tp.Tensor]): The tensors, of one dtype and rank, equal in every dim but ``dim``.
        dim (int): The dim to join along.

    Returns:
        tp.Tensor: the joined tensor.

    Raises:
        tp.TripyException: if ``tensors`` is empty, or their dtypes, ranks or other dims differ.

    Example::

        import tripy as tp

        out = tp.concatenate([tp.ones((1, 2)), tp.zeros((2, 2))], dim=0)
        assert out.shape == (3, 2)
    """
    if not isinstance(tensors, (list, tuple)):
        _raise_here(f"concatenate takes a list or tuple of tensors, but got: {type(tensors).__name__}.")
    tensors = list(tensors)
    if not tensors:
        _raise_here("concatenate needs at least one tensor.")
    return make("concatenate", tensors, axis=_dim(dim))


def stack(tensors, dim=0):
    """
    Joins tensors of the same shape along a new dim.

    Args:
        tensors (Sequence[tp.Tensor]): The tensors, of one dtype and shape.
        dim (int): Where the new dim goes, in the result.

    Returns:
        tp.Tensor: a tensor with one more dim, of size ``len(tensors)``.

    Raises:
        tp.TripyException: if ``tensors`` is empty or their dtypes or shapes differ.

    Example::

        import tripy as tp

        assert tp.stack([tp.ones((2,)), tp.zeros((2,))]).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    """
    return concatenate([unsqueeze(t, dim) for t in tensors], dim)


def slice_dim(input, dim, start, stop, step=1):
    """``input`` restricted to ``start:stop:step`` along ``dim`` (already clamped)."""
    rank = input.rank
    starts, limits, steps = [0] * rank, [TO_END] * rank, [1] * rank
    starts[dim], limits[dim], steps[dim] = start, stop, step
    return make("slice", [input], starts=starts, limits=limits, steps=steps)


def split(input, num_split_or_sizes, dim=0):
    """
    Splits into ``num_split_or_sizes`` equal chunks (an int), or chunks of the given sizes (ints or
    ``tp.DimensionSize`` values). ``dim`` may be dynamic inside ``tp.compile``: a dynamic size that does
    not divide into equal chunks, or that the sizes do not add up to, is an error of the call.

    Args:
        input (tp.Tensor): The tensor to split.
        num_split_or_sizes (int | Sequence[int | tp.DimensionSize]): The number of equal chunks, or
            the size of each chunk.
        dim (int): The dim to split along.

    Returns:
        tp.Tensor | list[tp.Tensor]: the chunks in order (one tensor when there is one chunk).

    Raises:
        tp.TripyException: if the dim does not divide into equal chunks, or the sizes do not add up
            to it.

    Example::

        import tripy as tp

        a, b = tp.split(tp.arange(4), 2)
        assert (a.tolist(), b.tolist()) == ([0.0, 1.0], [2.0, 3.0])
    """
    if isinstance(num_split_or_sizes, bool) or not isinstance(num_split_or_sizes, numbers.Integral):
        sizes = _sizes(num_split_or_sizes, "the split sizes")
        return [make("split_part", [input], axis=_dim(dim), dims=[i], shape=sizes) for i in range(len(sizes))]
    n = operator.index(num_split_or_sizes)
    if n <= 0:  # checked here too: no part would carry the core's error
        _raise_here(f"split: the number of parts must be positive, but got {n}.")
    return [make("split_part", [input], axis=_dim(dim), dims=[i, n]) for i in range(n)]


def flip(input, dim=None):
    """
    Reverses the order of elements along ``dim`` (all dims when None); dims may be dynamic.

    Args:
        input (tp.Tensor): The tensor to flip.
        dim (int | Sequence[int] | None): The dims to reverse; every dim when None.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if a dim is out of range or repeated.

    Example::

        import tripy as tp

        assert tp.flip(tp.Tensor([1, 2, 3])).tolist() == [3, 2, 1]
    """
    dims = range(input.rank) if dim is None else _ints(dim, "dim")
    out = input
    for d in dims:
        out = make("flip", [out], axis=d)
    return out


def gather(input, dim, index):
    """
    Takes the slices of ``input`` at ``index`` (int32/int64) along ``dim``.

    Args:
        input (tp.Tensor): The tensor to read.
        dim (int): The dim that ``index`` selects along.
        index (tp.Tensor): int32 or int64 indices into ``dim`` (checked when the program runs).

    Returns:
        tp.Tensor: of ``input``'s dtype and shape ``input.shape[:dim] + index.shape + input.shape[dim + 1:]``.

    Raises:
        tp.TripyException: if ``index`` is not int32/int64, ``dim`` is out of range, or (when it
            runs) an index is out of bounds.

    Example::

        import tripy as tp

        out = tp.gather(tp.Tensor([[1, 2], [3, 4]]), 0, tp.Tensor([1]))
        assert out.tolist() == [[3, 4]]
    """
    return make("gather", [input, index], axis=_dim(dim))


def update_slice(input, dim, start, update):
    """
    ``input`` with ``update`` written at positions ``start .. start + update.shape[dim] - 1`` along
    ``dim``; the other dims of ``update`` are ``input``'s. ``start`` is an int, a
    ``tp.DimensionSize``, or an int32/int64 tensor holding one value (shape ``()`` or ``(1,)``),
    read when the program runs: a compiled decode step writes each new key/value row into its
    cache at a position that changes every call, with no new shape. A start that would write past
    the end of ``dim`` (or below 0) is an error of the call, and nothing is written.

    In ``tp.compile``, when ``input`` is a runtime input declared with
    ``tp.InputInfo(..., donate=True)`` and nothing else reads it, the update is done in place:
    only the new rows are written, and if the result is returned, the executable returns the
    caller's tensor itself (now holding the result). Otherwise the result is a new tensor.

    Args:
        input (tp.Tensor): The tensor to update.
        dim (int): The dimension the rows are counted along.
        start (int | tp.DimensionSize | tp.Tensor): Where the update's first row goes.
        update (tp.Tensor): The rows, of ``input``'s dtype and rank.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``update``'s dtype, rank or other dims differ from ``input``'s, or
            (when it runs) ``start`` would write outside ``dim``.

    Example::

        import tripy as tp

        cache = tp.zeros((4, 2))
        out = tp.update_slice(cache, 0, 1, tp.ones((2, 2)))
        assert out.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]

        # A KV-cache write compiled once for every position, in place in the donated cache:
        def write(cache, pos, row):
            return tp.update_slice(cache, 0, pos, row)

        exe = tp.compile(write, args=[tp.InputInfo((4, 2), tp.float32, donate=True),
                                      tp.InputInfo((1,), tp.int32), tp.InputInfo((1, 2), tp.float32)])
        cache = tp.zeros((4, 2))
        for pos in range(4):
            cache = exe(cache, tp.Tensor([pos], dtype=tp.int32), tp.full((1, 2), float(pos)))
        assert cache.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    """
    dim = _dim(dim)
    if not isinstance(start, Tensor):
        if isinstance(start, bool) or not isinstance(start, numbers.Integral):
            _raise_here(
                f"update_slice: start must be an int, a tp.DimensionSize or an int tensor, but got: {start!r}."
            )
        # int64 past int32's range, so that the bounds check, not the literal, reports a far start.
        wide = not -(2**31) <= start < 2**31
        start = literal(start, dtypes.int64 if wide else dtypes.int32, [], input._node.device)
    if not isinstance(update, Tensor):
        _raise_here(f"update_slice: update must be a tripy.Tensor, but got: {type(update).__name__}.")
    return make("update_slice", [input, update, start], axis=dim)


def outer(vec1, vec2):
    """
    The outer product of two vectors.

    Args:
        vec1 (tp.Tensor): A 1-D tensor of size ``m``.
        vec2 (tp.Tensor): A 1-D tensor of size ``n``, of ``vec1``'s dtype.

    Returns:
        tp.Tensor: the ``(m, n)`` tensor ``vec1[i] * vec2[j]``.

    Raises:
        tp.TripyException: if an operand is not 1-D or the dtypes differ.

    Example::

        import tripy as tp

        assert tp.outer(tp.Tensor([1.0, 2.0]), tp.Tensor([3.0, 4.0])).tolist() == [[3.0, 4.0], [6.0, 8.0]]
    """
    if getattr(vec1, "rank", None) != 1 or getattr(vec2, "rank", None) != 1:
        _raise_here("outer takes two 1-D tensors, but got ranks "
                    f"{getattr(vec1, 'rank', type(vec1).__name__)} and {getattr(vec2, 'rank', type(vec2).__name__)}.")
    return unsqueeze(vec1, 1) * unsqueeze(vec2, 0)

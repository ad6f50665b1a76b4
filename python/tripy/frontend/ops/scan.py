"""Ops that look along one dim: cumsum and topk, core ops (core/src/trace/ops_scan.cc) whose
scanned or searched dim may be dynamic inside ``tp.compile``."""

import numbers
import operator

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import _sizes
from tripy.frontend.trace_call import make


def _dim(dim, op):
    try:
        return operator.index(dim)
    except TypeError:
        _raise_here(f"{op}: expected dim to be an int, but got: {dim!r}.")


def _iota_on(input, shape, dim):
    """int32 positions along ``dim`` of ``shape``, on ``input``'s device."""
    return make("iota", [], shape=_sizes(shape, "a shape"), axis=dim, dtype="int32", device=input._node.device)


def cumsum(input, dim):
    """
    The running sum along ``dim``: ``out[..., i, ...] = sum(input[..., :i + 1, ...])``.

    It takes ceil(log2(n)) shifted additions for a dim of size n (O(n log n) work); a dynamic dim
    takes the rounds its largest size needs. float16 and bfloat16 are summed in float32. The
    dtype follows ``tp.sum``'s rule: int8 returns int64 (as numpy and torch do), so a running sum
    of int8s does not wrap; the other dtypes keep theirs.

    Args:
        input (tp.Tensor): The tensor to sum.
        dim (int): The dim to sum along (negative counts from the end).

    Returns:
        tp.Tensor: the running sums, of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not supported or ``dim`` is out of range.

    Example::

        import tripy as tp

        assert tp.cumsum(tp.Tensor([1, 2, 3, 4]), dim=0).tolist() == [1, 3, 6, 10]
        assert tp.cumsum(tp.Tensor([[1.0, 2.0], [3.0, 4.0]]), dim=0).tolist() == [[1.0, 2.0], [4.0, 6.0]]
    """
    return make("cumsum", [input], axis=_dim(dim, "cumsum"))


def topk(input, k, dim):
    """
    The ``k`` largest values along ``dim`` in descending order, and their int32 indices (ties go
    to the lower index, as a stable sort would). NaN counts as larger than every number, as in
    ``torch.topk``. ``dim`` may be dynamic inside ``tp.compile``: a size smaller than ``k`` is an
    error of the call.

    It runs ``k`` rounds, each a max and a min reduction over the whole tensor with the chosen
    elements masked out: O(k * n) work, so it suits small ``k``.

    Args:
        input (tp.Tensor): The tensor to search.
        k (int): How many values to keep (at most the size of ``dim``).
        dim (int): The dim to search along (negative counts from the end).

    Returns:
        tuple[tp.Tensor, tp.Tensor]: the values (``input``'s dtype) and their int32 indices, each of
        ``input``'s shape with ``k`` at ``dim``.

    Raises:
        tp.TripyException: if ``k`` is negative or larger than the dim, or ``dim`` is out of range.

    Example::

        import tripy as tp

        values, indices = tp.topk(tp.Tensor([[1.0, 5.0, 3.0, 4.0]]), 2, dim=1)
        assert values.tolist() == [[5.0, 4.0]]
        assert indices.tolist() == [[1, 3]]
    """
    dim = _dim(dim, "topk")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        size = input._node.shape[dim] if -input.rank <= dim < input.rank else "?"
        _raise_here(f"topk: k must be an int in [1, {size}] for dimension {dim} of size {size}, but got: {k!r}.")
    k = operator.index(k)
    return make("topk_values", [input], k=k, axis=dim), make("topk_indices", [input], k=k, axis=dim)

"""Collectives between the ranks of a sharded compile (``tp.compile(..., mesh=...)``): each is one
``collective`` kernel of the rank's program, which meets the other ranks' when it runs (in host
memory on the CPU, through NCCL on GPUs). Outside a sharded compile there is one rank, and each
collective is its input."""

import operator

from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import world_size
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make


def _tensor(x, op):
    if not isinstance(x, Tensor):
        _raise_here(f"{op} expects a tripy.Tensor, but got an object of type '{type(x).__name__}'.")


def _along(op, x, dim):
    """all_gather's and reduce_scatter's op over ``dim`` (checked), or ``x`` itself on one rank."""
    _tensor(x, op)
    try:
        dim = operator.index(dim)
    except TypeError:
        _raise_here(f"{op}: dim must be an int, but got {dim!r}.")
    if not -x.rank <= dim < x.rank:
        _raise_here(f"{op}: dim {dim} is out of range for a tensor of rank {x.rank}.")
    world = world_size()
    if world == 1:
        return x
    return make(op, [x], collective={"axis": dim, "world_size": world})


def all_reduce(x):
    """
    The sum of ``x`` over every rank of the sharded compile in progress: each rank gets the whole
    sum (float16 and bfloat16 summed in float32 on the CPU, rank 0's term first, so every rank
    holds the same values). A row-parallel layer's partial products go through it.
    Outside a sharded compile, ``x`` itself.

    Args:
        x (tp.Tensor): float32, float16, bfloat16, int32 or int64; the same shape on every rank.

    Returns:
        tp.Tensor: of ``x``'s shape and dtype.

    Raises:
        tp.TripyException: if ``x`` is not a tensor or has another dtype.

    Example::

        import tripy as tp

        assert tp.all_reduce(tp.Tensor([1.0, 2.0])).tolist() == [1.0, 2.0]  # one rank
    """
    _tensor(x, "all_reduce")
    world = world_size()
    if world == 1:
        return x
    return make("all_reduce", [x], collective={"world_size": world})


def all_gather(x, dim):
    """
    Every rank's ``x`` joined along ``dim`` in rank order, on every rank of the sharded compile in
    progress: dim ``dim`` of the result is ``tp.world_size()`` times ``x``'s. A column-parallel
    layer's shares of its output go through it. Outside a sharded compile, ``x`` itself.

    Args:
        x (tp.Tensor): The rank's share; the same shape on every rank.
        dim (int): The dim to join along (negative counts from the end).

    Returns:
        tp.Tensor: of ``x``'s dtype.

    Raises:
        tp.TripyException: if ``x`` is not a tensor, or ``dim`` is out of range.

    Example::

        import tripy as tp

        assert tp.all_gather(tp.Tensor([[1.0, 2.0]]), dim=-1).shape == (1, 2)  # one rank
    """
    return _along("all_gather", x, dim)


def reduce_scatter(x, dim):
    """
    This rank's share of the sum of ``x`` over every rank of the sharded compile in progress: the
    sum split along ``dim`` into ``tp.world_size()`` equal parts, rank ``r`` getting the ``r``-th
    (float16 and bfloat16 summed in float32 on the CPU). It is ``tp.all_reduce`` followed by each
    rank's slice, in one collective that moves a ``world_size``-th of the data to each rank: a
    row-parallel layer's partial products, for example, summed straight into shares of a
    sequence (``tp.all_gather`` joins them again). Outside a sharded compile, ``x`` itself.

    Args:
        x (tp.Tensor): float32, float16, bfloat16, int32 or int64; the same shape on every rank.
        dim (int): The dim to split (negative counts from the end); its size must be a multiple of
            the world size.

    Returns:
        tp.Tensor: of ``x``'s dtype; dim ``dim`` is ``tp.world_size()`` times smaller.

    Raises:
        tp.TripyException: if ``x`` is not a tensor or has another dtype, ``dim`` is out of range,
            or its size is not a multiple of the world size.

    Example::

        import tripy as tp

        assert tp.reduce_scatter(tp.Tensor([[1.0, 2.0]]), dim=-1).shape == (1, 2)  # one rank
    """
    return _along("reduce_scatter", x, dim)

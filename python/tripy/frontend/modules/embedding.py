"""``tp.Embedding``: looks up rows of a table by integer index."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import ColumnParallel, RankShares, check_parallel, current_rank, world_size
from tripy.frontend.module import Module, _remember_parameters
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.ops.collectives import all_gather, all_reduce
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.shape_ops import gather, unsqueeze


class Embedding(Module):
    """
    Maps each integer index in its input to a row of ``weight`` (shape
    ``(num_embeddings, embedding_dim)``); the output has the input's shape plus ``embedding_dim``.

    With ``parallel`` the table is sharded when compiled with a ``tp.DeviceMesh``:
    ``tp.ColumnParallel(gather_output=True)`` gives each rank its share of the embedding dim and
    all-gathers the rows (an index out of range is still an error); ``tp.RowParallel()`` gives each
    rank its share of the rows (the vocabulary), zero for the indices outside it, and sums the
    ranks' rows with an all-reduce (an index outside every rank's rows gives zeros, not an error).
    Outside a sharded compile the table is whole. ``load_share`` holds only the shares of this
    process's ranks instead (the whole table never loaded); such a table runs only sharded.

    Args:
        num_embeddings (int): The number of rows (the largest index plus one).
        embedding_dim (int): The size of each row.
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        parallel (tp.ColumnParallel | tp.RowParallel | None): How a sharded compile splits the
            table; None: every rank holds it whole.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype or ``parallel`` is not a sharding spec
            (a tp.ColumnParallel with one part).

    Example::

        import tripy as tp

        embedding = tp.Embedding(num_embeddings=4, embedding_dim=2)
        out = embedding(tp.Tensor([3, 0]))
        assert tp.equal(out, tp.Tensor([[6.0, 7.0], [0.0, 1.0]]))
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=dtypes.float32, parallel=None):
        super().__init__()
        for what, n in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                _raise_here(f"Embedding's {what} must be a non-negative int, but got: {n!r}.")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.dtype = dtypes.check_dtype(dtype)
        self.weight = placeholder((num_embeddings, embedding_dim), self.dtype)
        self.parallel = check_parallel(parallel, "Embedding")
        if isinstance(parallel, ColumnParallel):
            if parallel.parts is not None and len(parallel.parts) > 1:
                _raise_here("A column-parallel Embedding splits its embedding dim as one part.")
            parallel._check(embedding_dim, "Embedding")
        self.shares = None  # a tp.RankShares once load_share has been called

    def share_range(self, rank, world):
        """
        Where rank ``rank``'s share of the table lies in the whole.

        Args:
            rank (int): The rank, from 0.
            world (int): The number of ranks.

        Returns:
            tuple[int, int, int]: ``(dim, start, stop)``: dim 1 for a column-parallel table (its
            embedding dim), dim 0 for a row-parallel one (its rows).

        Raises:
            tp.TripyException: if the dim does not split evenly over ``world`` ranks.
        """
        if isinstance(self.parallel, ColumnParallel):
            ((lo, hi),) = self.parallel._ranges(self.embedding_dim, rank, world, "Embedding")
            return 1, lo, hi
        return (0, *self.parallel._range(self.num_embeddings, rank, world, "Embedding"))

    def load_share(self, rank, world, weight):
        """
        Holds ``weight`` as rank ``rank``'s share of this sharded table over ``world`` ranks (the
        ``share_range`` of the whole); the whole table is dropped, and the layer then runs only in a
        compile over ``world`` ranks.

        Args:
            rank (int): The rank whose share ``weight`` is, from 0.
            world (int): The number of ranks.
            weight (tp.Tensor): The share of the table.

        Raises:
            tp.TripyException: if the table is not sharded or ``weight`` is not the share's shape.
        """
        if self.parallel is None:
            _raise_here("load_share needs a sharded Embedding (parallel=tp.ColumnParallel(...) or tp.RowParallel()).")
        dim, lo, hi = self.share_range(rank, world)
        want = [self.num_embeddings, self.embedding_dim]
        want[dim] = hi - lo
        if tuple(weight.shape) != tuple(want):
            _raise_here(f"Rank {rank} of {world}'s share of this Embedding has shape {tuple(want)}, but got {tuple(weight.shape)}.")
        if self.shares is None or self.shares.world != world:
            self.shares = RankShares(world)
        _remember_parameters(weight)
        self.shares.set(rank, {"weight": weight})
        object.__setattr__(self, "weight", None)

    def forward(self, x):
        """
        Looks up the rows of ``weight`` that ``x`` indexes.

        Args:
            x (tp.Tensor): int32 or int64 indices in ``[0, num_embeddings)``.

        Returns:
            tp.Tensor: of shape ``x.shape + (embedding_dim,)``, of the module's dtype.

        Raises:
            tp.TripyException: if ``x`` is not int32/int64, or (when it runs) an index is out of range.
        """
        world = world_size()
        if self.shares is None and (self.parallel is None or world == 1):
            return gather(self.weight, 0, x)
        rank = current_rank()
        dim, lo, hi = self.share_range(rank, world)
        if self.shares is not None:  # this rank's share, loaded as it is
            table = self.shares.of(rank, world, "Embedding")["weight"]
        else:
            table = self.weight[:, lo:hi] if dim == 1 else self.weight[lo:hi]
        if isinstance(self.parallel, ColumnParallel):
            rows = gather(table, 0, x)
            return all_gather(rows, dim=-1) if self.parallel.gather_output else rows
        mine = (x >= lo) & (x < hi)
        rows = gather(table, 0, where(mine, x - lo, 0))
        return all_reduce(where(unsqueeze(mine, -1), rows, 0.0))

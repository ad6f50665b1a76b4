"""``tp.Embedding``: looks up rows of a table by integer index."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.ops.shape_ops import gather


class Embedding(Module):
    """
    Maps each integer index in its input to a row of ``weight`` (shape
    ``(num_embeddings, embedding_dim)``); the output has the input's shape plus ``embedding_dim``.
   

    Args:
        num_embeddings (int): The number of rows (the largest index plus one).
        embedding_dim (int): The size of each row.
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        embedding = tp.Embedding(num_embeddings=4, embedding_dim=2)
        out = embedding(tp.Tensor([3, 0]))
        assert tp.equal(out, tp.Tensor([[6.0, 7.0], [0.0, 1.0]]))
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=dtypes.float32):
        super().__init__()
        for what, n in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                _raise_here(f"Embedding's {what} must be a non-negative int, but got: {n!r}.")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.dtype = dtypes.check_dtype(dtype)
        self.weight = placeholder((num_embeddings, embedding_dim), self.dtype)

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
        return gather(self.weight, 0, x)

"""Scaled dot-product attention: one Trace op (``scaled_dot_product_attention`` in
core/src/trace/ops_attention.cc) that every backend runs as one fused kernel, so the (L, S) scores
never exist in memory."""

import math

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.elementwise import rsqrt, where
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import full_on
from tripy.frontend.ops.reduce import softmax
from tripy.frontend.ops.scan import _iota_on
from tripy.frontend.ops.shape_ops import transpose
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make


def scaled_dot_product_attention(query, key, value, embedding_dim=None, attn_mask=None, is_causal=False):
    """
    ``softmax(query @ key^T / sqrt(embedding_dim) + mask) @ value`` over queries of shape
    ``(..., Hq, L, D)`` and keys and values of shapes ``(..., Hkv, S, D)`` and ``(..., Hkv, S, Dv)``.

    Key/value heads may be fewer than query heads (grouped-query attention): ``Hkv`` must divide
    ``Hq``, and query head ``h`` attends with key/value head ``h // (Hq // Hkv)``.

    Args:
        query (tp.Tensor): The queries, a float tensor of rank >= 2.
        key (tp.Tensor): The keys, of the query's dtype and rank.
        value (tp.Tensor): The values, of the query's dtype and rank.
        embedding_dim (int | None): Scales the scores by ``1 / sqrt(embedding_dim)``; defaults to the head size ``D``.
        attn_mask (tp.Tensor | None): A bool tensor (True keeps a score) or a tensor of the query's dtype added to the
            scores; it broadcasts to ``(..., Hq, L, S)``.
        is_causal (bool): Query ``i`` sees keys ``0..i`` only (top-left aligned when ``L != S``, as in torch).

    Returns:
        tp.Tensor: a tensor of shape ``(..., Hq, L, Dv)``. A query whose keys are all masked gives NaN.

    Raises:
        tp.TripyException: if the dtypes differ or are not float, the ranks or head sizes do not
            match, ``Hkv`` does not divide ``Hq``, or the mask does not broadcast.

    Example::

        import tripy as tp

        q = tp.ones((1, 2, 4))
        v = tp.Tensor([[[1.0, 2.0], [3.0, 4.0]]])
        out = tp.scaled_dot_product_attention(q, q, v, is_causal=True)
        assert tp.allclose(out, tp.Tensor([[[1.0, 2.0], [2.0, 3.0]]]))
    """
    if isinstance(embedding_dim, Tensor):
        _raise_here(
            "scaled_dot_product_attention: embedding_dim must be an int, but got a tensor; "
            "pass a mask by keyword: attn_mask=..."
        )
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.rank < 2:
            _raise_here(f"scaled_dot_product_attention: {name} must have rank >= 2 (..., seq, dim), but has rank {t.rank}.")
    if not issubclass(query.dtype, dtypes.floating):
        _raise_here(f"scaled_dot_product_attention: expected float tensors, but query has dtype {query.dtype.name}.")
    if embedding_dim is not None and (not isinstance(embedding_dim, int) or embedding_dim <= 0):
        _raise_here(f"scaled_dot_product_attention: embedding_dim must be a positive int, but is {embedding_dim!r}.")
    head_dim = embedding_dim if embedding_dim is not None else query.shape[-1]
    if not isinstance(head_dim, int):
        # A head size known only at run time: the scale is data, so compose the op from primitives.
        return _composite_attention(query, key, value, attn_mask, is_causal)
    inputs = [query, key, value] + ([attn_mask] if attn_mask is not None else [])
    return make("scaled_dot_product_attention", inputs, scale=1.0 / math.sqrt(head_dim), causal=bool(is_causal))


def _composite_attention(query, key, value, attn_mask, is_causal):
    scale = rsqrt(cast(query.shape[-1], query.dtype))
    scores = matmul(query, transpose(key, -1, -2)) * scale
    lowest = full_on(scores, [], float("-inf"))
    if is_causal:
        rows, cols = (_iota_on(scores, [scores.shape[-2], scores.shape[-1]], d) for d in (0, 1))
        scores = where(cols <= rows, scores, lowest)
    if attn_mask is not None:
        scores = where(attn_mask, scores, lowest) if attn_mask.dtype == dtypes.bool else scores + attn_mask
    return matmul(softmax(scores, -1), value)

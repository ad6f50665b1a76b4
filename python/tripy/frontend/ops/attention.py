"""Scaled dot-product attention as a composite: two matmuls around a masked row softmax, which the
compiler fuses (and a backend may claim as one attention kernel)."""

import math

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import rsqrt, where
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.pad import full_on
from tripy.frontend.ops.reduce import softmax
from tripy.frontend.ops.scan import _iota_on
from tripy.frontend.ops.shape_ops import transpose
from tripy.frontend.trace_call import _raise_here


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False):
    """
    ``softmax(query @ key^T / sqrt(d) + mask) @ value`` over ``(..., L, d)`` queries and
    ``(..., S, d)`` keys and values.

    ``attn_mask`` is a bool tensor (True keeps a score) or a float tensor added to the scores; it
    broadcasts to ``(..., L, S)``. ``is_causal`` lets query ``i`` see keys ``0..i`` only.

    Example::

        import tripy as tp

        q = tp.ones((1, 2, 4))
        v = tp.Tensor([[[1.0, 2.0], [3.0, 4.0]]])
        out = tp.scaled_dot_product_attention(q, q, v, is_causal=True)
        assert tp.allclose(out, tp.Tensor([[[1.0, 2.0], [2.0, 3.0]]]))
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.rank < 2:
            _raise_here(f"scaled_dot_product_attention: {name} must have rank >= 2 (..., seq, dim), but has rank {t.rank}.")
    if not issubclass(query.dtype, dtypes.floating):
        _raise_here(f"scaled_dot_product_attention: expected float tensors, but query has dtype {query.dtype.name}.")
    head_dim = query.shape[-1]
    scale = 1.0 / math.sqrt(head_dim) if isinstance(head_dim, int) else rsqrt(cast(head_dim, query.dtype))
    scores = matmul(query, transpose(key, -1, -2)) * scale
    lowest = full_on(scores, [], float("-inf"))
    if is_causal:
        # Query i sees keys 0..i: the lower triangle of an (L, S) mask built from iota.
        rows, cols = (_iota_on(scores, [scores.shape[-2], scores.shape[-1]], d) for d in (0, 1))
        scores = where(cols <= rows, scores, lowest)
    if attn_mask is not None:
        if attn_mask.dtype == dtypes.bool:
            scores = where(attn_mask, scores, lowest)
        else:
            scores = scores + attn_mask
    return matmul(softmax(scores, -1), value)


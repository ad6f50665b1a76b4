"""Quantization: scale, round and saturate into int8/int4/float8, and back. Scales are per tensor
(a scalar), per channel along ``dim`` (1-D) or, for int4, block-wise (2-D); a number or a list is
accepted where a scale tensor is. Both are core ops (core/src/trace/ops_quantize.cc)."""

import operator

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make


def _scale_tensor(scale, dtype):
    """A scale given as a number or a (nested) list becomes a tensor of the float dtype it scales."""
    if isinstance(scale, Tensor):
        return scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float, list, tuple)):
        _raise_here(f"A scale must be a tensor, a number or a list of numbers, but got: {scale!r}.")
    return Tensor(scale, dtype=dtype)


def _dims(dim):
    if dim is None:
        return []
    try:
        return [operator.index(dim)]
    except TypeError:
        _raise_here(f"Expected dim to be an int or None, but got: {dim!r}.")


def quantize(input, scale, dtype, dim=None):
    """
    ``saturate(round(input / scale))`` in ``dtype`` (int8, int4 or float8). ``scale`` (a tensor, a
    number or a list) is a scalar for one scale per tensor; 1-D along ``dim`` for one per channel;
    or, for int4 without ``dim``, 2-D of shape ``[D0 / block, D1]`` over a ``[D0, D1]`` input, each
    scale row covering ``block`` consecutive input rows.

    Args:
        input (tp.Tensor): The tensor to convert.
        scale (tp.Tensor | number | Sequence[float]): The scale: a scalar, 1-D along ``dim``, or
            (int4 without ``dim``) 2-D block-wise.
        dtype (tp.dtype): The dtype of the result.
        dim (int | None): The dim that a 1-D ``scale`` runs along; None for the other forms.

    Returns:
        tp.Tensor: ``input`` quantized to ``dtype`` (int8, int4 or float8).

    Raises:
        tp.TripyException: if ``dtype`` is not a quantized dtype, ``input`` is not a float tensor of
            ``scale``'s dtype, or ``scale``'s shape does not fit ``input`` and ``dim``.

    Example::

        import tripy as tp

        q = tp.quantize(tp.Tensor([0.5, 1.0, 100.0]), 0.01, tp.int8)
        assert q.tolist() == [50, 100, 127]
        per_row = tp.quantize(tp.Tensor([[1.0, 2.0], [3.0, 4.0]]), [1.0, 0.5], tp.int8, dim=0)
        assert per_row.tolist() == [[1, 2], [6, 8]]
        blocks = tp.quantize(tp.Tensor([[0.0, 1.0], [2.0, 3.0]]), [[1.0, 1.0]], tp.int4)
        assert tp.dequantize(blocks, [[1.0, 1.0]], tp.float32).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    """
    dtypes.check_dtype(dtype)
    scale = _scale_tensor(scale, input.dtype)
    return make("quantize", [input, scale], dtype=dtype.name, dims=_dims(dim))


def dequantize(input, scale, dtype, dim=None):
    """
    ``input * scale`` in the float ``dtype``; the inverse of ``quantize``, with the same forms of
    ``scale``.

    Args:
        input (tp.Tensor): The tensor to convert.
        scale (tp.Tensor | number | Sequence[float]): The scale: a scalar, 1-D along ``dim``, or
            (int4 without ``dim``) 2-D block-wise.
        dtype (tp.dtype): The dtype of the result.
        dim (int | None): The dim that a 1-D ``scale`` runs along; None for the other forms.

    Returns:
        tp.Tensor: ``input * scale`` in the float ``dtype``.

    Raises:
        tp.TripyException: if ``input`` is not int8, int4 or float8, ``dtype`` is not ``scale``'s
            float dtype, or ``scale``'s shape does not fit ``input`` and ``dim``.

    Example::

        import tripy as tp

        q = tp.Tensor([50, 100], dtype=tp.int8)
        assert tp.allclose(tp.dequantize(q, tp.Tensor(0.01), tp.float32), tp.Tensor([0.5, 1.0]))
    """
    dtypes.check_dtype(dtype)
    scale = _scale_tensor(scale, dtype)
    return make("dequantize", [input, scale], dtype=dtype.name, dims=_dims(dim))

"""Quantization: scale, round and saturate into int8/int4/float8, and back. Scales are per tensor
(a scalar), per channel along ``dim`` (1-D) or, for int4, block-wise (2-D); an optional zero point
has the scale's form; a number or a list is accepted where a scale tensor is. Both are core ops
(core/src/trace/ops_quantize.cc).

``pack_int4`` and ``unpack_int4`` hold int4 values two a byte: a model keeps its int4 weights as
``unpack_int4`` of packed bytes, which ``tp.compile`` reads in place (every executable shares the
bytes, and the weight-only product takes them as they are)."""

import operator

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import concatenate, reshape
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


def quantize(input, scale, dtype, dim=None, zero_point=None):
    """
    ``saturate(round(input / scale + zero_point))`` in ``dtype`` (int8, int4 or float8). ``scale``
    (a tensor, a number or a list) is a scalar for one scale per tensor; 1-D along ``dim`` for one
    per channel; or, for int4 without ``dim``, 2-D over a ``[D0, D1]`` input: ``[D0 / block, D1]``,
    each scale row covering ``block`` consecutive input rows, or ``[D0, D1 / block]``, each scale
    column covering ``block`` consecutive input columns (the groups of a weight-only int4 linear
    layer's inputs). ``zero_point`` (none: 0) has the scale's form and dtype.

    Args:
        input (tp.Tensor): The tensor to convert.
        scale (tp.Tensor | number | Sequence[float]): The scale: a scalar, 1-D along ``dim``, or
            (int4 without ``dim``) 2-D block-wise.
        dtype (tp.dtype): The dtype of the result.
        dim (int | None): The dim that a 1-D ``scale`` runs along; None for the other forms.
        zero_point (tp.Tensor | number | Sequence[float] | None): Added before rounding, in the
            scale's form and dtype; None for 0.

    Returns:
        tp.Tensor: ``input`` quantized to ``dtype`` (int8, int4 or float8).

    Raises:
        tp.TripyException: if ``dtype`` is not a quantized dtype, ``input`` is not a float tensor of
            ``scale``'s dtype, or ``scale``'s (or ``zero_point``'s) shape does not fit ``input`` and
            ``dim``.

    Example::

        import tripy as tp

        q = tp.quantize(tp.Tensor([0.5, 1.0, 100.0]), 0.01, tp.int8)
        assert q.tolist() == [50, 100, 127]
        per_row = tp.quantize(tp.Tensor([[1.0, 2.0], [3.0, 4.0]]), [1.0, 0.5], tp.int8, dim=0)
        assert per_row.tolist() == [[1, 2], [6, 8]]
        blocks = tp.quantize(tp.Tensor([[0.0, 1.0], [2.0, 3.0]]), [[1.0, 1.0]], tp.int4)
        assert tp.dequantize(blocks, [[1.0, 1.0]], tp.float32).tolist() == [[0.0, 1.0], [2.0, 3.0]]
        groups = tp.quantize(tp.Tensor([[0.0, 1.0, 8.0, 12.0]]), [[1.0, 2.0]], tp.int4, zero_point=[[0.0, -4.0]])
        assert groups.tolist() == [[0, 1, 0, 2]]
    """
    dtypes.check_dtype(dtype)
    scale = _scale_tensor(scale, input.dtype)
    inputs = [input, scale] + ([] if zero_point is None else [_scale_tensor(zero_point, input.dtype)])
    return make("quantize", inputs, dtype=dtype.name, dims=_dims(dim))


def dequantize(input, scale, dtype, dim=None, zero_point=None):
    """
    ``(input - zero_point) * scale`` in the float ``dtype``; the inverse of ``quantize``, with the
    same forms of ``scale`` and ``zero_point``. A matrix product of a float tensor with the
    dequantized constant int8 or int4 weight (``x @ transpose(dequantize(w, ...))`` as
    ``tp.Linear`` computes it, or ``x @ dequantize(w, ...)``) reads the weight packed and
    dequantizes it inside the product's kernel, where its scales (and zero points) are per tensor,
    per output channel or per group of the input features (on the GPU for up to 32 rows of ``x``).

    Args:
        input (tp.Tensor): The tensor to convert.
        scale (tp.Tensor | number | Sequence[float]): The scale: a scalar, 1-D along ``dim``, or
            (int4 without ``dim``) 2-D block-wise.
        dtype (tp.dtype): The dtype of the result.
        dim (int | None): The dim that a 1-D ``scale`` runs along; None for the other forms.
        zero_point (tp.Tensor | number | Sequence[float] | None): Subtracted before scaling, in the
            scale's form and dtype; None for 0.

    Returns:
        tp.Tensor: ``(input - zero_point) * scale`` in the float ``dtype``.

    Raises:
        tp.TripyException: if ``input`` is not int8, int4 or float8, ``dtype`` is not ``scale``'s
            float dtype, or ``scale``'s (or ``zero_point``'s) shape does not fit ``input`` and
            ``dim``.

    Example::

        import tripy as tp

        q = tp.Tensor([50, 100], dtype=tp.int8)
        assert tp.allclose(tp.dequantize(q, tp.Tensor(0.01), tp.float32), tp.Tensor([0.5, 1.0]))
        w = tp.Tensor([[1, 2, 3, 4]], dtype=tp.int8)
        groups = tp.dequantize(tp.cast(w, tp.int4), [[1.0, 0.5]], tp.float32, zero_point=[[1.0, -2.0]])
        assert groups.tolist() == [[0.0, 1.0, 2.5, 3.0]]
    """
    dtypes.check_dtype(dtype)
    scale = _scale_tensor(scale, dtype)
    inputs = [input, scale] + ([] if zero_point is None else [_scale_tensor(zero_point, dtype)])
    return make("dequantize", inputs, dtype=dtype.name, dims=_dims(dim))


def pack_int4(input):
    """
    The int4 values of ``input`` two a byte along its last dim: int8 of shape ``[..., ceil(K / 2)]``
    for an int4 ``input`` ``[..., K]``, value ``k`` even in the low nibble and ``k + 1`` in the high
    one, each nibble holding the value plus 8 (the weight-only product's layout). ``unpack_int4``
    reads them back. The shape must be static.

    Args:
        input (tp.Tensor): int4 values, last dim ``K``.

    Returns:
        tp.Tensor: int8 bytes of shape ``[..., ceil(K / 2)]``.

    Example::

        import tripy as tp
        from tripy.frontend.ops.quantize import pack_int4, unpack_int4

        q = tp.cast(tp.Tensor([[-8, 7, 0]]), tp.int4)
        packed = pack_int4(q)  # (-8 + 8) | (7 + 8) << 4, then (0 + 8) and a zero padding nibble
        assert packed.tolist() == [[-16, 8]]
        assert tp.cast(unpack_int4(packed, 3), tp.int32).tolist() == [[-8, 7, 0]]
    """
    if input.dtype != dtypes.int4:
        _raise_here(f"pack_int4 takes an int4 tensor, but got one of dtype {input.dtype.name}.")
    shape = tuple(input.shape)
    if not shape or not all(isinstance(d, int) for d in shape):
        _raise_here(f"pack_int4 needs a static shape of rank >= 1, but got {shape}.")
    lead, K = shape[:-1], shape[-1]
    v = cast(input, dtypes.int32) + 8  # the nibbles, 0 to 15
    if K % 2:
        v = concatenate([v, full(lead + (1,), 0, dtypes.int32)], dim=-1)  # a zero padding nibble
    pairs = reshape(v, lead + ((K + 1) // 2, 2))
    byte = pairs[..., 0] + 16 * pairs[..., 1]
    return cast(where(byte >= 128, byte - 256, byte), dtypes.int8)


def unpack_int4(packed, size):
    """
    The int4 tensor ``[..., size]`` whose values ``packed`` (int8 ``[..., ceil(size / 2)]``, as
    ``pack_int4`` writes them) holds two a byte. The result is a view: it stays an op over the
    packed bytes, which ``tp.compile`` reads in place (a model holding its weights this way keeps
    them packed once for every executable; a ``tp.Linear`` whose int4 weight is such a view reads
    the bytes in its weight-only product). Evaluating it (``tolist``, ``eval``) makes a copy of
    one byte per value.

    Args:
        packed (tp.Tensor): int8 bytes, last dim ``ceil(size / 2)`` (static).
        size (int): The last dim of the result.

    Returns:
        tp.Tensor: int4 of shape ``[..., size]``.

    Raises:
        tp.TripyException: if ``packed`` is not int8 or its last dim is not ``ceil(size / 2)``.

    Example::

        import tripy as tp
        from tripy.frontend.ops.quantize import unpack_int4

        q = unpack_int4(tp.Tensor([[-16, 8]], dtype=tp.int8), 3)
        assert q.dtype == tp.int4 and tp.cast(q, tp.int32).tolist() == [[-8, 7, 0]]
    """
    try:
        size = operator.index(size)
    except TypeError:
        _raise_here(f"unpack_int4's size must be an int, but got: {size!r}.")
    shape = list(packed.shape)
    return make("unpack_int4", [packed], shape=shape[:-1] + [size])

"""Quantization: scale, round and saturate into int8/int4/float8, and back. Scales are per tensor
(a scalar), per channel along ``dim`` (1-D) or, for int4, block-wise (2-D); a number or a list is
accepted where a scale tensor is."""

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import clamp, round
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import reshape
from tripy.frontend.trace_call import _raise_here

# The representable range each quantized dtype saturates to.
_RANGE = {"int8": (-128, 127), "int4": (-8, 7), "float8": (-448.0, 448.0)}


def _scale_tensor(scale, dtype):
    """A scale given as a number or a (nested) list becomes a tensor of the float dtype it scales."""
    from tripy.frontend.tensor import Tensor

    if isinstance(scale, Tensor):
        return scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float, list, tuple)):
        _raise_here(f"A scale must be a tensor, a number or a list of numbers, but got: {scale!r}.")
    return Tensor(scale, dtype=dtype)


def _aligned_scale(input, scale, dim, dtype=None):
    """``scale`` shaped to broadcast over ``input``: per tensor (a scalar), per channel along ``dim``
    (1-D), or block-wise for int4 (2-D, ``[D0 / block, D1]`` over a ``[D0, D1]`` input)."""
    if dim is not None and not -input.rank <= dim < input.rank:
        _raise_here(f"dim {dim} is out of range for a tensor of rank {input.rank}.")
    if dim is None:
        if scale.rank == 2:
            return _block_scale(input, scale, dtype)
        if scale.rank != 0:
            _raise_here(
                f"A per-tensor scale must be a scalar, but it has shape {scale.shape}; pass dim for per-channel "
                "scales, or a 2-D scale for block-wise int4."
            )
        return scale
    if scale.rank != 1:
        _raise_here(f"A per-channel scale must be 1-D, but it has shape {scale.shape}.")
    dim %= input.rank
    return reshape(scale, [scale.shape[0] if d == dim else 1 for d in range(input.rank)])


def _block_scale(input, scale, dtype):
    from tripy.frontend.ops.shape_ops import expand

    if dtype is not None and dtype.name != "int4":
        _raise_here(f"Block-wise (2-D) scales are for int4 only, but the quantized dtype is {dtype.name}.")
    if input.rank != 2:
        _raise_here(f"Block-wise quantization needs a 2-D input, but it has shape {input.shape}.")
    rows, cols = input.shape
    blocks, scale_cols = scale.shape
    static = all(isinstance(v, int) for v in (rows, cols, blocks, scale_cols))
    if static and (rows % blocks or scale_cols != cols):
        _raise_here(
            f"A block-wise scale of shape {scale.shape} does not fit an input of shape {input.shape}: its first "
            "dimension must divide the input's first and its second must equal the input's second."
        )
    # Row i uses scale row i // (rows / blocks): repeat each scale row over its block.
    per_block = reshape(scale, (blocks, 1, scale_cols))
    return reshape(expand(per_block, (blocks, rows // blocks, scale_cols)), (rows, cols))


def quantize(input, scale, dtype, dim=None):
    """
    ``saturate(round(input / scale))`` in ``dtype`` (int8, int4 or float8). ``scale`` (a tensor, a
    number or a list) is a scalar for one scale per tensor; 1-D along ``dim`` for one per channel;
    or, for int4 without ``dim``, 2-D of shape ``[D0 / block, D1]`` over a ``[D0, D1]`` input, each
    scale row covering ``block`` consecutive input rows.

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
    if dtype.name not in _RANGE:
        _raise_here(f"quantize supports int8, int4 and float8, not {dtype.name}.")
    if not issubclass(input.dtype, dtypes.floating):
        _raise_here(f"quantize takes a floating-point tensor, but got one of dtype {input.dtype.name}.")
    lo, hi = _RANGE[dtype.name]
    scale = _scale_tensor(scale, input.dtype)
    scaled = input / _aligned_scale(input, scale, dim, dtype)
    if dtype.name != "float8":
        scaled = round(scaled)
    return cast(clamp(scaled, float(lo), float(hi)), dtype)


def dequantize(input, scale, dtype, dim=None):
    """
    ``input * scale`` in the float ``dtype``; the inverse of ``quantize``, with the same forms of
    ``scale``.

    Example::

        import tripy as tp

        q = tp.Tensor([50, 100], dtype=tp.int8)
        assert tp.allclose(tp.dequantize(q, tp.Tensor(0.01), tp.float32), tp.Tensor([0.5, 1.0]))
    """
    dtypes.check_dtype(dtype)
    if input.dtype.name not in _RANGE:
        _raise_here(f"dequantize takes an int8, int4 or float8 tensor, but got one of dtype {input.dtype.name}.")
    if not issubclass(dtype, dtypes.floating):
        _raise_here(f"dequantize returns a floating-point dtype, not {dtype.name}.")
    scale = _scale_tensor(scale, dtype)
    return cast(input, dtype) * _aligned_scale(input, scale, dim, input.dtype)

"""Quantization: scale, round and saturate into int8/int4/float8, and back. Scales are per tensor
(a scalar) or per channel along ``dim``."""

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import clamp, round
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import reshape
from tripy.frontend.trace_call import _raise_here

# The representable range each quantized dtype saturates to.
_RANGE = {"int8": (-128, 127), "int4": (-8, 7), "float8": (-448.0, 448.0)}


def _aligned_scale(input, scale, dim, float_dtype):
    from tripy.frontend.tensor import Tensor

    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        scale = Tensor(float(scale), dtype=float_dtype)
    if not isinstance(scale, Tensor):
        _raise_here(f"A scale must be a tripy.Tensor or a number, but got: {type(scale).__name__}.")
    if dim is not None and not -input.rank <= dim < input.rank:
        _raise_here(f"dim {dim} is out of range for a tensor of rank {input.rank}.")
    if dim is None:
        if scale.rank != 0:
            _raise_here(f"A per-tensor scale must be a scalar, but it has shape {scale.shape}; pass dim for per-channel scales.")
        return scale
    if scale.rank != 1:
        _raise_here(f"A per-channel scale must be 1-D, but it has shape {scale.shape}.")
    dim %= input.rank
    return reshape(scale, [scale.shape[0] if d == dim else 1 for d in range(input.rank)])


def quantize(input, scale, dtype, dim=None):
    """
    ``saturate(round(input / scale))`` in ``dtype`` (int8, int4 or float8); ``scale`` is a scalar,
    or 1-D along ``dim``.

    Example::

        import tripy as tp

        q = tp.quantize(tp.Tensor([0.5, 1.0, 100.0]), tp.Tensor(0.01), tp.int8)
        assert q.tolist() == [50, 100, 127]
    """
    dtypes.check_dtype(dtype)
    if dtype.name not in _RANGE:
        _raise_here(f"quantize supports int8, int4 and float8, not {dtype.name}.")
    if not issubclass(input.dtype, dtypes.floating):
        _raise_here(f"quantize takes a floating-point tensor, but got one of dtype {input.dtype.name}.")
    lo, hi = _RANGE[dtype.name]
    scaled = input / _aligned_scale(input, scale, dim, input.dtype)
    if dtype.name != "float8":
        scaled = round(scaled)
    return cast(clamp(scaled, float(lo), float(hi)), dtype)


def dequantize(input, scale, dtype, dim=None):
    """
    ``input * scale`` in the float ``dtype``; the inverse of ``quantize``.

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
    return cast(input, dtype) * _aligned_scale(input, scale, dim, dtype)

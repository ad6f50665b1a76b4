"""ONNX's QuantizeLinear and DequantizeLinear (the Q/DQ pairs of quantized exports) as Tripy ops,
for the quantized dtypes Tripy has (int8, int32 for dequantizing, float8 e4m3): per tensor or per
axis. Their rows join the converter table in ``converters.py``."""

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import maximum, minimum, round
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import reshape
from tripy.onnx.graph import _as_dtype_of, _axis, _elem_name, dtype_of
from tripy.onnx.rows import Row, checks

_INT8, _FLOAT8E4M3FN = 3, 17
_RANGES = {dtypes.int8: (-128.0, 127.0)}


def _along(t, axis, rank):
    """A per-axis scale or zero point shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    if t.rank == 0 or rank == 0:
        return t
    return reshape(t, [-1 if d == axis else 1 for d in range(rank)])


def _quantize(ctx, n):
    x, scale = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    zero = ctx.opt_tensor(n, 2)
    to = zero.dtype if zero is not None else dtype_of(n.attr("output_dtype"))
    axis = _axis(n.attr("axis", 1), x.rank)
    scale = _along(scale, axis, x.rank)
    scale = scale if scale.dtype == x.dtype else cast(scale, x.dtype)
    y = x / scale
    if to == dtypes.float8:  # rounded by the cast, saturating (ONNX's default)
        if zero is not None:
            y = y + cast(_along(zero, axis, x.rank), x.dtype)
        return cast(y, to)
    y = round(y)  # half to even, as ONNX rounds
    if zero is not None:
        y = y + cast(_along(zero, axis, x.rank), x.dtype)
    lo, hi = _RANGES[to]
    return cast(minimum(maximum(y, _as_dtype_of(lo, y)), _as_dtype_of(hi, y)), to)


def _dequantize(ctx, n):
    x, scale = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    zero = ctx.opt_tensor(n, 2)
    axis = _axis(n.attr("axis", 1), x.rank)
    scale = _along(scale, axis, x.rank)
    y = cast(x, scale.dtype)
    if zero is not None:
        y = y - cast(_along(zero, axis, x.rank), scale.dtype)
    return y * scale


def _elem_of(n, i):
    """The element type of input ``i`` where it is an initializer or a Constant's value, else None."""
    name = n.input(i)
    if name is None:
        return None
    if name in n.graph.initializers:
        return n.graph.initializers[name][0]
    producer = next((p for p in n.graph.nodes if name in p.outputs), None)
    if producer is not None and producer.op_type == "Constant" and producer.has("value"):
        return producer.attr("value")[1]
    return None


def _quantize_check(n):
    if n.input(2) is None and n.attr("output_dtype", 0) not in (_INT8, _FLOAT8E4M3FN):
        return "without a zero point the output is uint8, which Tripy does not have (give an int8 zero point)"
    elem = _elem_of(n, 2)
    if elem is not None and elem not in (_INT8, _FLOAT8E4M3FN):
        return f"its zero point is {_elem_name(elem)}: Tripy quantizes to int8 and float8 (e4m3) only"
    if n.attr("saturate", 1) == 0 and _FLOAT8E4M3FN in (elem, n.attr("output_dtype", 0)):
        return "saturate=0 is not supported (Tripy's float8 casts saturate)"
    return None


def _no_blocks(n):
    if n.attr("block_size", 0):
        return "block_size (blocked quantization) is not supported"
    return None


ROWS = {
    "DequantizeLinear": Row(_dequantize, ("axis", "block_size"), first=10, check=_no_blocks),
    "QuantizeLinear": Row(_quantize, ("axis", "block_size", "output_dtype", "saturate"), first=10,
                          check=checks(_no_blocks, _quantize_check)),
}

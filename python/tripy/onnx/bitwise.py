"""ONNX's integer bitwise ops (opset 18) as Tripy ops. Tripy's tensor ops have no bitwise AND, OR
or XOR of integers (``&`` and ``|`` take bools), so each operand is split into its bytes with
floored division and remainder (which give a negative number's two's-complement bytes), each
byte pair looks up its result in a constant 256 x 256 table (one gather), and the bytes are summed
back, the top one signed. BitwiseNot is ``-1 - x``, which never overflows. Int8, int32 and int64
(Tripy's integer dtypes); the unsigned and 16-bit ones are refused with the model's dtypes. Their
rows join the converter table in ``converters.py``."""

import operator

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import gather
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make
from tripy.onnx.rows import Row

_BYTES = {dtypes.int8: 1, dtypes.int32: 4, dtypes.int64: 8}
_TABLES = {"BitwiseAnd": operator.and_, "BitwiseOr": operator.or_, "BitwiseXor": operator.xor}


def _integer(n, t):
    if t.dtype not in _BYTES:
        _raise_here(f"ONNX {n.describe()}: {n.op_type} takes integers, not {t.dtype.name}.")
    return t


def _bitwise_binary(ctx, n):
    a, b = (_integer(n, ctx.tensor(name)) for name in n.inputs[:2])
    if a.dtype != b.dtype:
        _raise_here(f"ONNX {n.describe()}: the inputs are {a.dtype.name} and {b.dtype.name}.")
    dtype, count = a.dtype, _BYTES[a.dtype]
    op = _TABLES[n.op_type]
    table = Tensor([op(x, y) for x in range(256) for y in range(256)], dtype=dtypes.int64)
    a, b = cast(a, dtypes.int64), cast(b, dtypes.int64)
    radix = Tensor(256, dtype=dtypes.int64)
    out = None
    for k in range(count):
        scale = Tensor(256**k, dtype=dtypes.int64)
        byte_a = make("floor_div", [a, scale]) % radix if k else a % radix
        byte_b = make("floor_div", [b, scale]) % radix if k else b % radix
        value = gather(table, 0, byte_a * radix + byte_b)
        if k == count - 1:  # the top byte carries the sign: 128..255 stand for -128..-1
            value = value - make("floor_div", [value, Tensor(128, dtype=dtypes.int64)]) * radix
        term = value * scale if k else value
        out = term if out is None else out + term
    return cast(out, dtype)


def _bitwise_not(ctx, n):
    x = _integer(n, ctx.tensor(n.inputs[0]))
    return Tensor(-1, dtype=x.dtype) - x


ROWS = {
    **{op: Row(_bitwise_binary, first=18) for op in _TABLES},
    "BitwiseNot": Row(_bitwise_not, first=18),
}

"""ONNX ops as Tripy ops: one table (``OPS``, a row per op type) of the converter, the attributes it
reads, the opsets it covers and, where some attribute values or dtypes are not supported, a check
that names them before any work. ``problems_of`` runs every check over a graph; ``run_graph`` runs
the converters in order, eagerly or while ``tp.compile`` traces.

Values flow between converters as ``tp.Tensor``, or as ``Dims``: a shape (or a piece of one) kept
as Python ints and ``tp.DimensionSize`` values, so that Shape -> Gather -> Concat -> Reshape chains
stay symbolic under dynamic shapes instead of becoming data-dependent tensors.
"""

import builtins
import math

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import arange, full
from tripy.frontend.ops.elementwise import (
    ceil, cos, erf, exp, expm1, floor, leaky_relu, log, maximum, minimum, relu, round, sigmoid, sign, sin, sqrt,
    tanh, where,
)
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.reduce import argmax, argmin, log_softmax, max, mean, min, prod, softmax, sum
from tripy.frontend.ops.shape_ops import (
    concatenate, expand, flatten, gather, permute, reshape, split, squeeze, unsqueeze,
)
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make
from tripy.onnx import bitwise, col2im, composites, control_flow, det, grid_sample, losses, pooling, quantization
from tripy.onnx import recurrent, roi_align, sequences, signal, value_shaped
from tripy.onnx import resize as resize_rules
from tripy.onnx.converters_nn import (
    _arg, _batch_norm, _celu, _conv, _conv_transpose, _cumsum, _depth_to_space, _dropout, _einsum, _elementwise,
    _extreme, _eye_like, _gather_nd, _gemm, _hard_sigmoid, _hardmax, _instance_norm, _is_inf, _l1, _l2,
    _layer_norm, _log_sum, _log_sum_exp, _lrn, _gelu, _group_norm, _lp_norm, _mish, _matmul, _mvn, _one_hot, _pad, _prelu, _reduce, _resize,
    _reverse_sequence, _scatter_elements, _scatter_nd, _shrink, _softmax, _softplus, _space_to_depth, _sum_square,
    _topk, _trilu,
)
from tripy.onnx.graph import (
    Context, Dims, OPSET_MAX, OPSET_MIN, STANDARD_DOMAINS, Sequence, _BIG, _as_dtype_of, _axes_of, _axis, _dims,
    _elem_name, _flat, _static, as_tensor, dtype_of,
)
from tripy.onnx.patterns import FusedNode
from tripy.onnx.rows import INEXPRESSIBLE, Row, attr_is, checks, dtype_attr, one_output


# ---- converters ----------------------------------------------------------------------------------


def _unary(fn):
    return lambda ctx, n: fn(ctx.tensor(n.inputs[0]))


def _dims_arith(op):
    """Add/Sub/Mul/Div on shape values stays on the host (symbolic for DimensionSizes)."""

    def run(ctx, n):
        a, b = ctx.get(n.inputs[0]), ctx.get(n.inputs[1])
        if isinstance(a, Dims) or isinstance(b, Dims):
            x, y = ctx.try_ints(n.inputs[0]), ctx.try_ints(n.inputs[1])
            if x is not None and y is not None and (len(x) == len(y) or 1 in (len(x), len(y))):
                size = builtins.max(len(x), len(y))
                x, y = x * size if len(x) == 1 else x, y * size if len(y) == 1 else y
                scalar = all(getattr(v, "scalar", False) or (isinstance(v, Tensor) and v.rank == 0) for v in (a, b))
                return _dims([_DIMS_OPS[op](p, q) for p, q in zip(x, y)], scalar)
        return _BINARY[op](ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]))

    return run


def _trunc_div(p, q):
    """ONNX's integer quotient, toward zero, of known values (sizes, never negative, as they are)."""
    if isinstance(p, int) and isinstance(q, int):
        quotient = builtins.abs(p) // builtins.abs(q)
        return quotient if (p < 0) == (q < 0) else -quotient
    return p // q


_DIMS_OPS = {"Add": lambda p, q: p + q, "Sub": lambda p, q: p - q, "Mul": lambda p, q: p * q, "Div": _trunc_div}


def _div(a, b):
    if issubclass(a.dtype, dtypes.integer):
        # ONNX truncates integer quotients toward zero; floor_div rounds down.
        q = make("floor_div", [a, b])
        r = a - q * b
        return where((r != 0) & ((a < 0) != (b < 0)), q + 1, q)  # floor is one below when the signs differ
    return a / b


def _pow(a, b):
    if issubclass(a.dtype, dtypes.floating):
        return a ** (b if b.dtype == a.dtype else cast(b, a.dtype))
    if issubclass(b.dtype, dtypes.floating):
        return cast(cast(a, b.dtype) ** b, a.dtype)
    return _int_pow(a, b)


def _int_pow(a, b):
    """Integer powers, exactly (wrapping as integer products do): squaring, one step per bit of the
    largest exponent (all 63 where the exponents are not known while the graph is built)."""
    b = b if b.dtype == a.dtype else cast(b, a.dtype)
    try:
        bits = builtins.max([int(v).bit_length() for v in _flat(b.tolist())] + [1])
    except TripyException:
        bits = 63 if a.dtype == dtypes.int64 else 31
    one = _as_dtype_of(1, a)
    zero = _as_dtype_of(0, a)
    result = expand(one, list(a.shape)) if a.rank else one
    base, e = a, maximum(b, zero)  # a negative exponent of an integer: 0 (or 1 for 1), as C truncates
    for _ in range(bits):
        result = where(e % 2 == 1, result * base, result)
        base = base * base
        e = make("floor_div", [e, _as_dtype_of(2, e)])
    return result


def _mod(ctx, n):
    a, b = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    r = a % b  # the sign of the divisor, as ONNX's fmod=0
    if n.attr("fmod", 0):  # C's fmod: the sign of the dividend
        r = where((r != 0) & ((r < 0) != (a < 0)), r - b, r)
    return r


_BINARY = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b, "Div": _div,
           "Pow": _pow}


def _binary(fn):
    return lambda ctx, n: fn(ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]))


def _variadic(fn, average=False):
    def run(ctx, n):
        items = [ctx.tensor(i) for i in n.inputs if i]
        out = items[0]
        for t in items[1:]:
            out = fn(out, t)
        return out / float(len(items)) if average else out

    return run


def _constant(ctx, n):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if not n.has(key):
            continue
        v = n.attr(key)
        if key == "value":
            return _attr_tensor(v)
        return Tensor(v, dtype=dtypes.float32 if "float" in key else dtypes.int64)
    _raise_here(f"ONNX {n.describe()} has no value Tripy can read.")


def _attr_tensor(value):
    _, elem, dims, node = value
    return Tensor._wrap(node)


def _shape(ctx, n):
    x = ctx.get(n.inputs[0])
    shape = [len(x)] if isinstance(x, Dims) and not x.scalar else [] if isinstance(x, Dims) else list(x.shape)
    rank = len(shape)
    start, end = n.attr("start", 0), n.attr("end", rank)
    start, end = [builtins.min(builtins.max(_axis(v, rank), 0), rank) for v in (start, end)]
    return _dims(shape[start:end])




def _size(ctx, n):
    x = ctx.tensor(n.inputs[0])
    total = 1
    for d in x.shape:
        total = total * d
    return _dims([total], scalar=True)


def _cast(ctx, n):
    to = dtype_of(n.attr("to"))
    x = ctx.get(n.inputs[0])
    if isinstance(x, Dims) and to in (dtypes.int64, dtypes.int32):
        return x
    x = as_tensor(x)
    return x if x.dtype == to else cast(x, to)


def _cast_like(ctx, n):
    x, like = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    if like.dtype == dtypes.float8 and n.attr("saturate", 1) == 0:
        _raise_here(f"ONNX {n.describe()}: saturate=0 is not supported (Tripy's float8 casts saturate).")
    return x if x.dtype == like.dtype else cast(x, like.dtype)


def _reshape(ctx, n):
    value = ctx.get(n.inputs[0])
    shape = ctx.ints(n.inputs[1], n)
    if isinstance(value, Dims) and len(shape) == 1 and shape[0] in (-1, len(value)):
        return _dims(list(value))  # a shape value stays one (torch writes x.expand(n, -1, -1) so)
    x = as_tensor(value)
    if not n.attr("allowzero", 0):
        shape = [x.shape[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(shape)]
    return reshape(x, shape)


def _flatten(ctx, n):
    x = ctx.tensor(n.inputs[0])
    axis = _axis(n.attr("axis", 1), x.rank)
    if axis == 0:
        return unsqueeze(flatten(x), 0)
    if axis == x.rank:
        return unsqueeze(flatten(x), 1)
    return flatten(flatten(x, axis, -1), 0, axis - 1)


def _transpose(ctx, n):
    x = ctx.tensor(n.inputs[0])
    perm = n.attr("perm", list(reversed(range(x.rank))))
    return permute(x, perm)


def _concat(ctx, n):
    axis = n.attr("axis")
    values = [ctx.get(i) for i in n.inputs if i]
    if any(isinstance(v, Dims) for v in values) and axis in (0, -1):
        parts = [ctx.try_ints(i) for i in n.inputs if i]
        if all(p is not None for p in parts):
            return _dims([d for p in parts for d in p])
    tensors = [as_tensor(v) for v in values]
    return concatenate(tensors, _axis(axis, tensors[0].rank))


def _unsqueeze(ctx, n):
    x = ctx.get(n.inputs[0])
    axes = _axes_of(ctx, n, 13)
    if isinstance(x, Dims) and x.scalar and axes in ([0], [-1]):
        return _dims(list(x))
    x = as_tensor(x)
    rank = x.rank + len(axes)
    for a in sorted(_axis(a, rank) for a in axes):
        x = unsqueeze(x, a)
    return x


def _squeeze(ctx, n):
    x = ctx.get(n.inputs[0])
    axes = _axes_of(ctx, n, 13)
    if isinstance(x, Dims) and not x.scalar and len(x) == 1 and axes in (None, [0], [-1]):
        return _dims(list(x), scalar=True)
    x = as_tensor(x)
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if isinstance(d, int) and d == 1]
    return squeeze(x, [_axis(a, x.rank) for a in axes])


def _gather(ctx, n):
    data = ctx.get(n.inputs[0])
    axis = n.attr("axis", 0)
    index_values = ctx.try_ints(n.inputs[1])
    index = ctx.get(n.inputs[1])
    scalar = (isinstance(index, Dims) and index.scalar) or (isinstance(index, Tensor) and index.rank == 0)
    if isinstance(data, Dims) and not data.scalar and index_values is not None:
        picked = [data[i] for i in index_values]
        return _dims(picked, scalar)
    data = as_tensor(data)
    axis = _axis(axis, data.rank)
    size = data.shape[axis]
    if index_values is not None and isinstance(size, int):
        fixed = [i + size if i < 0 else i for i in index_values]
        index = Tensor(fixed[0] if scalar else fixed, dtype=dtypes.int64)
        if not scalar and isinstance(ctx.get(n.inputs[1]), Tensor) and ctx.get(n.inputs[1]).rank > 1:
            index = reshape(index, ctx.get(n.inputs[1]).shape)
    else:
        index = as_tensor(index)
        bound = _as_dtype_of(size, index) if isinstance(size, Tensor) else size
        index = where(index < 0, index + bound, index)
    return gather(data, axis, index)


def _gather_elements(ctx, n):
    """data[..., index[i, j, ...], ...] along the axis: one gather from the flattened data at
    row-major positions built from the index and an iota per other dim."""
    data, index = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    axis = _axis(n.attr("axis", 0), data.rank)
    shape = list(data.shape)
    if not _static(shape):
        _raise_here(f"ONNX {n.describe()}: GatherElements needs its data's shape static, but it is {shape}.")
    return composites.take_along(data, index, axis)


def _slice(ctx, n):
    x = ctx.get(n.inputs[0])
    if n.opset < 10:
        starts, ends, axes, steps = n.attr("starts"), n.attr("ends"), n.attr("axes"), None
    else:
        starts, ends = ctx.ints(n.inputs[1], n), ctx.ints(n.inputs[2], n)
        axes = None if n.input(3) is None else ctx.ints(n.inputs[3], n)
        steps = None if n.input(4) is None else ctx.ints(n.inputs[4], n)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    clamp = lambda v: builtins.max(builtins.min(v, _BIG), -_BIG) if isinstance(v, int) else v
    if isinstance(x, Dims) and not x.scalar and axes in ([0], [-1]):
        return _dims(x[slice(clamp(starts[0]), clamp(ends[0]), steps[0])])
    x = as_tensor(x)
    index = [slice(None)] * x.rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[_axis(axis, x.rank)] = slice(clamp(start), clamp(end), step)
    return x[tuple(index)]


def _split(ctx, n):
    x = ctx.tensor(n.inputs[0])
    axis = _axis(n.attr("axis", 0), x.rank)
    sizes = n.attr("split") if n.opset < 13 else (None if n.input(1) is None else ctx.ints(n.inputs[1], n))
    count = len(n.outputs)
    if not sizes and n.has("num_outputs") and not (isinstance(x.shape[axis], int) and x.shape[axis] % count == 0):
        # opset 18: parts of ceil(size / num_outputs), the last one smaller
        size = x.shape[axis]
        if not isinstance(size, int):
            _raise_here(f"ONNX {n.describe()}: num_outputs that may not divide dim {axis} needs it static.")
        part = -(-size // count)
        sizes = [builtins.min(part, builtins.max(size - i * part, 0)) for i in range(count)]
    if not sizes:
        if count == 1:
            return [x]
        return split(x, count, axis)
    if len(sizes) == 1:
        return [x]
    return split(x, list(sizes), axis)


def _expand(ctx, n):
    x = ctx.tensor(n.inputs[0])
    shape = ctx.ints(n.inputs[1], n)
    rank = builtins.max(x.rank, len(shape))
    shape = [1] * (rank - len(shape)) + list(shape)
    for _ in range(rank - x.rank):
        x = unsqueeze(x, 0)
    sizes = []
    for have, want in zip(x.shape, shape):
        if isinstance(want, int) and want == 1:
            sizes.append(-1)
        else:
            sizes.append(want)
    return expand(x, sizes)


def _tile(ctx, n):
    x = ctx.tensor(n.inputs[0])
    repeats = ctx.ints(n.inputs[1], n)
    shape = list(x.shape)
    inter, wide, out = [], [], []
    for d, r in zip(shape, repeats):
        inter += [1, d]
        wide += [r, -1]
        out.append(d * r)
    return reshape(expand(reshape(x, inter), wide), out)


def _constant_of_shape(ctx, n):
    shape = ctx.ints(n.inputs[0], n)
    value = n.attr("value")
    if value is None:
        return full(shape, 0.0, dtypes.float32)
    t = _attr_tensor(value)
    fill = _flat(t.tolist())[0]
    if t.dtype == dtypes.int64 and _static(shape) and len(shape) == 1 and shape[0] <= 64:
        return _dims([int(fill)] * shape[0])  # a shape value (torch's expand writes these)
    if t.dtype == dtypes.bool:  # full takes numbers: fill int32, then compare
        return full(shape, int(fill), dtypes.int32) != 0
    return full(shape, fill, t.dtype)


def _range(ctx, n):
    start, limit, delta = (ctx.values(i, n) for i in n.inputs[:3])
    start, limit, delta = (_flat(v)[0] if isinstance(v, list) else v for v in (start, limit, delta))
    dtype = ctx.get(n.inputs[0]).dtype if isinstance(ctx.get(n.inputs[0]), Tensor) else dtypes.int64
    return arange(start, limit, delta, dtype=dtype)


def _where(ctx, n):
    if any(isinstance(ctx.get(i), Dims) for i in n.inputs[:3]):  # choosing among shape values
        cond, a, b = (ctx.try_ints(i) for i in n.inputs[:3])
        if cond is not None and a is not None and b is not None:
            size = builtins.max(len(cond), len(a), len(b))
            if all(len(v) in (1, size) for v in (cond, a, b)):
                cond, a, b = (v * size if len(v) == 1 else v for v in (cond, a, b))
                return _dims([p if c else q for c, p, q in zip(cond, a, b)])
    return where(ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]), ctx.tensor(n.inputs[2]))


def _same_dim(p, q):
    """p == q for shape entries: True or False where it is known now, else None (a size against a
    negative number is known to differ: sizes are never negative)."""
    if isinstance(p, int) and isinstance(q, int):
        return p == q
    if isinstance(p, int) and p < 0 or isinstance(q, int) and q < 0:
        return False
    return None


def _equal(ctx, n):
    if any(isinstance(ctx.get(i), Dims) for i in n.inputs[:2]):
        a, b = ctx.try_ints(n.inputs[0]), ctx.try_ints(n.inputs[1])
        if a is not None and b is not None and (len(a) == len(b) or 1 in (len(a), len(b))):
            size = builtins.max(len(a), len(b))
            a, b = (v * size if len(v) == 1 else v for v in (a, b))
            same = [_same_dim(p, q) for p, q in zip(a, b)]
            if None not in same:
                return _dims(same)
    return ctx.tensor(n.inputs[0]) == ctx.tensor(n.inputs[1])


def _clip(ctx, n):
    x = ctx.tensor(n.inputs[0])
    if n.opset < 11:
        lo, hi = n.attr("min"), n.attr("max")
    else:
        lo, hi = ctx.opt_tensor(n, 1), ctx.opt_tensor(n, 2)
    if lo is not None:
        x = maximum(x, _as_dtype_of(lo, x))
    if hi is not None:
        x = minimum(x, _as_dtype_of(hi, x))
    return x




# ---- the table ----------------------------------------------------------------------------------

def _const_tensor_attr(n):
    for key in ("sparse_value", "value_string", "value_strings"):
        if n.has(key):
            return f"{key} is not supported"
    if n.has("value") and n.attr("value")[3] is None:
        return f"its value has the dtype {_elem_name(n.attr('value')[1])}, which Tripy does not have"
    return None


def _value_attr(n):
    if n.has("value") and n.attr("value")[3] is None:
        return f"its value has the dtype {_elem_name(n.attr('value')[1])}, which Tripy does not have"
    return None


def _saturating(n):
    """Tripy's casts to float8 saturate, ONNX's default since opset 19; ``saturate=0`` (overflow to
    infinity or NaN) is another rule."""
    if n.attr("saturate", 1) == 0 and n.attr("to") == 17:
        return "saturate=0 is not supported (Tripy's float8 casts saturate)"
    return None


def _no_training_input(n):
    """Dropout is the identity: training_mode must be a constant false, or the ratio a constant 0
    (torchvision's Swin applies F.dropout(p=0.0) with its default training=True)."""
    if n.input(2) is None or constant_scalar(n.graph, n.input(2), (9,)) is False:
        return None
    if n.input(1) is not None and constant_scalar(n.graph, n.input(1)) == 0.0:
        return None
    return ("training_mode is not a constant false (and the ratio no constant 0): Tripy runs inference, where "
            "Dropout is the identity")


_REDUCE_ATTRS = ("axes", "keepdims", "noop_with_empty_axes")
_ACT = ("alpha", "beta", "gamma")

# Op type -> its converter, the attributes it reads, and the opsets it covers. Ops whose inputs or
# attributes changed across opsets read ``node.opset`` (Squeeze's axes: an attribute before 13).
OPS = {
    "Abs": Row(_unary(abs)),
    "Acos": Row(_unary(composites.acos)),
    "Asin": Row(_unary(composites.asin)),
    "Atan": Row(_unary(composites.atan)),
    "EyeLike": Row(_eye_like, ("dtype", "k"), check=dtype_attr("dtype")),
    "Hardmax": Row(_hardmax, ("axis",)),
    "LpNormalization": Row(_lp_norm, ("axis", "p"), first=1, check=attr_is("p", (1, 2), 2)),
    "LRN": Row(_lrn, ("alpha", "beta", "bias", "size")),
    "OneHot": Row(_one_hot, ("axis",), first=9),
    "ReverseSequence": Row(_reverse_sequence, ("batch_axis", "time_axis"), first=10),
    "Acosh": Row(_unary(lambda x: log(x + sqrt(x * x - 1.0)))),
    "Asinh": Row(_unary(lambda x: log(x + sqrt(x * x + 1.0)))),
    "Atanh": Row(_unary(lambda x: log((x + 1.0) / (1.0 - x)) * 0.5)),
    "Add": Row(_dims_arith("Add")),
    "And": Row(_binary(lambda a, b: a & b)),
    "ArgMax": Row(_arg(argmax), ("axis", "keepdims", "select_last_index")),
    "ArgMin": Row(_arg(argmin), ("axis", "keepdims", "select_last_index")),
    "BatchNormalization": Row(_batch_norm, ("epsilon", "momentum", "spatial", "training_mode"),
                              check=checks(attr_is("training_mode", (0,), 0), attr_is("spatial", (1,), 1), one_output)),
    "Cast": Row(_cast, ("saturate", "to"), check=checks(dtype_attr("to"), _saturating)),
    "CastLike": Row(_cast_like, ("saturate",)),
    "Ceil": Row(_unary(ceil)),
    "Celu": Row(_elementwise(_celu), ("alpha",)),
    "Clip": Row(_clip, ("min", "max")),
    "Concat": Row(_concat, ("axis",)),
    "Constant": Row(_constant, ("value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value",
                                "value_string", "value_strings"), check=_const_tensor_attr),
    "ConstantOfShape": Row(_constant_of_shape, ("value",), check=_value_attr),
    "Conv": Row(_conv, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")),
    "ConvTranspose": Row(_conv_transpose, ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                           "output_shape", "pads", "strides")),
    "Cos": Row(_unary(cos)),
    "Cosh": Row(_unary(lambda x: (exp(x) + exp(-x)) * 0.5)),
    "CumSum": Row(_cumsum, ("exclusive", "reverse")),
    "DepthToSpace": Row(_depth_to_space, ("blocksize", "mode")),
    "Div": Row(_dims_arith("Div")),
    "Dropout": Row(_dropout, ("ratio", "seed"), check=_no_training_input),
    "Einsum": Row(_einsum, ("equation",)),
    "GatherND": Row(_gather_nd, ("batch_dims",), first=11),
    "Scatter": Row(_scatter_elements, ("axis",), first=9, last=10),
    "ScatterElements": Row(_scatter_elements, ("axis", "reduction"), first=11,
                           check=attr_is("reduction", ("none", "add", "mul", "max", "min"), "none")),
    "ScatterND": Row(_scatter_nd, ("reduction",), first=11,
                     check=attr_is("reduction", ("none", "add", "mul", "max", "min"), "none")),
    "Elu": Row(_elementwise(lambda n, x: where(x > 0, x, expm1(x) * n.attr("alpha", 1.0))), ("alpha",)),
    "Equal": Row(_equal),
    "Erf": Row(_unary(erf)),
    "Exp": Row(_unary(exp)),
    "Expand": Row(_expand),
    "Flatten": Row(_flatten, ("axis",)),
    "Floor": Row(_unary(floor)),
    "Gather": Row(_gather, ("axis",)),
    "GatherElements": Row(_gather_elements, ("axis",)),
    "Gelu": Row(_elementwise(_gelu), ("approximate",), first=20, check=attr_is("approximate", ("none", "tanh"), "none")),
    "GroupNormalization": Row(_group_norm, ("epsilon", "num_groups", "stash_type"), first=18,
                              check=attr_is("stash_type", (1,), 1)),
    "Gemm": Row(_gemm, ("alpha", "beta", "transA", "transB")),
    "Greater": Row(_binary(lambda a, b: a > b)),
    "GreaterOrEqual": Row(_binary(lambda a, b: a >= b)),
    "HardSigmoid": Row(_elementwise(_hard_sigmoid), ("alpha", "beta")),
    "HardSwish": Row(_elementwise(lambda n, x: x * _hard_sigmoid(n, x, 1.0 / 6, 0.5))),
    "Identity": Row(lambda ctx, n: ctx.get(n.inputs[0])),
    "InstanceNormalization": Row(_instance_norm, ("epsilon",)),
    "IsInf": Row(_elementwise(_is_inf), ("detect_negative", "detect_positive")),
    "IsNaN": Row(_elementwise(lambda n, x: x != x)),
    "LayerNormalization": Row(_layer_norm, ("axis", "epsilon", "stash_type"), check=attr_is("stash_type", (1,), 1)),
    "LeakyRelu": Row(_elementwise(lambda n, x: leaky_relu(x, n.attr("alpha", 0.01))), ("alpha",)),
    "Less": Row(_binary(lambda a, b: a < b)),
    "LessOrEqual": Row(_binary(lambda a, b: a <= b)),
    "Log": Row(_unary(log)),
    "LogSoftmax": Row(_softmax(log_softmax), ("axis",)),
    "MatMul": Row(_matmul),
    "Max": Row(_variadic(maximum)),
    "Mean": Row(_variadic(lambda a, b: a + b, average=True)),
    "MeanVarianceNormalization": Row(_mvn, ("axes",)),
    "Min": Row(_variadic(minimum)),
    "Mish": Row(_unary(_mish), first=18),
    "Mod": Row(_mod, ("fmod",)),
    "Mul": Row(_dims_arith("Mul")),
    "Neg": Row(_unary(lambda x: -x)),
    "Not": Row(_unary(lambda x: ~x)),
    "Or": Row(_binary(lambda a, b: a | b)),
    "Pad": Row(_pad, ("mode", "pads", "value"), check=attr_is("mode", ("constant", "reflect", "edge", "wrap"), "constant")),
    "Pow": Row(_binary(_pow)),
    "PRelu": Row(_prelu),
    "Range": Row(_range),
    "Reciprocal": Row(_unary(lambda x: 1.0 / x)),
    "ReduceL1": Row(_reduce(_l1), _REDUCE_ATTRS),
    "ReduceL2": Row(_reduce(_l2), _REDUCE_ATTRS),
    "ReduceLogSum": Row(_reduce(_log_sum), _REDUCE_ATTRS),
    "ReduceLogSumExp": Row(_reduce(_log_sum_exp), _REDUCE_ATTRS),
    "ReduceMax": Row(_reduce(_extreme(max, highest=False)), _REDUCE_ATTRS),
    "ReduceMean": Row(_reduce(mean), _REDUCE_ATTRS),
    "ReduceMin": Row(_reduce(_extreme(min, highest=True)), _REDUCE_ATTRS),
    "ReduceProd": Row(_reduce(prod), _REDUCE_ATTRS),
    "ReduceSum": Row(_reduce(sum, axes_input_from=13), _REDUCE_ATTRS),
    "ReduceSumSquare": Row(_reduce(_sum_square), _REDUCE_ATTRS),
    "Relu": Row(_unary(relu)),
    "Resize": Row(_resize, ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                            "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"), first=11,
                  check=checks(attr_is("mode", resize_rules.MODES, "nearest"), attr_is("antialias", (0,), 0),
                               attr_is("keep_aspect_ratio_policy", ("stretch",), "stretch"),
                               attr_is("coordinate_transformation_mode", resize_rules.COORDINATE_MODES, "half_pixel"),
                               attr_is("nearest_mode", resize_rules.NEAREST_MODES, "round_prefer_floor"))),
    "Reshape": Row(_reshape, ("allowzero",)),
    "Round": Row(_unary(round)),
    "Selu": Row(_elementwise(lambda n, x: where(x > 0, x, expm1(x) * n.attr("alpha", 1.67326319217681884765625))
                             * n.attr("gamma", 1.05070102214813232421875)), ("alpha", "gamma")),
    "Shape": Row(_shape, ("start", "end")),
    "Shrink": Row(_elementwise(_shrink), ("bias", "lambd")),
    "Sigmoid": Row(_unary(sigmoid)),
    "Sign": Row(_unary(sign)),
    "Sin": Row(_unary(sin)),
    "Sinh": Row(_unary(lambda x: (exp(x) - exp(-x)) * 0.5)),
    "Size": Row(_size),
    "Slice": Row(_slice, ("starts", "ends", "axes")),
    "Softmax": Row(_softmax(softmax), ("axis",)),
    "Softplus": Row(_unary(_softplus)),
    "Softsign": Row(_unary(lambda x: x / (abs(x) + 1.0))),
    "SpaceToDepth": Row(_space_to_depth, ("blocksize",)),
    "Split": Row(_split, ("axis", "num_outputs", "split")),
    "Sqrt": Row(_unary(sqrt)),
    "Squeeze": Row(_squeeze, ("axes",)),
    "Sub": Row(_dims_arith("Sub")),
    "Sum": Row(_variadic(lambda a, b: a + b)),
    "Tan": Row(_unary(lambda x: sin(x) / cos(x))),
    "Tanh": Row(_unary(tanh)),
    "ThresholdedRelu": Row(_elementwise(lambda n, x: where(x > n.attr("alpha", 1.0), x, _as_dtype_of(0.0, x))),
                           ("alpha",)),
    "Tile": Row(_tile),
    "TopK": Row(_topk, ("axis", "largest", "sorted"), check=attr_is("sorted", (1,), 1)),
    "Transpose": Row(_transpose, ("perm",)),
    "Trilu": Row(_trilu, ("upper",)),
    "Unsqueeze": Row(_unsqueeze, ("axes",)),
    "Upsample": Row(_resize, ("mode", "scales"), last=9, check=attr_is("mode", ("nearest", "linear"), "nearest")),
    "Where": Row(_where),
    "Xor": Row(_binary(lambda a, b: a != b)),
}
# the tables of the converters kept in their own files
for _rows in (bitwise.ROWS, col2im.ROWS, control_flow.ROWS, det.ROWS, grid_sample.ROWS, losses.ROWS, pooling.ROWS,
              quantization.ROWS, recurrent.ROWS, roi_align.ROWS, sequences.ROWS, signal.ROWS, value_shaped.ROWS):
    assert not set(_rows) & set(OPS), set(_rows) & set(OPS)
    OPS.update(_rows)
# Ops whose meaning has not changed since their first version (older versions of the others had a
# `broadcast` or `consumed_inputs` attribute, which the attribute check refuses anyway): these
# rows also cover models of opsets 1 to 6.
# Ops whose last change was at opset 6 (consumed_inputs dropped): these rows cover opset 6 too.
_SINCE_OPSET_6 = {"Elu", "HardSigmoid", "Selu"}
_SINCE_FIRST_VERSION = {"Abs", "Ceil", "Cos", "Exp", "Floor", "GlobalAveragePool", "GlobalMaxPool", "Identity",
                        "InstanceNormalization", "Log", "Neg", "Not", "ReduceLogSum", "Reciprocal", "Relu", "Sigmoid", "Sin",
                        "Sqrt", "Tan", "Tanh", "Softplus", "Softsign"}
OPS = {op: row._replace(first=1) if op in _SINCE_FIRST_VERSION else row._replace(first=6) if op in _SINCE_OPSET_6
       else row for op, row in OPS.items()}


# ---- checking and running ----------------------------------------------------------------------


def _value_problems(graph, kind, values, typed):
    """The inputs or outputs whose kind or dtype Tripy lacks: tensors, and sequences and optionals
    of tensors, of its dtypes (an untyped one only where ``typed`` is False: a subgraph's)."""
    problems = []
    for name, elem, dims in values:
        container = graph.containers.get(name, "")
        if set(container.split()) - {"sequence", "optional"}:
            problems.append(f"{kind} {name!r}: a {container}, which Tripy does not have")
        elif (elem or typed or container) and dtype_of(elem) is None:
            what = f"a {container} of {_elem_name(elem)} tensors" if container else f"dtype {_elem_name(elem)}"
            problems.append(f"{kind} {name!r}: {what}, which Tripy does not have")
    return problems


def problems_of(graph, top=True):
    """Every reason the graph cannot run, one line each (the model's opset, inputs and
    initializers of dtypes Tripy lacks, then node by node: domain, op type, opset, attributes, and
    the problems of its subgraphs, under the node's name)."""
    problems = []
    if top and graph.opset is None:
        problems.append("the model imports no version of the standard ONNX op set (domain '')")
    elif top and graph.opset > OPSET_MAX:
        problems.append(f"the model's opset {graph.opset} is newer than the opsets Tripy reads ({OPSET_MIN} to {OPSET_MAX})")
    problems += _value_problems(graph, "input", graph.inputs, typed=top)
    for name, (elem, dims, node) in graph.initializers.items():
        if node is None:
            problems.append(f"initializer {name!r}: dtype {_elem_name(elem)}, which Tripy does not have")
    problems += _value_problems(graph, "output", graph.outputs, typed=False)
    for n in graph.nodes:
        where = f"node {n.name!r} ({n.op_type}, opset {n.opset})"
        if n.domain not in STANDARD_DOMAINS:
            problems.append(f"{where}: the op domain {n.domain!r} is not supported (only the standard domain is)")
            continue
        row = OPS.get(n.op_type)
        if row is None and n.op_type in INEXPRESSIBLE:
            problems.append(f"{where}: the op type {n.op_type} is not supported: {INEXPRESSIBLE[n.op_type]}")
            continue
        if row is None:
            problems.append(f"{where}: the op type {n.op_type} is not supported")
            continue
        if n.opset is not None and not row.first <= n.opset <= row.last:
            problems.append(f"{where}: Tripy's converter covers opsets {row.first} to {row.last}")
            continue
        unknown = sorted(set(n.attrs) - set(row.attrs))
        if unknown:
            problems.append(f"{where}: attribute(s) {', '.join(unknown)} not supported")
            continue
        problem = row.check(n) if row.check else None
        if problem:
            problems.append(f"{where}: {problem}")
        for key, sub in graph.subgraphs(n):  # the subgraphs of the rows that read them
            problems += [f"{where}, its {key}: {p}" for p in problems_of(sub, top=False)]
    return problems


def constant_scalar(graph, name, elem_types=(1, 10, 16)):
    """The value held by ``name`` if it is a one-element constant (an initializer or a Constant
    node's value) of one of ``elem_types`` (float ones unless given), else None."""
    if name in graph.initializers:
        elem, dims, node = graph.initializers[name]
    else:
        producer = next((n for n in graph.nodes if name in n.outputs), None)
        if producer is None or producer.op_type != "Constant":
            return None
        if producer.has("value_float") and 1 in elem_types:
            return float(producer.attr("value_float"))
        if not producer.has("value"):
            return None
        _, elem, dims, node = producer.attr("value")
    if node is None or elem not in elem_types or math.prod(dims or []) != 1:
        return None
    return _flat(Tensor._wrap(node).tolist())[0]


def scalar_constant(graph, name):
    """The number held by ``name`` if it is a one-element float constant, else None: what
    ``patterns.fuse`` matches."""
    value = constant_scalar(graph, name)
    return None if value is None else float(value)


def _run_node(ctx, n):
    return n.run(ctx) if isinstance(n, FusedNode) else OPS[n.op_type].fn(ctx, n)


def _output(value):
    """A graph output as the caller gets it: a tensor, a list (a sequence) or None (an empty optional)."""
    if isinstance(value, Sequence):
        return [_output(v) for v in value]
    return None if value is None else as_tensor(value)


def run_graph(graph, inputs):
    """The graph's outputs for ``inputs`` (name -> tp.Tensor, or a ``Sequence`` or None for the
    inputs that are sequences or optionals)."""
    ctx = Context(graph, _run_node)
    ctx.env.update(inputs)
    ctx.run()
    return [_output(ctx.get(name)) for name, _, _ in graph.outputs]

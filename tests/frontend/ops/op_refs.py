"""The conformance matrix's references: for each public elementwise, comparison and reduction op,
how to call it, its numpy answer (in float64 for floats, in the exact integer dtype otherwise),
which operand values are legal (negatives and zeros wherever they are), and the dtype its result
must have. Which dtypes each op is tested with is NOT here: it comes from the core's rules
(tripy.frontend.ops.dtype_rules); the result dtypes below are the independent expectation
(numpy's, and Tripy's documented rules) that the core is checked against.

Every call is a one-line lambda, so an error test can assert the exact line a message names."""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

import tripy as tp

_erf = np.vectorize(math.erf, otypes=[np.float64])


@dataclass
class Row:
    name: str  # the matrix's id for the row
    rule: str  # the core op (or dtype_rules.COMPOSITES name) whose accepted dtypes are tested
    kind: str  # "unary", "binary", "reduce", "where", "cast"
    call: object  # tripy tensors (and variant args) -> tensor
    ref: object  # numpy arrays (and variant args) -> array
    domains: tuple = ("any",)  # operand value domains (see _gen in the test)
    result: object = None  # input dtype -> result dtype; None: the input's dtype
    exact: bool = False  # results must be bit-exact (correctly rounded or integral)
    variants: list = field(default_factory=lambda: [()])  # extra args for call/ref (reductions)
    empty_ok: bool = True  # the op is defined on no elements (max of nothing is not)
    rule_input: int = 0  # which input of `rule` the tested dtype is (where: 1, the values)


def _bool(dtype):
    return tp.bool


UNARY = [
    Row("exp", "exp", "unary", lambda x: tp.exp(x), np.exp),
    Row("expm1", "expm1", "unary", lambda x: tp.expm1(x), np.expm1),
    Row("log", "log", "unary", lambda x: tp.log(x), np.log, ("pos",)),
    Row("sin", "sin", "unary", lambda x: tp.sin(x), np.sin),
    Row("cos", "cos", "unary", lambda x: tp.cos(x), np.cos),
    Row("sqrt", "sqrt", "unary", lambda x: tp.sqrt(x), np.sqrt, ("pos",)),
    Row("rsqrt", "rsqrt", "unary", lambda x: tp.rsqrt(x), lambda x: 1 / np.sqrt(x), ("pos",)),
    Row("tanh", "tanh", "unary", lambda x: tp.tanh(x), np.tanh),
    Row("sigmoid", "sigmoid", "unary", lambda x: tp.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
    Row("erf", "erf", "unary", lambda x: tp.erf(x), _erf),
    Row("gelu", "gelu", "unary", lambda x: tp.gelu(x), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    Row("silu", "silu", "unary", lambda x: tp.silu(x), lambda x: x / (1 + np.exp(-x))),
    Row("floor", "floor", "unary", lambda x: tp.floor(x), np.floor, exact=True),
    Row("ceil", "ceil", "unary", lambda x: tp.ceil(x), np.ceil, exact=True),
    Row("round", "round", "unary", lambda x: tp.round(x), np.round, exact=True),  # half to even
    Row("abs", "abs", "unary", lambda x: abs(x), np.abs, exact=True),
    Row("neg", "neg", "unary", lambda x: -x, np.negative, exact=True),
    Row("sign", "sign", "unary", lambda x: tp.sign(x), np.sign, exact=True),
    Row("relu", "relu", "unary", lambda x: tp.relu(x), lambda x: np.maximum(x, 0), exact=True),
    Row("logical_not", "logical_not", "unary", lambda x: ~x, np.logical_not, exact=True),
]

BINARY = [
    Row("add", "add", "binary", lambda a, b: a + b, np.add, ("any", "any"), exact=True),
    Row("sub", "sub", "binary", lambda a, b: a - b, np.subtract, ("any", "any"), exact=True),
    Row("mul", "mul", "binary", lambda a, b: a * b, np.multiply, ("any", "any"), exact=True),
    Row("div", "div", "binary", lambda a, b: a / b, np.divide, ("any", "divisor")),
    Row("pow", "pow", "binary", lambda a, b: a**b, np.power, ("any", "exponent")),
    Row("maximum", "maximum", "binary", lambda a, b: tp.maximum(a, b), np.maximum, ("any", "any"), exact=True),
    Row("minimum", "minimum", "binary", lambda a, b: tp.minimum(a, b), np.minimum, ("any", "any"), exact=True),
    # Python's floor semantics for // and % (the remainder takes the divisor's sign), as numpy.
    Row("floor_div", "floor_div", "binary", lambda a, b: a // b, np.floor_divide, ("any", "divisor")),
    Row("mod", "mod", "binary", lambda a, b: a % b, np.mod, ("any", "divisor")),
    Row("logical_and", "logical_and", "binary", lambda a, b: a & b, np.logical_and, ("any", "any"), exact=True),
    Row("logical_or", "logical_or", "binary", lambda a, b: a | b, np.logical_or, ("any", "any"), exact=True),
    Row("eq", "eq", "binary", lambda a, b: a == b, np.equal, ("any", "any"), _bool, True),
    Row("ne", "ne", "binary", lambda a, b: a != b, np.not_equal, ("any", "any"), _bool, True),
    Row("lt", "lt", "binary", lambda a, b: a < b, np.less, ("any", "any"), _bool, True),
    Row("le", "le", "binary", lambda a, b: a <= b, np.less_equal, ("any", "any"), _bool, True),
    Row("gt", "gt", "binary", lambda a, b: a > b, np.greater, ("any", "any"), _bool, True),
    Row("ge", "ge", "binary", lambda a, b: a >= b, np.greater_equal, ("any", "any"), _bool, True),
    Row("clamp", "clamp", "binary", lambda a, b: tp.clamp(a, b, None), np.maximum, ("any", "any"), exact=True),
]


def _sum_dtype(dtype):
    # Integer sums and products accumulate in int64; int8 returns int64 as numpy and torch do.
    return tp.int64 if dtype == tp.int8 else dtype


def _quiet(fn):
    """numpy's answer without its warnings: the mean of nothing and the variance of one element
    are NaN, which is what the matrix checks."""

    def ref(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args, **kwargs)

    return ref


_np_var = _quiet(lambda x, axis, keepdims: np.var(x, axis=axis, keepdims=keepdims, ddof=1))
_np_mean = _quiet(np.mean)


def _np_softmax(x, axis):
    if x.size == 0:
        return x
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _axis(x, dim):
    # A reduction over dim 0 or -1 of a rank-0 tensor is over all of its (no) dims, as numpy's None.
    return None if x.ndim == 0 else dim


# (dim, keepdim) variants of each reduction: over the first dim (the dynamic one when compiled),
# over the last keeping it, over all dims.
_DIMS = [(0, False), (-1, True), (None, False)]


def _reduction(name, np_fn, result=None, empty_ok=True):
    call = lambda x, dim, keepdim: getattr(tp, name)(x, dim=dim, keepdim=keepdim)  # noqa: E731
    ref = lambda x, dim, keepdim: np_fn(x, axis=_axis(x, dim), keepdims=keepdim)  # noqa: E731
    return Row(name, name, "reduce", call, ref, result=result, variants=_DIMS, empty_ok=empty_ok)


def _np_arg(fn):
    return lambda x, axis, keepdims: fn(x, axis=axis, keepdims=keepdims).astype(np.int32)


REDUCE = [
    _reduction("sum", np.sum, _sum_dtype),
    _reduction("prod", np.prod, _sum_dtype),
    _reduction("max", np.max, empty_ok=False),
    _reduction("min", np.min, empty_ok=False),
    _reduction("mean", _np_mean),
    _reduction("var", _np_var),
    _reduction("all", np.all),
    _reduction("any", np.any),
    # The first index of the extreme, as numpy (ties are common in the matrix's values).
    _reduction("argmax", _np_arg(np.argmax), lambda d: tp.int32, empty_ok=False),
    _reduction("argmin", _np_arg(np.argmin), lambda d: tp.int32, empty_ok=False),
    Row("softmax", "softmax", "reduce", lambda x, dim: tp.softmax(x, dim=dim),
        lambda x, dim: _np_softmax(x, _axis(x, dim)), variants=[(0,), (-1,), (None,)]),
    Row("log_softmax", "log_softmax", "reduce", lambda x, dim: tp.log_softmax(x, dim=dim),
        lambda x, dim: np.log(_np_softmax(x, _axis(x, dim))), variants=[(0,), (-1,), (None,)]),
]

OTHER = [
    Row("where", "where", "where", lambda c, a, b: tp.where(c, a, b), np.where, ("bool", "any", "any"), exact=True,
        rule_input=1),
    Row("masked_fill", "masked_fill", "where", lambda c, a, b: tp.masked_fill(b, c, a), np.where,
        ("bool", "any", "any"), exact=True),
]

ROWS = UNARY + BINARY + REDUCE + OTHER

# Ops of the core's table that the matrix leaves to their own tests (shapes, layout, heavy
# kernels), each with the file that tests it against numpy.
ELSEWHERE = {
    "all_gather": "test_sharding.py (between the ranks of a tp.DeviceMesh)",
    "all_reduce": "test_sharding.py (between the ranks of a tp.DeviceMesh)",
    "cast": "test_op_matrix.py (the cast matrix)",
    "concatenate": "test_ops_conformance.py",
    "convolution": "test_conv.py",
    "cumsum": "test_scan.py",
    "dequantize": "test_quantize.py",
    "expand": "test_ops_conformance.py",
    "flip": "test_split_flip.py",
    "full": "test_ops_conformance.py",
    "gather": "test_ops_conformance.py",
    "iota": "test_ops_conformance.py",
    "groupnorm": "test_norm.py",
    "instancenorm": "test_norm.py",
    "layernorm": "test_row_reductions.py",
    "matmul": "test_matmul_shapes.py",
    "pad": "test_pad.py",
    "permute": "test_ops_conformance.py",
    "plugin": "test_plugin.py",
    "pooling": "test_pooling.py",
    "quantize": "test_quantize.py",
    "reduce_scatter": "test_sharding.py (between the ranks of a tp.DeviceMesh)",
    "reshape": "test_ops_conformance.py",
    "resize": "test_resize.py",
    "rmsnorm": "test_norm.py",
    "sample": "test_sample.py",
    "scaled_dot_product_attention": "test_attention.py",
    "shape_dim": "test_dimension_size.py",
    "slice": "test_dynamic_slices.py",
    "split_part": "test_split_flip.py",
    "squeeze": "test_ops_conformance.py",
    "topk_indices": "test_scan.py",
    "topk_values": "test_scan.py",
    "unpack_int4": "test_weight_only_dot.py (pack_int4 and unpack_int4 against numpy's packing)",
    "unsqueeze": "test_ops_conformance.py",
    "update_slice": "test_update_slice.py",
}

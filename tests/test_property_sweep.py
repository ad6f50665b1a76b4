"""A seeded random sweep of values a hostile user reaches. Each case draws an op (elementwise
unary and binary ops, comparisons, where, a Python scalar operand, reductions, cumsum, softmax and
log_softmax, LayerNorm and RMSNorm, matmul), a dtype its rule accepts (tripy.frontend.ops.
dtype_rules: float32, float16, bfloat16, int8, int32, int64, bool), a shape (broadcasts, size-1
and size-0 dims, rank 0) and values mixing ordinary numbers with the dtype's extremes (+-inf, NaN,
+-0, the largest finite values, the smallest normal, subnormals, the integer limits). It runs
eagerly and through tp.compile (half the cases with a dynamic first dim; tp.InputInfo takes no
size-0 dim, so empty operands run eagerly only), on each device, and the result's dtype, shape
and values are checked against numpy.

The reference is computed in float64 (int64 for integers) from the exact operand values and
rounded once to the result dtype: the correctly rounded answer. What the checks allow:

- Exact ops (comparisons, max/min, where, abs, neg, sign, floor/ceil/round, float32 + - * / %
  and //, integer arithmetic, which wraps as numpy's does, argmax/argmin, integer sums, products
  and cumsums): bit-equal, NaN in the same places.
- Everything else: inf and NaN exactly where numpy has them, and for finite values
  |got - want| <= rtol * |want| + atol, where rtol is a few units in the last place (float32:
  8 ulp; a narrow float's one ulp more, for the float32 computation rounded to it) and atol the
  op's own error bound: for sums, means and cumsums 4 float32 ulp of sum(|x|); for var n ulp
  and the mean's error squared; for matmul 4 K ulp of |A| @ |B|; for softmax and log_softmax 8 ulp
  of the distance of x from the row's max; for LayerNorm of max|x| / sqrt(var + eps); plus the
  smallest normal of the result dtype (a subnormal result, or a GEMM that flushes subnormal
  products). A value within that tolerance of the largest finite one may be inf.
- Where a float32 accumulation could overflow in some order (sum(|x|), or a matmul product or
  sum of products, past float32's max) the value is not checked: float32 gives inf, NaN or a
  finite answer depending on the order of the additions and on fused multiply-adds, as numpy's
  and torch's float32 do.
- Products use values in [1/4, 4] besides 0, +-inf and NaN, so no order of multiplication leaves
  float32's range. LayerNorm and var use |x| <= 1e17: past that, float32's (x - mean)**2
  overflows, as numpy's and torch's float32 statistics do (RMSNorm takes every extreme).

A failing case is reported with its seed, op, dtype, shapes and values, and
`python tests/test_property_sweep.py SEED` reruns it alone. On the CPU the sweep (3,200 cases,
each eager and compiled) takes a few seconds on 2 cores; on a GPU fewer cases run, since each
new shape compiles its kernels with NVRTC."""

import math
import os
import sys
import warnings
import zlib

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.ops import dtype_rules

# Cases per family: on the CPU a case runs in about a millisecond; on a GPU each new shape and
# dtype compiles its kernels with NVRTC first. TRIPY_SWEEP_CASES sets both (a longer local run).
CASES = {"cpu": 400, "gpu": 24}
if os.environ.get("TRIPY_SWEEP_CASES"):
    CASES = dict.fromkeys(CASES, int(os.environ["TRIPY_SWEEP_CASES"]))
FLOATS = (tp.float32, tp.float16, tp.bfloat16)
INTS = (tp.int8, tp.int32, tp.int64)
NP = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: np.float32, tp.int8: np.int8,
      tp.int32: np.int32, tp.int64: np.int64, tp.bool: np.bool_}
# Unit in the last place at 1, the largest finite value, the smallest normal and subnormal.
ULP = {tp.float32: 2.0**-23, tp.float16: 2.0**-10, tp.bfloat16: 2.0**-7}
FMAX = {tp.float32: float(np.finfo(np.float32).max), tp.float16: 65504.0, tp.bfloat16: 3.3895313892515355e38}
TINY = {tp.float32: 2.0**-126, tp.float16: 2.0**-14, tp.bfloat16: 2.0**-126}
SUBNORMAL = {tp.float32: 2.0**-149, tp.float16: 2.0**-24, tp.bfloat16: 2.0**-133}
F32_MAX = FMAX[tp.float32]
EPS32 = 2.0**-23


# --- values --------------------------------------------------------------------------------------
def bf16_round(x):
    """float32 -> the nearest bfloat16 (ties to even), kept in float32: numpy has no bfloat16."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def rounded(x, dtype):
    """A numpy value as `dtype` holds it (bfloat16 as its float32 carrier)."""
    with np.errstate(all="ignore"):
        x = np.asarray(x)
        if dtype == tp.bfloat16:
            return bf16_round(x.astype(np.float32))
        return x.astype(NP[dtype])


def extremes(dtype, limit=None):
    if dtype == tp.bool:
        return [True, False]
    if dtype in INTS:
        info = np.iinfo(NP[dtype])
        return [info.min, info.max, info.min + 1, info.max - 1, 0, 1, -1]
    big = FMAX[dtype] if limit is None else min(limit, FMAX[dtype])
    return [math.inf, -math.inf, math.nan, big, -big, big / 3, TINY[dtype], -TINY[dtype], SUBNORMAL[dtype],
            -3 * SUBNORMAL[dtype], 0.0, -0.0, 1.0, -1.0]


def values(rng, dtype, shape, share, limit=None, pool=None):
    """Random values of `dtype`: ordinary numbers, with `share` of them drawn from the extremes
    (or from `pool`)."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == tp.bool:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype in INTS:
        info = np.iinfo(NP[dtype])
        v = np.where(rng.random(n) < 0.5, rng.integers(-9, 10, n), rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True))
    else:
        v = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)
    special = np.array(pool if pool is not None else extremes(dtype, limit), dtype=np.float64 if dtype in FLOATS else np.int64)
    pick = rng.random(n) < share
    v = np.where(pick, special[rng.integers(0, len(special), n)], v)
    if limit is not None and dtype in FLOATS:
        v = np.where(np.isfinite(v), np.clip(v, -limit, limit), v)
    return rounded(v.reshape(shape), dtype)


def to_tensor(x, dtype):
    t = tp.Tensor(np.array(x, order="C"))
    if dtype == tp.bfloat16:
        t = tp.cast(t, tp.bfloat16)
        t.eval()
    return t


def read(t):
    """A result as a numpy array (bfloat16 as float32, which holds it exactly)."""
    if t.dtype == tp.bfloat16:
        t = tp.cast(t, tp.float32)
    return np.asarray(t)


def random_shape(rng, rank=None, low=1):
    rank = int(rng.integers(0, 4)) if rank is None else rank
    return tuple(int(d) for d in rng.integers(low, 6, rank))


def broadcast_partner(rng, shape):
    """A shape that broadcasts with `shape`: dims dropped from the front, some set to 1."""
    drop = int(rng.integers(0, len(shape) + 1)) if shape else 0
    return tuple(1 if rng.random() < 0.3 else d for d in shape[drop:])


# --- checking ------------------------------------------------------------------------------------
def check(got, want, dtype, *, exact=False, rtol=None, atol=0.0, unchecked=None):
    """None if `got` is `want` within the module's rules, else what differs."""
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if dtype not in FLOATS:  # integers and bools compare as themselves (int64 past 2**53 too)
        bad = got != want
    elif exact:
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol = (8 * EPS32 if dtype == tp.float32 else ULP[dtype] + 8 * EPS32) if rtol is None else rtol
        atol = np.asarray(atol, dtype=np.float64) + TINY[dtype]
        finite = np.isfinite(w)
        with np.errstate(all="ignore"):
            allowed = rtol * np.abs(w) + atol
            close = (np.abs(g - w) <= allowed) & np.isfinite(g)
            # A value within the tolerance of the largest finite one may round to inf.
            close |= np.isinf(g) & (np.sign(g) == np.sign(w)) & (np.abs(w) + allowed >= FMAX[dtype])
        bad = np.where(finite, ~close, ~((g == w) | (np.isnan(g) & np.isnan(w))))
    if unchecked is not None:
        bad = bad & ~np.broadcast_to(unchecked, bad.shape)
    if np.any(bad):
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return f"{int(np.sum(bad))} of {bad.size} values differ; at {i}: got {got[i]!r}, expected {want[i]!r}"
    return None


class Case:
    """One random case: a function of tripy tensors, its operands, and numpy's answer."""

    def __init__(self, what, fn, operands, dtypes, want, out_dtype, dynamic_ok=True, **check_args):
        self.what, self.fn, self.operands, self.dtypes = what, fn, operands, dtypes
        self.want, self.out_dtype, self.dynamic_ok, self.check_args = want, out_dtype, dynamic_ok, check_args

    def describe(self):
        ops = "; ".join(f"{dt.name}{tuple(o.shape)} {np.array2string(np.asarray(o).ravel()[:12], precision=8)}"
                        for o, dt in zip(self.operands, self.dtypes))
        return f"{self.what} of {ops}"

    def run(self, mode, rng):
        args = [to_tensor(o, dt) for o, dt in zip(self.operands, self.dtypes)]
        if mode == "eager":
            out = self.fn(*args)
        else:
            dynamic = self.dynamic_ok and rng.random() < 0.5
            infos = []
            for o, dt in zip(self.operands, self.dtypes):
                dims = list(o.shape)
                if dynamic and dims and dims[0] > 0:
                    dims[0] = (1, dims[0], dims[0] + 2)
                infos.append(tp.InputInfo(tuple(dims), dt))
            out = tp.compile(self.fn, args=infos)(*args)
        if out.dtype != self.out_dtype:
            return f"dtype {out.dtype}, expected {self.out_dtype}"
        return check(read(out), self.want, self.out_dtype, **self.check_args)


def ref(fn, *xs):
    """numpy's answer in float64 (floats) from the exact operand values."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # means of nothing, var without degrees of freedom
        return fn(*[x.astype(np.float64) if x.dtype in (np.float16, np.float32) else x for x in xs])


# --- families ------------------------------------------------------------------------------------
UNARY = {  # name: (tripy, numpy, exact)
    "abs": (lambda x: abs(x), np.abs, True),
    "neg": (lambda x: -x, np.negative, True),
    "sign": (lambda x: tp.sign(x), np.sign, True),
    "floor": (lambda x: tp.floor(x), np.floor, True),
    "ceil": (lambda x: tp.ceil(x), np.ceil, True),
    "round": (lambda x: tp.round(x), np.round, True),
    "relu": (lambda x: tp.relu(x), lambda x: np.maximum(x, 0), True),
    "exp": (lambda x: tp.exp(x), np.exp, False),
    "log": (lambda x: tp.log(x), np.log, False),
    "sqrt": (lambda x: tp.sqrt(x), np.sqrt, False),
    "rsqrt": (lambda x: tp.rsqrt(x), lambda x: 1 / np.sqrt(x), False),
    "tanh": (lambda x: tp.tanh(x), np.tanh, False),
    "sigmoid": (lambda x: tp.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), False),
    "expm1": (lambda x: tp.expm1(x), np.expm1, False),
    "sin": (lambda x: tp.sin(x), np.sin, False),
    "cos": (lambda x: tp.cos(x), np.cos, False),
    "erf": (lambda x: tp.erf(x), np.vectorize(math.erf, otypes=[np.float64]), False),
    "silu": (lambda x: tp.silu(x), lambda x: x / (1 + np.exp(-x)), False),
}


def unary_case(rng, share):
    name = str(rng.choice(sorted(UNARY)))
    call, np_fn, exact = UNARY[name]
    dtype = rng.choice([d for d in dtype_rules.accepted(name) if d in FLOATS + INTS])
    x = values(rng, dtype, random_shape(rng), share)
    want = rounded(ref(np_fn, x), dtype)
    return Case(name, call, [x], [dtype], want, dtype, exact=exact)


BINARY = {  # name: (tripy, numpy, exact for floats)
    "add": (lambda a, b: a + b, np.add, True),
    "sub": (lambda a, b: a - b, np.subtract, True),
    "mul": (lambda a, b: a * b, np.multiply, True),
    "div": (lambda a, b: a / b, np.divide, True),
    "pow": (lambda a, b: a**b, np.power, False),
    "mod": (lambda a, b: a % b, np.remainder, True),
    "floor_div": (lambda a, b: a // b, np.floor_divide, True),
    "maximum": (lambda a, b: tp.maximum(a, b), np.maximum, True),
    "minimum": (lambda a, b: tp.minimum(a, b), np.minimum, True),
    "eq": (lambda a, b: a == b, np.equal, True),
    "ne": (lambda a, b: a != b, np.not_equal, True),
    "lt": (lambda a, b: a < b, np.less, True),
    "le": (lambda a, b: a <= b, np.less_equal, True),
    "gt": (lambda a, b: a > b, np.greater, True),
    "ge": (lambda a, b: a >= b, np.greater_equal, True),
    "logical_and": (lambda a, b: a & b, np.logical_and, True),
    "logical_or": (lambda a, b: a | b, np.logical_or, True),
}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"}


def binary_case(rng, share):
    name = str(rng.choice(sorted(BINARY)))
    call, np_fn, exact = BINARY[name]
    dtype = rng.choice([d for d in dtype_rules.accepted(name) if d in FLOATS + INTS + (tp.bool,)])
    sa = random_shape(rng, low=0 if rng.random() < 0.1 else 1)
    sb = broadcast_partner(rng, sa)
    if rng.random() < 0.5:
        sa, sb = sb, sa
    a, b = values(rng, dtype, sa, share), values(rng, dtype, sb, share)
    out_dtype = tp.bool if name in COMPARISONS else dtype
    if dtype in INTS and name not in COMPARISONS:
        with np.errstate(all="ignore"):
            want = np_fn(a, b)  # wraps, as documented; x // 0 and x % 0 are 0, as numpy's
    else:
        want = rounded(ref(np_fn, a, b), out_dtype)
    # float32 + - * / % // are correctly rounded (% and // follow numpy's rules, fmod-based);
    # a narrow float computes in float32 and rounds again.
    exact = (exact and dtype == tp.float32) or name in COMPARISONS or name in ("maximum", "minimum")
    if rng.random() < 0.25 and b.size and name not in ("logical_and", "logical_or"):
        # A Python scalar operand takes the tensor's dtype (it must fit it, which these do).
        scalar = b.ravel()[0].item()
        if dtype in FLOATS and not math.isfinite(scalar):
            scalar = float(scalar)
        b_full = np.full((), b.ravel()[0], dtype=b.dtype)
        with np.errstate(all="ignore"):
            want = np_fn(a, b_full) if dtype in INTS and name not in COMPARISONS else rounded(ref(np_fn, a, b_full), out_dtype)
        return Case(f"{name} by the Python scalar {scalar!r}", lambda x: call(x, scalar), [a], [dtype], want, out_dtype,
                    dynamic_ok=False, exact=exact)
    return Case(name, call, [a, b], [dtype, dtype], want, out_dtype, dynamic_ok=False, exact=exact)


WHERE_DTYPES = FLOATS + INTS + (tp.bool,)


def where_case(rng, share):
    dtype = rng.choice(WHERE_DTYPES)
    shape = random_shape(rng)
    c = values(rng, tp.bool, broadcast_partner(rng, shape), share)
    a, b = values(rng, dtype, shape, share), values(rng, dtype, broadcast_partner(rng, shape), share)
    return Case("where", lambda p, x, y: tp.where(p, x, y), [c, a, b], [tp.bool, dtype, dtype], np.where(c, a, b), dtype,
                dynamic_ok=False, exact=True)


def _reduce_dims(rng, rank):
    if rank == 0 or rng.random() < 0.2:
        return None
    k = int(rng.integers(1, rank + 1))
    return tuple(sorted(int(d) for d in rng.choice(rank, k, replace=False)))


def _kw(dims, keepdim):
    return {"dim": (dims if len(dims) > 1 else dims[0]) if dims is not None else None, "keepdim": keepdim}


def _unchecked_sum(x, dims, keepdim):
    """Where a float32 sum may overflow in some order: sum(|x|) past float32's max."""
    with np.errstate(all="ignore"):
        bound = np.sum(np.abs(x.astype(np.float64)), axis=dims, keepdims=keepdim)
    return bound > F32_MAX, bound


def reduction_case(rng, share):
    name = str(rng.choice(["sum", "mean", "var", "max", "min", "prod", "argmax", "argmin", "any", "all"]))
    dtypes = [d for d in dtype_rules.accepted(name) if d in FLOATS + INTS + (tp.bool,)]
    dtype = rng.choice(dtypes)
    # Sums, products, means and any/all of no elements are their identities (or NaN); max, min
    # and the args of no elements are errors (tests/frontend/test_numeric_edges.py).
    empty_ok = name in ("sum", "mean", "var", "prod", "any", "all")
    shape = random_shape(rng, low=0 if empty_ok and rng.random() < 0.1 else 1)
    if name in ("argmax", "argmin"):
        dims = None if not shape or rng.random() < 0.3 else (int(rng.integers(0, len(shape))),)
    else:
        dims = _reduce_dims(rng, len(shape))
    keepdim = bool(rng.random() < 0.5) and name not in ("argmax", "argmin")
    pool = None
    if name == "prod" and dtype in FLOATS:
        pool = [math.inf, -math.inf, math.nan, 0.0, -0.0, 0.25, -4.0, 1.0]
    x = values(rng, dtype, shape, share, pool=pool, limit=1e17 if name == "var" else None)
    if name == "prod" and dtype in FLOATS:
        x = rounded(np.where(np.isfinite(x) & (x != 0), np.clip(np.abs(x), 0.25, 4.0) * np.sign(x), x), dtype)
    axis = dims
    kw = _kw(dims, keepdim)
    args = {}
    if name in ("argmax", "argmin"):
        call = lambda t: getattr(tp, name)(t, dim=dims[0] if dims else None)
        want = getattr(np, name)(x, axis=dims[0] if dims else None)
        return Case(name, call, [x], [dtype], np.asarray(want, dtype=np.int32), tp.int32, exact=True)
    call = lambda t: getattr(tp, name)(t, **kw)
    if name in ("any", "all"):
        want = getattr(np, name)(x, axis=axis, keepdims=keepdim)
        return Case(name, call, [x], [dtype], want, tp.bool, exact=True)
    if dtype in INTS and name in ("sum", "prod"):
        out_dtype = tp.int64 if dtype == tp.int8 else dtype
        with np.errstate(all="ignore"):
            want = getattr(np, name)(x, axis=axis, keepdims=keepdim, dtype=np.int64).astype(NP[out_dtype])
        return Case(name, call, [x], [dtype], want, out_dtype, exact=True)
    np_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
             "var": lambda v, **kw: np.var(v, ddof=1, **kw)}[name]
    want = rounded(ref(lambda v: np_fn(v, axis=axis, keepdims=keepdim), x), dtype)
    if name == "var":
        # Two passes: relative error about n ulp, plus the mean's error squared.
        with np.errstate(all="ignore"):
            big = np.max(np.abs(x.astype(np.float64)), axis=axis, keepdims=keepdim, initial=0.0)
        n = x.size if axis is None else int(np.prod([x.shape[d] for d in axis]))
        return Case(name, call, [x], [dtype], want, dtype, rtol=ULP[dtype] + 4 * (n + 2) * EPS32,
                    atol=np.where(np.isfinite(big), 16 * (EPS32 * big) ** 2, 0))
    if name in ("max", "min"):
        return Case(name, call, [x], [dtype], want, dtype, exact=True)
    if name == "prod":
        n = x.size if axis is None else int(np.prod([x.shape[d] for d in axis]))
        return Case(name, call, [x], [dtype], want, dtype, rtol=ULP[dtype] + 2 * n * EPS32)
    unchecked, bound = _unchecked_sum(x, axis, keepdim)
    n = max(1, x.size if axis is None else int(np.prod([x.shape[d] for d in axis])))
    atol = 4 * EPS32 * bound / (n if name == "mean" else 1)
    return Case(name, call, [x], [dtype], want, dtype, atol=np.where(unchecked, 0, atol), unchecked=unchecked)


def cumsum_case(rng, share):
    dtype = rng.choice(FLOATS + INTS)
    shape = random_shape(rng, rank=int(rng.integers(1, 4)))
    dim = int(rng.integers(0, len(shape)))
    x = values(rng, dtype, shape, share)
    call = lambda t: tp.cumsum(t, dim=dim)
    if dtype in INTS:
        out_dtype = tp.int64 if dtype == tp.int8 else dtype
        with np.errstate(all="ignore"):
            want = np.cumsum(x, axis=dim, dtype=np.int64).astype(NP[out_dtype])
        return Case("cumsum", call, [x], [dtype], want, out_dtype, exact=True)
    want = rounded(ref(lambda v: np.cumsum(v, axis=dim), x), dtype)
    with np.errstate(all="ignore"):
        bound = np.cumsum(np.abs(x.astype(np.float64)), axis=dim)
    return Case("cumsum", call, [x], [dtype], want, dtype, atol=np.where(bound > F32_MAX, 0, 4 * EPS32 * bound),
                unchecked=bound > F32_MAX)


def softmax_case(rng, share):
    name = str(rng.choice(["softmax", "log_softmax"]))
    dtype = rng.choice(FLOATS)
    shape = random_shape(rng, rank=int(rng.integers(1, 4)))
    dim = int(rng.integers(0, len(shape)))
    x = values(rng, dtype, shape, share)
    call = lambda t: getattr(tp, name)(t, dim=dim)

    def np_ref(v):
        m = np.max(v, axis=dim, keepdims=True)
        shifted = v - m
        lse = np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
        return np.exp(shifted - lse) if name == "softmax" else shifted - lse

    want = rounded(ref(np_ref, x), dtype)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        spread = np.abs(x64 - np.max(x64, axis=dim, keepdims=True))
    # float32 rounds x - max with a relative error: exp(x - max) carries it times |x - max|.
    if name == "softmax":
        atol = 8 * EPS32 * np.where(np.isfinite(spread), np.minimum(spread, 200.0), 0) * np.abs(want.astype(np.float64))
    else:
        atol = 8 * EPS32 * (np.where(np.isfinite(spread), spread, 0) + 4)
    return Case(name, call, [x], [dtype], want, dtype, atol=atol)


def _affine_module(cls, n, dtype, rng, **kw):
    m = cls(n, dtype=dtype, **kw)
    w = rounded(rng.uniform(-2, 2, n), dtype)
    m.weight = to_tensor(w, dtype)
    b = None
    if hasattr(m, "bias"):
        b = rounded(rng.uniform(-2, 2, n), dtype)
        m.bias = to_tensor(b, dtype)
    return m, w.astype(np.float64), (b.astype(np.float64) if b is not None else 0.0)


def norm_case(rng, share):
    name = str(rng.choice(["layernorm", "rmsnorm"]))
    dtype = rng.choice(FLOATS)
    shape = random_shape(rng, rank=int(rng.integers(1, 4)))
    n = shape[-1]
    eps = float(rng.choice([1e-5, 1e-6, 0.0])) if name == "rmsnorm" else 1e-5
    limit = 1e17 if name == "layernorm" else None
    x = values(rng, dtype, shape, share, limit=limit)
    if name == "layernorm":
        module, w, b = _affine_module(tp.LayerNorm, n, dtype, rng)
    else:
        module, w, b = _affine_module(tp.RMSNorm, n, dtype, rng, eps=eps)

    def np_ref(v):
        if name == "layernorm":
            mu = np.mean(v, axis=-1, keepdims=True)
            return (v - mu) / np.sqrt(np.var(v, axis=-1, keepdims=True) + 1e-5) * w + b
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * w

    want = rounded(ref(np_ref, x), dtype)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "layernorm":
            mu = np.mean(x64, axis=-1, keepdims=True)
            cond = np.max(np.abs(x64), axis=-1, keepdims=True) / np.sqrt(np.var(x64, axis=-1, keepdims=True) + 1e-5)
            atol = 16 * EPS32 * np.where(np.isfinite(cond), cond, 0) * np.abs(w) * n + 4 * EPS32 * np.abs(b)
        else:
            atol = 0.0
    # A dynamic first dim must not be the normalised one.
    return Case(name, lambda t: module(t), [x], [dtype], want, dtype, dynamic_ok=len(shape) > 1, atol=atol,
                rtol=(ULP[dtype] + 32 * EPS32))


def matmul_case(rng, share):
    dtype = rng.choice(FLOATS)
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    batch = () if rng.random() < 0.5 else (int(rng.integers(1, 3)),)
    a = values(rng, dtype, batch + (m, k), share)
    b = values(rng, dtype, (k, n) if rng.random() < 0.5 else batch + (k, n), share)
    want = rounded(ref(np.matmul, a, b), dtype)
    with np.errstate(all="ignore"):
        products = a.astype(np.float64)[..., :, :, None] * b.astype(np.float64)[..., None, :, :]
        finite = np.isfinite(products)
        bound = np.sum(np.where(finite, np.abs(products), 0.0), axis=-2)
        # A product past float32's range is inf, or not, by whether the GEMM fuses the multiply
        # and the add (inf + -inf is NaN, but FMA(x, y, -inf) is -inf): not checked there.
        unchecked = np.any(finite & (np.abs(products) > F32_MAX), axis=-2) | (bound > F32_MAX)
    # A product of two subnormals, or the sum of subnormal products, may be flushed by the
    # GEMM (oneDNN, cuBLAS): k times the smallest normal.
    atol = np.where(unchecked, 0, 4 * k * EPS32 * bound + k * TINY[tp.float32])
    return Case("matmul", lambda p, q: p @ q, [a, b], [dtype, dtype], want, dtype, dynamic_ok=False,
                atol=atol, unchecked=unchecked)


FAMILIES = {
    "unary": unary_case,
    "binary": binary_case,
    "reduction": reduction_case,
    "cumsum": cumsum_case,
    "softmax": softmax_case,
    "norm": norm_case,
    "matmul": matmul_case,
    "where": where_case,
}


def run_case(seed):
    """Builds case `seed` and runs it eagerly and compiled: a list of failure descriptions."""
    rng = np.random.default_rng(seed)
    family = sorted(FAMILIES)[seed % len(FAMILIES)]
    share = float(rng.choice([0.0, 0.15, 0.5, 1.0]))
    case = FAMILIES[family](rng, share)
    failures = []
    # tp.InputInfo takes no dim of size 0: empty operands run eagerly only.
    modes = ("eager", "compiled") if all(o.size for o in case.operands) else ("eager",)
    for mode in modes:
        try:
            problem = case.run(mode, rng)
        except tp.TripyException as err:
            problem = "raised " + " | ".join(line.strip() for line in str(err).splitlines() if line.strip())[:400]
        if problem:
            failures.append(f"seed {seed} ({mode}): {case.describe()}: {problem}")
    return failures


def seeds_for(family, device):
    base = zlib.crc32(f"{family}/{device}".encode()) & 0xFFFFFF
    k = sorted(FAMILIES).index(family)
    n = len(FAMILIES)
    return [((base + i) * n + k) for i in range(CASES[device])]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_cases_match_numpy(family, device):
    failures = []
    for seed in seeds_for(family, device):
        failures += run_case(seed)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:10])


def test_the_sweep_draws_extremes_of_every_kind():
    # The generator reaches what the module says it does (a sweep of ordinary numbers passes
    # trivially): inf, NaN, subnormals, float32's max and int64's limits, in a few draws.
    rng = np.random.default_rng(0)
    f = np.concatenate([values(rng, tp.float32, (64,), 0.5) for _ in range(4)]).astype(np.float64)
    assert np.isposinf(f).any() and np.isneginf(f).any() and np.isnan(f).any()
    assert (np.abs(f) == F32_MAX).any() and ((np.abs(f) > 0) & (np.abs(f) < 2.0**-126)).any()
    i = values(rng, tp.int64, (256,), 0.5)
    assert (i == np.iinfo(np.int64).min).any() and (i == np.iinfo(np.int64).max).any()


if __name__ == "__main__":
    for s in sys.argv[1:]:
        print("\n".join(run_case(int(s))) or f"seed {s}: ok")

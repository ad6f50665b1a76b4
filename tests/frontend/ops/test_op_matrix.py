"""The op x dtype x device x static/dynamic conformance matrix, generated: the ops and their
references come from op_refs.py, the dtypes each op is tested with from the core's own rules
(tripy.frontend.ops.dtype_rules). Every accepted dtype is run eagerly over broadcasting on either
side, size-1, empty and rank-0 shapes and Python scalars, then compiled once with static and once
with dynamic shapes (run at the minimum, opt and maximum sizes); the result's dtype, shape and
values are checked against numpy. The same sweep runs with constant operands (tp.full, tp.ones, an
expanded scalar) instead of data. Every rejected dtype must raise an error naming the call."""

import os
import zlib

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.ops import dtype_rules

from op_refs import ELSEWHERE, ROWS

DTYPES = [tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64, tp.bool]
NP = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: np.float32, tp.int8: np.int8,
      tp.int32: np.int32, tp.int64: np.int64, tp.bool: np.bool_}
# Relative tolerance of inexact results (about 2 units in the last place), scaled by the operands'
# magnitude for sums: float32 ops against float64, narrow floats against float64 rounded to them.
RTOL = {tp.float32: 2e-5, tp.float16: 2e-3, tp.bfloat16: 1.6e-2}
TIES = np.array([-2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5])


def bf16_round(x):
    """float32 -> the nearest bfloat16 (ties to even), kept in float32: numpy has no bfloat16."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def to_dtype(x, dtype):
    """A numpy value as `dtype` holds it (floats narrower than float32 rounded, kept as carrier)."""
    x = np.asarray(x)
    if dtype == tp.bfloat16:
        return bf16_round(x.astype(np.float32))
    return x.astype(NP[dtype])


# --- operand values ------------------------------------------------------------------------------
# Leading entries are the cases mutations hide behind: 7 // -1, ties for comparisons and argmax,
# zeros, negatives, halves for round-to-even, NaN (which propagates through maximum and the
# reductions and compares unequal, as in numpy).
SPECIAL = {
    "any": {"f": [7.0, -7.0, 0.0, 2.5, -0.5, 1.5, np.nan], "i": [7, -7, 0, -1, 5, 3], "b": [True, False, True]},
    "divisor": {"f": [-1.0, 2.0, -3.0, 0.5, 1.0, -0.5], "i": [-1, 2, -3, 1, -7, 7], "b": [True]},
    "exponent": {"f": [2.0, -1.0, 0.0, 3.0, 1.0, -2.0], "i": [2, 1, 0, 3, 1, 2], "b": [True]},
    "pos": {"f": [1.0, 0.5, 2.0, 7.0, 0.25, 3.0], "i": [1, 2, 3], "b": [True]},
}


def gen(domain, dtype, shape, seed):
    """Operand values for `domain`, exactly representable in `dtype` (numpy carrier array)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if domain == "bool" or dtype == tp.bool:
        v = rng.integers(0, 2, n).astype(bool)
        k = min(n, 3)
        v[:k] = SPECIAL["any"]["b"][:k]
        return v.reshape(shape)
    if dtype in RTOL:
        if domain == "pos":
            v = rng.uniform(0.1, 4.0, n)
        elif domain == "exponent":
            v = rng.integers(-3, 4, n).astype(np.float64)
        else:
            v = np.where(rng.random(n) < 0.5, rng.choice(TIES, n), rng.standard_normal(n) * 2)
            if domain == "divisor":
                v = np.where(np.abs(v) < 0.25, 1.25, v)
        special = SPECIAL[domain]["f"]
    else:
        lo, hi = (-11, 12) if dtype == tp.int8 else (-20, 21)
        v = np.where(rng.random(n) < 0.5, rng.integers(-3, 4, n), rng.integers(lo, hi, n))
        if domain == "divisor":
            v = np.where(v == 0, 3, v)
        elif domain == "exponent":
            v = rng.integers(0, 4, n)
        elif domain == "pos":
            v = rng.integers(1, 9, n)
        special = SPECIAL[domain]["i"]
    k = min(n, len(special))
    v[:k] = special[:k]
    return to_dtype(v.reshape(shape), dtype)


def tensor(x, dtype):
    """A tripy tensor of `dtype` holding the numpy carrier `x` (evaluated: a runtime input)."""
    t = tp.Tensor(np.array(x, order="C"))
    if dtype == tp.bfloat16:
        t = tp.cast(t, tp.bfloat16)
        t.eval()
    return t


def seed_of(*parts):
    return zlib.crc32(repr(parts).encode())


# --- checking ------------------------------------------------------------------------------------
def reference(row, operands, dtypes, extra):
    """numpy's answer as the result dtype holds it: floats computed in float64 from the exact
    operand values, then rounded once."""
    args = [o.astype(np.float64) if dt in RTOL else o for o, dt in zip(operands, dtypes)]
    out_dtype = row.result(dtypes[-1]) if row.result else dtypes[-1]
    with np.errstate(all="ignore"):  # overflow to inf included (a float16 product of sevens)
        return to_dtype(np.asarray(row.ref(*args, *extra)), out_dtype), out_dtype


def check(row, out, want, out_dtype, operands, what):
    assert out.dtype == out_dtype, f"{what}: dtype {out.dtype}, expected {out_dtype}"
    assert tuple(out.shape) == want.shape, f"{what}: shape {out.shape}, expected {want.shape}"
    got = np.array(out.tolist(), dtype=NP[out_dtype]).reshape(want.shape)
    if out_dtype not in RTOL or row.exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    scale = max([1.0] + [float(np.max(np.abs(o.astype(np.float64)))) for o in operands if o.size])
    rtol = RTOL[out_dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=what)


def dtypes_for(row, dtype):
    """The dtype of each operand when the row is tested with `dtype`."""
    return [tp.bool if d == "bool" else dtype for d in row.domains]


# --- the cases -----------------------------------------------------------------------------------
UNARY_SHAPES = [(3, 4), (), (0, 3), (1, 1)]
# Broadcasting on either side and on both, rank-0 on either side, size-1 and empty dims.
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (1, 4)), ((1, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)),
                 ((2, 3), ()), ((0, 4), (1, 4)), ((1, 0), (3, 1))]
REDUCE_SHAPES = [(3, 4), (1, 5), (0, 4), ()]
WHERE_SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((1, 4), (3, 4), ()), ((0, 4), (1, 4), (1, 4))]


def eager_cases(row):
    """(operand shapes, extra args) pairs of the eager sweep."""
    if row.kind == "unary":
        return [((s,), ()) for s in UNARY_SHAPES]
    if row.kind == "binary":
        return [(s, ()) for s in BINARY_SHAPES]
    if row.kind == "where":
        return [(s, ()) for s in WHERE_SHAPES]
    shapes = [s for s in REDUCE_SHAPES if row.empty_ok or 0 not in s]
    return [((s,), v) for s in shapes for v in row.variants]


def compiled_shapes(row, n):
    """Operand shapes of the compiled case with first dim `n`: one call per output."""
    if row.kind in ("unary", "reduce"):
        return [((n, 4),)]
    if row.kind == "binary":
        # right, left and two-sided broadcasting, and a rank-0 operand
        return [((n, 4), (1, 4)), ((1, 4), (n, 4)), ((n, 1), (1, 4)), ((), (n, 4))]
    return [((n, 4), (n, 4), (1, 4)), ((n, 1), (1, 4), ())]


def params():
    out = []
    for row in ROWS:
        for dtype in dtype_rules.accepted(row.rule, row.rule_input):
            if dtype in DTYPES:
                out.append(pytest.param(row, dtype, id=f"{row.name}-{dtype.name}"))
    return out


PARAMS = params()


@pytest.mark.parametrize("row,dtype", PARAMS)
def test_eager_matches_numpy(row, dtype, device):
    dts = dtypes_for(row, dtype)
    for shapes, extra in eager_cases(row):
        ops = [gen(d, dt, s, seed_of(row.name, dt.name, s, i)) for i, (d, dt, s) in enumerate(zip(row.domains, dts, shapes))]
        want, out_dtype = reference(row, ops, dts, extra)
        out = row.call(*[tensor(o, dt) for o, dt in zip(ops, dts)], *extra)
        check(row, out, want, out_dtype, ops, f"{row.name}{tuple(shapes)}{extra}")


@pytest.mark.parametrize("row,dtype", [p for p in PARAMS if p.values[0].kind == "binary"])
def test_python_scalars_on_either_side(row, dtype, device):
    # A Python number becomes a tensor of the other operand's dtype: 7 // -1, 7 - x, ...
    kind = "f" if dtype in RTOL else "b" if dtype == tp.bool else "i"
    a = gen(row.domains[0], dtype, (2, 3), seed_of(row.name, "left"))
    b = gen(row.domains[1], dtype, (2, 3), seed_of(row.name, "right"))
    right, left = SPECIAL[row.domains[1]][kind][0], SPECIAL[row.domains[0]][kind][0]
    for x, y, side in ((a, right, "right"), (left, b, "left")):
        ops = [to_dtype(v, dtype) for v in (x, y)]
        want, out_dtype = reference(row, ops, [dtype, dtype], ())
        out = row.call(tensor(x, dtype), y) if side == "right" else row.call(x, tensor(y, dtype))
        check(row, out, want, out_dtype, ops, f"{row.name} with the Python scalar {right if side == 'right' else left} on the {side}")


def _compile(row, dtype, dynamic, extra_list):
    dts = dtypes_for(row, dtype)
    per_call = compiled_shapes(row, "N")
    n_dim = ((1, 3, 5),) if dynamic else (3,)
    infos = []
    for shapes in per_call:
        for dt, s in zip(dts, shapes):
            dims = tuple(n_dim[0] if d == "N" else d for d in s)
            infos.append(tp.InputInfo(dims, dt))
    arity = len(row.domains)

    def fn(*xs):
        outs = []
        for i in range(len(per_call)):
            args = xs[i * arity : (i + 1) * arity]
            outs += [row.call(*args, *extra) for extra in extra_list]
        return tuple(outs)

    return tp.compile(fn, args=infos)


@pytest.mark.parametrize("row,dtype", PARAMS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_matches_numpy(row, dtype, dynamic, device):
    extra_list = row.variants
    exe = _compile(row, dtype, dynamic, extra_list)
    dts = dtypes_for(row, dtype)
    for n in (1, 3, 5) if dynamic else (3,):  # the minimum, opt and maximum sizes
        per_call = compiled_shapes(row, n)
        arrays = [[gen(d, dt, s, seed_of(row.name, dt.name, s, n, i)) for i, (d, dt, s) in enumerate(zip(row.domains, dts, shapes))]
                  for shapes in per_call]
        outs = exe(*[tensor(o, dt) for ops in arrays for o, dt in zip(ops, dts)])
        outs = iter(outs if isinstance(outs, tuple) else (outs,))
        for ops, shapes in zip(arrays, per_call):
            for extra in extra_list:
                want, out_dtype = reference(row, ops, dts, extra)
                check(row, next(outs), want, out_dtype, ops, f"{row.name}{tuple(shapes)}{extra}, n={n}")


# --- constant operands ---------------------------------------------------------------------------
# The same ops with every operand a constant fill instead of data: tp.full, tp.ones, or a rank-0
# tensor expanded. Fused kernels compute such operands inline (no load), constant folding may
# evaluate the whole op, and a reduction over one varies only per row: softmax(tp.ones(...)) once
# built a kernel that stored a per-row value into an element output.
CONSTANT_FORMS = ["full", "ones", "expanded_scalar"]


def constant_fill(form, domain, dtype, i):
    """The carrier value operand `i` is filled with: legal in `domain`, differing between operands."""
    if form == "ones":
        return to_dtype(True if dtype == tp.bool else 1, dtype)
    kind = "f" if dtype in RTOL else "b" if dtype == tp.bool else "i"
    special = SPECIAL["any" if domain == "bool" else domain][kind]
    return to_dtype(special[i % len(special)], dtype)


def constant_tensor(form, value, dtype, shape):
    """A tripy tensor of `shape` (sizes may be DimensionSizes) filled with the carrier `value`."""
    number = bool(value) if dtype == tp.bool else float(value) if dtype in RTOL else int(value)
    if form == "full":
        return tp.full(shape, int(number) if dtype == tp.bool else number, dtype)
    if form == "ones":
        return tp.ones(shape, dtype)
    scalar = tp.Tensor(np.array(value, dtype=np.float32 if dtype == tp.bfloat16 else NP[dtype]))
    if dtype == tp.bfloat16:
        scalar = tp.cast(scalar, tp.bfloat16)
    return tp.expand(scalar, shape) if len(shape) else scalar


@pytest.mark.parametrize("row,dtype", PARAMS)
@pytest.mark.parametrize("form", CONSTANT_FORMS)
def test_eager_constant_operands_match_numpy(row, dtype, form, device):
    dts = dtypes_for(row, dtype)
    for shapes, extra in eager_cases(row):
        fills = [constant_fill(form, d, dt, i) for i, (d, dt) in enumerate(zip(row.domains, dts))]
        ops = [np.full(s, v, dtype=v.dtype) for s, v in zip(shapes, fills)]
        want, out_dtype = reference(row, ops, dts, extra)
        out = row.call(*[constant_tensor(form, v, dt, s) for v, dt, s in zip(fills, dts, shapes)], *extra)
        check(row, out, want, out_dtype, ops, f"{row.name}{tuple(shapes)}{extra} of {form} operands")


@pytest.mark.parametrize("row,dtype", PARAMS)
@pytest.mark.parametrize("form", CONSTANT_FORMS)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compiled_constant_operands_match_numpy(row, dtype, form, dynamic, device):
    # The operands' first dim is the input's (dynamic: a runtime size), their values constants.
    dts = dtypes_for(row, dtype)
    fills = [constant_fill(form, d, dt, i) for i, (d, dt) in enumerate(zip(row.domains, dts))]

    def fn(x):
        n = x.shape[0]
        outs = []
        for shapes in compiled_shapes(row, "N"):
            args = [constant_tensor(form, v, dt, tuple(n if d == "N" else d for d in s)) for v, dt, s in zip(fills, dts, shapes)]
            outs += [row.call(*args, *extra) for extra in row.variants]
        return tuple(outs)

    exe = tp.compile(fn, args=[tp.InputInfo(((1, 3, 5) if dynamic else 3, 4), tp.float32)])
    for n in (1, 3, 5) if dynamic else (3,):
        outs = exe(tp.Tensor(np.zeros((n, 4), np.float32)))
        outs = iter(outs if isinstance(outs, tuple) else (outs,))
        for shapes in compiled_shapes(row, n):
            ops = [np.full(s, v, dtype=v.dtype) for s, v in zip(shapes, fills)]
            for extra in row.variants:
                want, out_dtype = reference(row, ops, dts, extra)
                check(row, next(outs), want, out_dtype, ops, f"{row.name}{tuple(shapes)}{extra} of {form} operands, n={n}")


# --- cast: every dtype to every dtype --------------------------------------------------------
CASTS = [(a, b) for a in dtype_rules.accepted("cast") for b in dtype_rules.accepted("cast") if a in DTYPES and b in DTYPES]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{a.name}-{b.name}" for a, b in CASTS])
def test_cast_matches_numpy(src, dst, device):
    # Values inside every dtype's range; float -> int truncates toward zero, as numpy's astype
    # (NaN has no integer value: it is left out there; NaN -> bool is True, as in numpy).
    x = gen("any", src, (3, 4), seed_of("cast", src.name))
    if src in RTOL and dst in (tp.int8, tp.int32, tp.int64):
        x = to_dtype(np.clip(np.nan_to_num(x), -100, 100), src)
    want = to_dtype(x.astype(np.float64) if src in RTOL else x, dst)
    exe = tp.compile(lambda t: tp.cast(t, dst), args=[tp.InputInfo(((1, 3, 5), 4), src)])
    for out in (tp.cast(tensor(x, src), dst), exe(tensor(x, src))):
        assert out.dtype == dst
        np.testing.assert_array_equal(np.array(out.tolist(), dtype=NP[dst]).reshape(want.shape), want)


# --- errors --------------------------------------------------------------------------------------
HERE = os.path.dirname(__file__)


def _rejected():
    out = []
    for row in ROWS:
        accepted = dtype_rules.accepted(row.rule, row.rule_input)
        for dtype in DTYPES:
            if dtype not in accepted:
                out.append(pytest.param(row, dtype, id=f"{row.name}-{dtype.name}"))
    return out


def _names_call_line(err, row):
    code = row.call.__code__
    where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno} "
    assert where in str(err), f"the error should name {where}:\n{err}"


@pytest.mark.parametrize("row,dtype", _rejected())
def test_rejected_dtypes_raise_naming_the_call(row, dtype):
    dts = dtypes_for(row, dtype)
    ops = [tensor(gen(d, dt, (2, 2), 0), dt) for d, dt in zip(row.domains, dts)]
    with pytest.raises(tp.TripyException, match="data type") as e:
        row.call(*ops, *row.variants[0])
    _names_call_line(e.value, row)
    assert dtype.name in str(e.value)


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind == "binary"], ids=lambda r: r.name)
def test_mixed_dtypes_raise_naming_the_call(row):
    accepted = dtype_rules.accepted(row.rule)
    if len(accepted) < 2:
        pytest.skip("one dtype only")
    a, b = accepted[0], accepted[-1]
    with pytest.raises(tp.TripyException, match="Mismatched data types") as e:
        row.call(tensor(gen("any", a, (2,), 0), a), tensor(gen("any", b, (2,), 0), b))
    _names_call_line(e.value, row)


def test_every_op_of_the_core_table_is_in_the_matrix_or_tested_elsewhere():
    covered = {dtype_rules.COMPOSITES.get(r.rule, (r.rule,))[0] for r in ROWS} | {r.rule for r in ROWS}
    missing = sorted(set(dtype_rules.op_dtypes()) - covered - set(ELSEWHERE))
    assert not missing, f"ops without a conformance row (add one to op_refs.py): {missing}"
    # ...and every row is tested with at least one dtype (a row whose rule accepts none tests nothing).
    assert all(dtype_rules.accepted(r.rule, r.rule_input) for r in ROWS)

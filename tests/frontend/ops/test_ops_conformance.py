"""The conformance harness: each op against numpy, in eager mode and compiled with static and
with dynamic shapes, on every available device."""

import math

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.ops.layernorm import _layernorm as _layernorm_op

RNG = np.random.default_rng(0)
_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layernorm(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


# name -> (tripy function, numpy reference, number of inputs, input generator)
def _rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _pos(shape):
    return RNG.uniform(0.5, 3.0, shape).astype(np.float32)


UNARY = {
    "exp": (tp.exp, np.exp, _rand),
    "expm1": (tp.expm1, np.expm1, _rand),
    "log": (tp.log, np.log, _pos),
    "sin": (tp.sin, np.sin, _rand),
    "cos": (tp.cos, np.cos, _rand),
    "sqrt": (tp.sqrt, np.sqrt, _pos),
    "rsqrt": (tp.rsqrt, lambda x: 1 / np.sqrt(x), _pos),
    "tanh": (tp.tanh, np.tanh, _rand),
    "sigmoid": (tp.sigmoid, lambda x: 1 / (1 + np.exp(-x)), _rand),
    "relu": (tp.relu, lambda x: np.maximum(x, 0), _rand),
    "gelu": (tp.gelu, _gelu, _rand),
    "silu": (tp.silu, lambda x: x / (1 + np.exp(-x)), _rand),
    "erf": (tp.erf, _erf, _rand),
    "floor": (tp.floor, np.floor, _rand),
    "ceil": (tp.ceil, np.ceil, _rand),
    "abs": (abs, np.abs, _rand),
    "neg": (lambda x: -x, np.negative, _rand),
    "softmax": (lambda x: tp.softmax(x, dim=-1), _softmax, _rand),
    "sum": (lambda x: tp.sum(x, dim=-1), lambda x: x.sum(-1), _rand),
    "mean": (lambda x: tp.mean(x, dim=1, keepdim=True), lambda x: x.mean(1, keepdims=True), _rand),
    "max": (lambda x: tp.max(x, dim=0), lambda x: x.max(0), _rand),
    "min": (lambda x: tp.min(x), lambda x: x.min(), _rand),
    "var": (lambda x: tp.var(x, dim=-1), lambda x: x.var(-1, ddof=1), _rand),
    "argmax": (lambda x: tp.argmax(x, dim=1), lambda x: x.argmax(1).astype(np.int32), _rand),
    "transpose": (lambda x: tp.transpose(x, 0, 1), lambda x: x.T, _rand),
    "reshape": (lambda x: tp.reshape(x, (-1,)), lambda x: x.reshape(-1), _rand),
    "slice": (lambda x: x[:, 1:3], lambda x: x[:, 1:3], _rand),
    "flip": (lambda x: tp.flip(x, dim=1), lambda x: x[:, ::-1], _rand),
    "unsqueeze": (lambda x: tp.unsqueeze(x, 1), lambda x: x[:, None], _rand),
    "concat": (lambda x: tp.concatenate([x, x * 2.0], dim=1), lambda x: np.concatenate([x, x * 2], 1), _rand),
    "layernorm": (lambda x: _layernorm_op(x, tp.ones((4,)), tp.zeros((4,)), 1, 1e-5), _layernorm, _rand),
}

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (tp.maximum, np.maximum),
    "minimum": (tp.minimum, np.minimum),
    "pow": (lambda a, b: abs(a) ** b, lambda a, b: np.abs(a) ** b),
    "lt": (lambda a, b: a < b, np.less),
    "eq": (lambda a, b: a == b, np.equal),
    "matmul_t": (lambda a, b: a @ tp.transpose(b, 0, 1), lambda a, b: a @ b.T),
}


def _check(out, ref):
    # numpy < 1.25 cannot import bool through DLPack; tolist is the portable path.
    use_dlpack = out.device == tp.device("cpu") and out.dtype != tp.bool
    got = np.from_dlpack(out) if use_dlpack else np.array(out.tolist())
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype == bool or np.issubdtype(ref.dtype, np.integer):
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)


SHAPE = (3, 4)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_unary_matches_numpy(name, mode, device):
    fn, ref, gen = UNARY[name]
    x = gen(SHAPE)
    if mode == "eager":
        _check(fn(tp.Tensor(x)), ref(x))
        return
    dims = SHAPE if mode == "static" else ((1, 3, 5), 4)
    exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])
    _check(exe(tp.Tensor(x)), ref(x))
    if mode == "dynamic":
        x5 = gen((5, 4))
        _check(exe(tp.Tensor(x5)), ref(x5))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_binary_matches_numpy(name, mode, device):
    fn, ref = BINARY[name]
    a, b = _rand(SHAPE), _rand((1, 4)) if not name.startswith("matmul") else _rand((5, 4))
    if mode == "eager":
        _check(fn(tp.Tensor(a), tp.Tensor(b)), ref(a, b))
        return
    dims = SHAPE if mode == "static" else ((1, 3, 5), 4)
    exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32), tp.InputInfo(b.shape, dtype=tp.float32)])
    _check(exe(tp.Tensor(a), tp.Tensor(b)), ref(a, b))
    if mode == "dynamic":
        a1 = _rand((1, 4))
        _check(exe(tp.Tensor(a1), tp.Tensor(b)), ref(a1, b))


@pytest.mark.parametrize("dtype,np_dtype", [(tp.int32, np.int32), (tp.int64, np.int64)])
def test_integer_arithmetic_matches_numpy(dtype, np_dtype, device):
    a = RNG.integers(-20, 20, SHAPE).astype(np_dtype)
    b = RNG.integers(1, 7, SHAPE).astype(np_dtype)
    ta, tb = tp.Tensor(a), tp.Tensor(b)
    _check(ta + tb, a + b)
    _check(ta * tb, a * b)
    _check(ta // tb, a // b)
    _check(ta % tb, a % b)
    _check(tp.maximum(ta, tb), np.maximum(a, b))
    _check(tp.cast(ta, tp.float32), a.astype(np.float32))


def test_batched_matmul_broadcasts_batch_dims(device):
    a, b = _rand((2, 3, 4)), _rand((4, 5))
    _check(tp.Tensor(a) @ tp.Tensor(b), a @ b)
    c = _rand((1, 4, 2))
    _check(tp.Tensor(a) @ tp.Tensor(c), a @ c)
    v = _rand((4,))
    _check(tp.Tensor(a) @ tp.Tensor(v), a @ v)


def test_where_and_gather(device):
    x = _rand(SHAPE)
    cond = x > 0
    _check(tp.where(tp.Tensor(cond), tp.Tensor(x), tp.zeros(SHAPE)), np.where(cond, x, 0))
    idx = np.array([2, 0], dtype=np.int32)
    _check(tp.gather(tp.Tensor(x), 0, tp.Tensor(idx)), x[idx])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_gather_out_of_range_is_an_error_naming_the_call(compiled, device):
    x = _rand((4, 3))
    gather = lambda x, i: tp.gather(x, 0, i)  # noqa: E731
    if compiled:
        gather = tp.compile(gather, args=[tp.InputInfo((4, 3), tp.float32), tp.InputInfo((2,), tp.int32)])
    with pytest.raises(tp.TripyException, match=r"index 7 is out of bounds for axis 0 with size 4") as e:
        gather(tp.Tensor(x), tp.Tensor(np.array([1, 7], dtype=np.int32))).tolist()
    assert "test_ops_conformance.py" in str(e.value)
    # The executable stays usable, and negative indices count from the end.
    _check(gather(tp.Tensor(x), tp.Tensor(np.array([-1, 0], dtype=np.int32))), x[[-1, 0]])


def test_float16_round_trip(device):
    x = _rand(SHAPE)
    out = tp.cast(tp.cast(tp.Tensor(x), tp.float16) * 2.0, tp.float32)
    np.testing.assert_allclose(np.from_dlpack(out) if device == "cpu" else np.array(out.tolist()), x * 2, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype,lo,hi", [(tp.int8, -128, 127), (tp.int4, -8, 7)])
def test_per_channel_quantize_round_trips_like_numpy(dtype, lo, hi, device):
    x = _rand((3, 4)) * 4
    scale = np.array([0.05, 0.1, 0.5], dtype=np.float32)
    q = tp.quantize(tp.Tensor(x), tp.Tensor(scale), dtype, dim=0)
    ref_q = np.clip(np.round(x / scale[:, None]), lo, hi)
    np.testing.assert_array_equal(np.array(q.tolist()), ref_q)
    back = tp.dequantize(q, tp.Tensor(scale), tp.float32, dim=0)
    np.testing.assert_allclose(np.array(back.tolist()), ref_q * scale[:, None], rtol=1e-6)


def test_var_over_a_dynamic_reduced_dim(device):
    f = tp.compile(lambda x: tp.var(x, dim=0), args=[tp.InputInfo(((2, 3, 6), 4), tp.float32)])
    for n in (2, 5):
        x = _rand((n, 4))
        _check(f(tp.Tensor(x)), x.var(0, ddof=1))

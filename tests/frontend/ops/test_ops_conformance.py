"""Layout, creation and composite ops against numpy, in eager mode and compiled with static and
with dynamic shapes, on every available device (float32; the elementwise, comparison and
reduction ops run over every dtype in the generated matrix, test_op_matrix.py)."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.ops.layernorm import _layernorm as _layernorm_op

RNG = np.random.default_rng(0)


def _layernorm(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def _rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


# Elementwise ops, comparisons and reductions are in the generated matrix (test_op_matrix.py);
# these are the layout ops and composites it leaves out, float32, against numpy.
UNARY = {
    "transpose": (lambda x: tp.transpose(x, 0, 1), lambda x: x.T, _rand),
    "permute": (lambda x: tp.permute(x[:, None, :], (2, 0, 1)), lambda x: x[:, None, :].transpose(2, 0, 1), _rand),
    "reshape": (lambda x: tp.reshape(x, (-1,)), lambda x: x.reshape(-1), _rand),
    "flatten": (lambda x: tp.flatten(x[:, None, :]), lambda x: x.reshape(-1), _rand),
    "slice": (lambda x: x[:, 1:3], lambda x: x[:, 1:3], _rand),
    "flip": (lambda x: tp.flip(x, dim=1), lambda x: x[:, ::-1], _rand),
    "unsqueeze": (lambda x: tp.unsqueeze(x, 1), lambda x: x[:, None], _rand),
    "squeeze": (lambda x: tp.squeeze(x[:, None, :, None], (1, 3)), lambda x: x, _rand),
    "expand": (lambda x: tp.expand(x[:, None, :], (-1, 2, -1)), lambda x: np.broadcast_to(x[:, None, :], (x.shape[0], 2, 4)), _rand),
    "concat": (lambda x: tp.concatenate([x, x * 2.0], dim=1), lambda x: np.concatenate([x, x * 2], 1), _rand),
    "layernorm": (lambda x: _layernorm_op(x, tp.ones((4,)), tp.zeros((4,)), 1, 1e-5), _layernorm, _rand),
    "leaky_relu": (lambda x: tp.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x), _rand),
    "cumsum": (lambda x: tp.cumsum(x, dim=0), lambda x: np.cumsum(x, 0), _rand),
    "full_like": (lambda x: tp.full_like(x, -2.5), lambda x: np.full_like(x, -2.5), _rand),
    "iota_like": (lambda x: tp.iota_like(x, dim=0), lambda x: np.broadcast_to(np.arange(x.shape[0], dtype=np.float32)[:, None], x.shape), _rand),
}

BINARY = {
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
    a, b = _rand(SHAPE), _rand((5, 4))
    if mode == "eager":
        _check(fn(tp.Tensor(a), tp.Tensor(b)), ref(a, b))
        return
    dims = SHAPE if mode == "static" else ((1, 3, 5), 4)
    exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32), tp.InputInfo(b.shape, dtype=tp.float32)])
    _check(exe(tp.Tensor(a), tp.Tensor(b)), ref(a, b))
    if mode == "dynamic":
        a1 = _rand((1, 4))
        _check(exe(tp.Tensor(a1), tp.Tensor(b)), ref(a1, b))


# The same ops on constant inputs instead of data: what fused kernels compute inline and constant
# folding may evaluate whole. In compiled functions the first dim is the (dummy) input's.
CONSTANT_FILLS = {
    "full": (lambda shape: tp.full(shape, -1.5), -1.5),
    "ones": (lambda shape: tp.ones(shape), 1.0),
    "expanded_scalar": (lambda shape: tp.expand(tp.Tensor(2.5), shape), 2.5),
}


def _run_on_constants(fn, ref, shapes, form, mode):
    make, value = CONSTANT_FILLS[form]
    wants = lambda n: ref(*[np.full((n, *s[1:]), value, np.float32) for s in shapes])  # noqa: E731
    if mode == "eager":
        _check(fn(*[make(s) for s in shapes]), wants(shapes[0][0]))
        return
    # Every input's first dim is the batch: the dummy input's first dim.
    exe = tp.compile(lambda x: fn(*[make((x.shape[0], *s[1:])) for s in shapes]),
                     args=[tp.InputInfo((SHAPE[0] if mode == "static" else (1, 3, 5), 1), dtype=tp.float32)])
    for n in (1, 3, 5) if mode == "dynamic" else (SHAPE[0],):
        _check(exe(tp.Tensor(np.zeros((n, 1), np.float32))), wants(n))


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("form", sorted(CONSTANT_FILLS))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_unary_on_constant_input_matches_numpy(name, form, mode, device):
    fn, ref, _ = UNARY[name]
    _run_on_constants(fn, ref, [SHAPE], form, mode)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("form", sorted(CONSTANT_FILLS))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_binary_on_constant_inputs_matches_numpy(name, form, mode, device):
    fn, ref = BINARY[name]
    _run_on_constants(fn, ref, [SHAPE, SHAPE], form, mode)


def test_batched_matmul_broadcasts_batch_dims(device):
    a, b = _rand((2, 3, 4)), _rand((4, 5))
    _check(tp.Tensor(a) @ tp.Tensor(b), a @ b)
    c = _rand((1, 4, 2))
    _check(tp.Tensor(a) @ tp.Tensor(c), a @ c)
    v = _rand((4,))
    _check(tp.Tensor(a) @ tp.Tensor(v), a @ v)


def test_gather(device):
    x = _rand(SHAPE)
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

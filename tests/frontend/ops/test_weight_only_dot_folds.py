"""A weight-only product computes what comes before and after it where the backend's kernels do:
tp.RMSNorm's result as x (flat::normed_weight_only_dot) and add(product, r) of a product read by
that add alone (flat::residual_weight_only_dot) on the CPU everywhere, and on the GPU at one row
of int4 or float8 weights (the K-sliced one-row tile: one of the two a product) and at 9 to 16
rows of int4 or int8 weights (the few-rows tile), bfloat16 x with K and the group whole chunks;
a SwiGLU's SiLU(gate) * up read by the down product (flat::gated_weight_only_dot) on the CPU, and
written by the gate_up product (flat::gate_weight_only_output) on the CPU and on the GPU at one
row of int4, int8 or float8 weights and at 9 to 16 of int4 or int8. Each becomes the product's own
work, its kernel gone.
Checked against numpy in float64 of the same quantization: float32, bfloat16 and float16, one to
300 rows, rows whose squares overflow or underflow float32, and the forms that only look alike,
which keep their kernels."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

from test_weight_only_dot import K, RNG, _check, _kernels, _linear, _rounded, _run



def _folds(dtype, rows, bits, group):
    """Whether the default device's products take a norm or a residual at this product (at one row
    on the GPU, one of the two)."""
    if default_device().kind == "cpu":
        return True
    chunk = 128 if bits == 4 else 64  # the K-sliced tiles' chunk of a weight row: 64 bytes
    chunks = (group or K) // chunk
    return (dtype == tp.bfloat16 and (rows == 1 and bits == 4 or 9 <= rows <= 16 and bits in (4, 8))
            and K % chunk == 0 and (group or K) % chunk == 0 and (group is None or chunks & (chunks - 1) == 0))


def _gates(dtype, rows, bits, group):
    """Whether the default device's gate_up products write SiLU(gate) * up of their halves (on the
    GPU at one row or 9 to 16 of bfloat16 x with K and the group whole chunks)."""
    if default_device().kind == "cpu":
        return True
    return (rows == 1 or 9 <= rows <= 16) and _folds(dtype, 9, bits, group)


def _norm(dtype, eps=1e-5):
    """A tp.RMSNorm over K features with a weight rounded to `dtype`, and that weight in float64."""
    norm = tp.RMSNorm(K, dtype=dtype, eps=eps)
    gamma = _rounded(RNG.uniform(0.5, 1.5, K), dtype)
    norm.load_state_dict({"weight": tp.cast(tp.Tensor(gamma.astype(np.float32)), dtype)})
    return norm, gamma


def _rms(x, gamma, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * gamma


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16, tp.float16])
@pytest.mark.parametrize("rows", [1, 3, 16, 300])
@pytest.mark.parametrize("bits, group", [(4, 64), (4, 128), (8, None)])
def test_the_rmsnorm_before_a_product_is_computed_by_it(dtype, rows, bits, group):
    """lin(norm(x)): the product normalizes x's rows itself, in float32 (the normalized x is not
    rounded to the dtype first), and the norm's kernel is gone."""
    lin, w = _linear(bits, group, bits == 4, dtype)
    norm, gamma = _norm(dtype)
    exe = tp.compile(lambda x: lin(norm(x)), args=[tp.InputInfo((rows, K), dtype=dtype)])
    folds = _folds(dtype, rows, bits, group)
    assert _kernels(exe) == (["weight_only_dot"] if folds else ["fused", "weight_only_dot"]), exe._impl.program_text
    assert ("norm = true" in exe._impl.program_text) == folds
    x = _rounded(RNG.standard_normal((rows, K)) * 3, dtype).astype(np.float32)
    _check(_run(exe, x, dtype), _rms(x, gamma, 1e-5) @ w.T, dtype)


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("batch", [(2, 3), (1, 1), (4, 3)])
def test_the_residual_after_a_product_is_added_by_it(dtype, batch):
    """r + lin(x) of (B, T, K) values: the product adds r to its rounded result, as the add kernel
    would, and that kernel is gone."""
    lin, w = _linear(8, None, False, dtype)
    exe = tp.compile(lambda x, r: r + lin(x), args=[tp.InputInfo(batch + (K,), dtype=dtype), tp.InputInfo(batch + (w.shape[0],), dtype=dtype)])
    folds = _folds(dtype, batch[0] * batch[1], 8, None)
    assert _kernels(exe) == (["weight_only_dot"] if folds else ["weight_only_dot", "fused"]), exe._impl.program_text
    x = _rounded(RNG.standard_normal(batch + (K,)), dtype).astype(np.float32)
    r = _rounded(RNG.standard_normal(batch + (w.shape[0],)), dtype).astype(np.float32)
    out = exe(*(tp.cast(tp.Tensor(v, device=default_device()), dtype) for v in (x, r)))
    got = np.array(tp.cast(out, tp.float32).tolist(), np.float64)
    _check(got, _rounded(x.astype(np.float64) @ w.T, dtype) + r, dtype)


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("rows", [1, 3, 16])
def test_a_swiglu_down_product_gates_its_x_and_adds_the_residual(dtype, rows):
    """h + down(silu(gate) * up), gate and up the halves of one value: on the CPU the product forms
    x from both halves (rounded to the dtype, as the SiLU's kernel would store it) and adds h, one
    kernel; on the GPU the gate keeps its kernel (the fold lost there), the residual as above."""
    down, w = _linear(4, 128, True, dtype)
    N = w.shape[0]

    def mlp(y, h):
        gate, up = tp.split(y, 2, dim=-1)
        return h + down(tp.silu(gate) * up)

    exe = tp.compile(mlp, args=[tp.InputInfo((rows, 2 * K), dtype=dtype), tp.InputInfo((rows, N), dtype=dtype)])
    gates = default_device().kind == "cpu"
    assert (_kernels(exe) == ["weight_only_dot"]) == gates, exe._impl.program_text
    assert ("residual = true" in exe._impl.program_text) == _folds(dtype, rows, 4, 128)
    y = _rounded(RNG.standard_normal((rows, 2 * K)), dtype).astype(np.float32)
    h = _rounded(RNG.standard_normal((rows, N)), dtype).astype(np.float32)
    out = exe(*(tp.cast(tp.Tensor(v, device=default_device()), dtype) for v in (y, h)))
    g, u = y[:, :K].astype(np.float64), y[:, K:].astype(np.float64)
    x = _rounded(g / (1.0 + np.exp(-g)) * u, dtype)
    _check(np.array(tp.cast(out, tp.float32).tolist(), np.float64), _rounded(x @ w.T, dtype) + h, dtype)


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("rows", [1, 3, 12])
@pytest.mark.parametrize("bits, group", [(4, 128), (8, None)])
@pytest.mark.parametrize("normed", [False, True])
def test_a_swiglu_gate_up_product_writes_silu_of_its_gate_times_its_up(dtype, rows, bits, group, normed):
    """silu(gate) * up of a product's two halves (35 outputs of 70 weight rows): the product writes
    it, each half rounded to the dtype as the product would store it, the SiLU's kernel gone; with
    an RMSNorm before the product, where the product also takes the norm."""
    lin, w = _linear(bits, group, bits == 4, dtype)
    norm, gamma = _norm(dtype)
    H = w.shape[0] // 2

    def mlp(x):
        gate, up = tp.split(lin(norm(x) if normed else x), 2, dim=-1)
        return tp.silu(gate) * up

    exe = tp.compile(mlp, args=[tp.InputInfo((rows, K), dtype=dtype)])
    text = exe._impl.program_text
    gates, norms = _gates(dtype, rows, bits, group), normed and _folds(dtype, rows, bits, group)
    assert ("gate_output = true" in text) == gates, text
    assert ("norm = true" in text) == norms, text
    assert (_kernels(exe) == ["weight_only_dot"]) == (gates and (norms or not normed)), text
    x = _rounded(RNG.standard_normal((rows, K)) * 3, dtype).astype(np.float32)
    y = _rounded((_rms(x, gamma, 1e-5) if normed else x.astype(np.float64)) @ w.T, dtype)
    g, u = y[:, :H], y[:, H:]
    _check(_run(exe, x, dtype), _rounded(g / (1.0 + np.exp(-g)) * u, dtype), dtype)


def test_the_gate_switch_leaves_the_swiglu_to_its_kernel(monkeypatch):
    """TRIPY_WEIGHT_ONLY_GATE=0: the SwiGLU keeps its kernel, the norm still folds."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_GATE", "0")
    lin, w = _linear(4, 128, True, tp.float32)
    norm, gamma = _norm(tp.float32)
    H = w.shape[0] // 2

    def mlp(x):
        gate, up = tp.split(lin(norm(x)), 2, dim=-1)
        return tp.silu(gate) * up

    exe = tp.compile(mlp, args=[tp.InputInfo((1, K), dtype=tp.float32)])
    text = exe._impl.program_text
    assert "gate_output = true" not in text
    assert ("norm = true" in text) == _folds(tp.float32, 1, 4, 128), text
    x = RNG.standard_normal((1, K)).astype(np.float32)
    y = _rms(x, gamma, 1e-5) @ w.T
    _check(_run(exe, x, tp.float32), y[:, :H] / (1.0 + np.exp(-y[:, :H])) * y[:, H:], tp.float32)


@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("rows", [1, 12])
def test_rows_whose_squares_overflow_or_underflow_are_normalized_exactly(dtype, eps, rows):
    """Rows of 1e25 (their squares past float32) and of 1e-25 (below it; with eps = 0 the norm's
    underflow guard is part of what the product computes) normalize as numpy does in float64."""
    lin, w = _linear(4, 128, True, dtype)
    norm, gamma = _norm(dtype, eps=eps)
    exe = tp.compile(lambda x: lin(norm(x)), args=[tp.InputInfo((rows, K), dtype=dtype)])
    assert ("norm = true" in exe._impl.program_text) == _folds(dtype, rows, 4, 128), exe._impl.program_text
    for magnitude in (1e25, 1e-25, 1.0):
        x = _rounded(RNG.standard_normal((rows, K)) * magnitude, dtype).astype(np.float32)
        _check(_run(exe, x, dtype), _rms(x, gamma, eps) @ w.T, dtype)


def test_the_switch_leaves_the_norm_and_the_add_to_kernels_of_their_own(monkeypatch):
    """TRIPY_WEIGHT_ONLY_FOLD=0: the norm and the residual add keep their kernels, for comparison."""
    monkeypatch.setenv("TRIPY_WEIGHT_ONLY_FOLD", "0")
    lin, w = _linear(4, 128, True, tp.float32)
    norm, gamma = _norm(tp.float32)
    exe = tp.compile(lambda x, r: r + lin(norm(x)), args=[tp.InputInfo((1, K), dtype=tp.float32), tp.InputInfo((1, w.shape[0]), dtype=tp.float32)])
    text = exe._impl.program_text
    assert "norm = true" not in text and "residual = true" not in text
    x = RNG.standard_normal((1, K)).astype(np.float32)
    r = RNG.standard_normal((1, w.shape[0])).astype(np.float32)
    out = exe(tp.Tensor(x, device=default_device()), tp.Tensor(r, device=default_device()))
    _check(np.array(out.tolist(), np.float64), _rms(x, gamma, 1e-5) @ w.T + r, tp.float32)


def _written_out_rms(x, gamma):
    return x * tp.rsqrt(tp.mean(x * x, dim=-1, keepdim=True) + 1e-5) * gamma


def test_forms_that_only_look_alike_keep_their_kernels():
    """An RMSNorm written out by hand (no guards), a LayerNorm, an RMSNorm over two trailing dims,
    and a product also returned on its own: each product keeps its x or its result, and the
    answers are right."""
    lin, w = _linear(4, 64, True, tp.float32)
    norm, gamma = _norm(tp.float32)
    g = tp.Tensor(gamma.astype(np.float32), device=default_device())
    layer_norm = tp.LayerNorm(K)
    layer_norm.load_state_dict({"weight": g, "bias": tp.zeros((K,))})
    two_dims = tp.RMSNorm((2, K // 2))
    two_dims.load_state_dict({"weight": tp.reshape(g, (2, K // 2))})
    x = RNG.standard_normal((2, K)).astype(np.float32)
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(-1, keepdims=True)
    cases = {
        "written out": (lambda v: lin(_written_out_rms(v, g)), _rms(x, gamma, 1e-5) @ w.T),
        "LayerNorm": (lambda v: lin(layer_norm(v)), _rms(centered, gamma, 1e-5) @ w.T),
        "two dims": (lambda v: lin(tp.reshape(two_dims(tp.reshape(v, (2, 2, K // 2))), (2, K))),
                     _rms(x, gamma, 1e-5) @ w.T),
    }
    for name, (model, want) in cases.items():
        exe = tp.compile(model, args=[tp.InputInfo((2, K), dtype=tp.float32)])
        assert "norm = true" not in exe._impl.program_text, name
        _check(_run(exe, x, tp.float32), want, tp.float32)

    # The product is an output too: the add cannot take its place.
    def both(v, r):
        p = lin(v)
        return p + r, p

    exe = tp.compile(both, args=[tp.InputInfo((2, K), dtype=tp.float32), tp.InputInfo((2, w.shape[0]), dtype=tp.float32)])
    assert "residual = true" not in exe._impl.program_text

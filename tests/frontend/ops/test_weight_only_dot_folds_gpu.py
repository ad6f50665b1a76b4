"""The GPU's folded norms, residual adds and SwiGLU outputs with x off a 16-byte boundary, against
numpy as with x aligned: at one row (the K-sliced one-row tile's fold entry points, a norm or a
residual, or a gated output) the CUDA-core fold then runs, at 9 to 16 rows the few-rows layout
reads x a value at a time. Skipped without a GPU or torch."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import off_by_one_element  # noqa: E402
from test_weight_only_dot import K, N, RNG, _check, _linear, _rounded  # noqa: E402
from test_weight_only_dot_folds import _norm, _rms  # noqa: E402


def _each_alignment(exe, x, *rest):
    """exe's output for x as given and for x one element off a 16-byte boundary (float64)."""
    xt = torch.tensor(x, dtype=torch.bfloat16, device="cuda")
    rest = [tp.Tensor(torch.tensor(v, dtype=torch.bfloat16, device="cuda")) for v in rest]
    for x_in in (xt, off_by_one_element(xt)):
        out = exe(tp.Tensor(x_in), *rest)
        yield torch.from_dlpack(out).float().cpu().numpy().astype(np.float64)


@pytest.mark.parametrize("rows", [9, 16])
@pytest.mark.parametrize("bits, group", [(4, 128), (8, None)])
def test_x_aligned_or_not_gives_the_folded_norm_and_residual(rows, bits, group):
    lin, w = _linear(bits, group, bits == 4, tp.bfloat16)
    norm, gamma = _norm(tp.bfloat16)
    N = w.shape[0]
    exe = tp.compile(lambda x, r: r + lin(norm(x)),
                     args=[tp.InputInfo((rows, K), dtype=tp.bfloat16), tp.InputInfo((rows, N), dtype=tp.bfloat16)])
    text = exe._impl.program_text
    assert "norm = true" in text and "residual = true" in text, text
    x = _rounded(RNG.standard_normal((rows, K)) * 3, tp.bfloat16)
    r = _rounded(RNG.standard_normal((rows, N)), tp.bfloat16)
    for got in _each_alignment(exe, x, r):
        _check(got, _rms(x, gamma, 1e-5) @ w.T + r, tp.bfloat16)


def _float8_linear():
    """A tp.Linear of float8 weights with a bfloat16 scale an output feature, and its weight [N, K]."""
    w8 = tp.cast(tp.Tensor(RNG.standard_normal((N, K)).astype(np.float32) * 50, device="gpu"), tp.float8)
    q = np.array(tp.cast(w8, tp.float32).tolist(), np.float64)
    scale = _rounded(RNG.uniform(0.002, 0.02, (N,)), tp.bfloat16)
    lin = tp.Linear(K, N, bias=False, dtype=tp.bfloat16, quant_dtype=tp.float8, weight_quant_dim=0)
    lin.load_state_dict({"weight": w8, "weight_scale": tp.cast(tp.Tensor(scale.astype(np.float32)), tp.bfloat16)})
    return lin, q * scale[:, None]


@pytest.mark.parametrize("weights", ["int4 groups of 128", "int4 one group a row", "float8"])
def test_one_row_folds_its_norm_or_its_residual_aligned_or_not(weights):
    """At one row each product takes one of the two: the norm before lin, then the residual after
    it (the norm's kernel gone from one program, the add's from the other)."""
    if weights == "float8":
        lin, w = _float8_linear()
    else:
        lin, w = _linear(4, 128 if weights.endswith("128") else K, True, tp.bfloat16)
    norm, gamma = _norm(tp.bfloat16)
    normed = tp.compile(lambda x: lin(norm(x)), args=[tp.InputInfo((1, K), dtype=tp.bfloat16)])
    added = tp.compile(lambda x, r: r + lin(x),
                       args=[tp.InputInfo((1, K), dtype=tp.bfloat16), tp.InputInfo((1, N), dtype=tp.bfloat16)])
    assert "norm = true" in normed._impl.program_text, normed._impl.program_text
    assert "residual = true" in added._impl.program_text, added._impl.program_text
    x = _rounded(RNG.standard_normal((1, K)) * 3, tp.bfloat16)
    r = _rounded(RNG.standard_normal((1, N)), tp.bfloat16)
    for got in _each_alignment(normed, x):
        _check(got, _rms(x, gamma, 1e-5) @ w.T, tp.bfloat16)
    for got in _each_alignment(added, x, r):
        _check(got, _rounded(x.astype(np.float64) @ w.T, tp.bfloat16) + r, tp.bfloat16)


@pytest.mark.parametrize("weights, rows", [("int4 groups of 128", 1), ("int8", 1), ("float8", 1),
                                           ("int4 groups of 128", 12), ("int8", 16)])
@pytest.mark.parametrize("normed", [False, True])
def test_a_gated_output_aligned_or_not(weights, rows, normed):
    """silu(gate) * up of a product's halves (35 outputs of 70 weight rows, the last tile partly
    past them), the norm before the product folded where the format folds it at those rows."""
    if weights == "float8":
        lin, w = _float8_linear()
    else:
        bits = 8 if weights == "int8" else 4
        lin, w = _linear(bits, 128 if bits == 4 else None, bits == 4, tp.bfloat16)
    norm, gamma = _norm(tp.bfloat16)
    H = w.shape[0] // 2

    def mlp(x):
        gate, up = tp.split(lin(norm(x) if normed else x), 2, dim=-1)
        return tp.silu(gate) * up

    exe = tp.compile(mlp, args=[tp.InputInfo((rows, K), dtype=tp.bfloat16)])
    text = exe._impl.program_text
    assert "gate_output = true" in text, text
    assert ("norm = true" in text) == (normed and (weights != "int8" or rows > 1)), text
    x = _rounded(RNG.standard_normal((rows, K)) * 3, tp.bfloat16)
    y = _rounded((_rms(x, gamma, 1e-5) if normed else x.astype(np.float64)) @ w.T, tp.bfloat16)
    want = _rounded(y[:, :H] / (1.0 + np.exp(-y[:, :H])) * y[:, H:], tp.bfloat16)
    for got in _each_alignment(exe, x):
        _check(got, want, tp.bfloat16)


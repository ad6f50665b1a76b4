"""Row reductions (softmax, LayerNorm, sum, max, var, argmax) over row lengths and row counts that
take every path of the fused row kernels: a warp per row, several rows per block with a partial
last block, wide loads, registers-held rows and rows too long for registers; against numpy."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.ops.layernorm import _layernorm

RNG = np.random.default_rng(7)


def host(t):
    """A tripy tensor's values as numpy, from either device."""
    return np.from_dlpack(tp.copy(t, "cpu"))

SHAPES = [(1, 1), (3, 7), (5, 32), (9, 33), (17, 128), (13, 255), (7, 256), (5, 257), (3, 1000), (2, 1024),
          (4, 4096), (3, 4100), (2, 8192), (2, 10000), (1, 70000)]


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b


CASES = {
    "softmax": (lambda x, w, b: tp.softmax(x, dim=-1), lambda x, w, b: np_softmax(x)),
    "layernorm": (lambda x, w, b: _layernorm(x, w, b, 1, 1e-5), np_layernorm),
    "sum": (lambda x, w, b: tp.sum(x * w, dim=-1), lambda x, w, b: (x * w).sum(-1)),
    "max": (lambda x, w, b: tp.max(x, dim=-1), lambda x, w, b: x.max(-1)),
    "var": (lambda x, w, b: tp.var(x, dim=-1), lambda x, w, b: x.var(-1, ddof=1) if x.shape[-1] > 1 else None),
    "argmax": (lambda x, w, b: tp.argmax(x, dim=-1), lambda x, w, b: x.argmax(-1)),
}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(CASES))
def test_row_reduction_matches_numpy(name, shape, device):
    make, ref = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    b = RNG.standard_normal(shape[-1]).astype(np.float32)
    want = ref(x.astype(np.float64), w, b)
    if want is None:
        pytest.skip("var with one element divides by zero")
    got = host(make(tp.Tensor(x), tp.Tensor(w), tp.Tensor(b)))
    if name == "argmax":
        np.testing.assert_array_equal(got, want)
    else:
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale * np.sqrt(shape[-1]))


@pytest.mark.parametrize("shape", [(5, 33), (9, 256), (3, 4096), (2, 10000)], ids=lambda s: "x".join(map(str, s)))
def test_float16_layernorm_softmax_matches_float32(shape, device):
    x = RNG.standard_normal(shape).astype(np.float16)
    w = RNG.uniform(0.5, 1.5, shape[-1]).astype(np.float16)
    b = (0.1 * RNG.standard_normal(shape[-1])).astype(np.float16)
    want = np_softmax(np_layernorm(*(v.astype(np.float32) for v in (x, w, b))))
    y = tp.softmax(_layernorm(tp.Tensor(x), tp.Tensor(w), tp.Tensor(b), 1, 1e-5), dim=-1)
    got = host(y).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-3 / shape[-1] + 1e-6)


def test_float16_layernorm_of_large_activations_does_not_overflow(device):
    # A row of 4096 values near 100 sums to ~4e5, past float16's 65504: statistics stay in float32.
    x = (100 + RNG.standard_normal((4, 4096))).astype(np.float16)
    w, b = np.ones(4096, np.float16), np.zeros(4096, np.float16)
    got = host(_layernorm(tp.Tensor(x), tp.Tensor(w), tp.Tensor(b), 1, 1e-5))
    want = np_layernorm(x.astype(np.float64), 1.0, 0.0)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-2)


def test_reduction_over_a_transposed_view_with_a_per_row_operand(device):
    # Reduced axis not contiguous (the scalar path) and an operand broadcast along the rows.
    x = RNG.standard_normal((64, 6)).astype(np.float32)
    r = RNG.standard_normal((6, 1)).astype(np.float32)
    got = tp.softmax(tp.permute(tp.Tensor(x), (1, 0)) * tp.Tensor(r), dim=-1)
    want = np_softmax(x.T * r)
    np.testing.assert_allclose(host(got), want, rtol=1e-5, atol=1e-6)


def test_float16_softmax_of_a_long_flat_row_does_not_overflow(device):
    # 70000 equal logits: the sum of exps (70000) passes float16's 65504, so it is kept in float32.
    x = np.zeros((2, 70000), np.float16)
    got = host(tp.softmax(tp.Tensor(x), dim=-1)).astype(np.float32)
    np.testing.assert_allclose(got, np.full((2, 70000), 1 / 70000, np.float32), rtol=1e-2)

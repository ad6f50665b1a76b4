"""Elementwise kernels that read windows of wider rows and broadcasts (a split's halves, a few
heads of a projection, a per-row scale) against numpy, compiled with a dynamic row count. On the
GPU the rows of these kernels take wide loads where every row starts 16-byte aligned and scalar
loads where a width or an offset breaks that: both widths run here."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(29)
DTYPES = {"float32": (tp.float32, np.float32, 1e-5), "float16": (tp.float16, np.float16, 2e-3)}


def _silu(x):
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("width", [48, 44, 7])
def test_swiglu_over_a_splits_halves(device, dtype, width):
    tdt, ndt, tol = DTYPES[dtype]

    def swiglu(x):
        gate, up = tp.split(x, 2, dim=-1)
        return tp.silu(gate) * up

    fn = tp.compile(swiglu, args=[tp.InputInfo(((1, 8, 33), 2 * width), dtype=tdt)])
    for rows in (1, 5, 33):
        x = RNG.standard_normal((rows, 2 * width)).astype(ndt)
        got = np.asarray(tp.copy(fn(tp.Tensor(x)), tp.device("cpu"))).astype(np.float32)
        g, u = x[:, :width].astype(np.float32), x[:, width:].astype(np.float32)
        np.testing.assert_allclose(got, _silu(g) * u, rtol=tol, atol=tol)


@pytest.mark.parametrize("head_dim", [16, 12])
def test_heads_of_a_projection_scaled_per_position_and_shifted(device, head_dim):
    # (T, heads * D) viewed as heads, the first 3 of 5 heads taken in place, times a (T, 1, D)
    # table broadcast over the heads, plus a (T, 1, 1) value per position.
    heads, kept = 5, 3

    def f(qkv, table, shift):
        T = qkv.shape[0]
        rows = qkv.reshape((T, heads, head_dim))[:, :kept]
        return rows * table + shift

    fn = tp.compile(f, args=[tp.InputInfo(((1, 4, 9), heads * head_dim), dtype=tp.float16),
                             tp.InputInfo(((1, 4, 9), 1, head_dim), dtype=tp.float16),
                             tp.InputInfo(((1, 4, 9), 1, 1), dtype=tp.float16)])
    for rows in (1, 4, 9):
        qkv = RNG.standard_normal((rows, heads * head_dim)).astype(np.float16)
        table = RNG.standard_normal((rows, 1, head_dim)).astype(np.float16)
        shift = RNG.standard_normal((rows, 1, 1)).astype(np.float16)
        got = np.asarray(tp.copy(fn(tp.Tensor(qkv), tp.Tensor(table), tp.Tensor(shift)), tp.device("cpu")))
        want = qkv.astype(np.float32).reshape(rows, heads, head_dim)[:, :kept] * table.astype(np.float32) + shift
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)

"""The optimising passes change how a program runs, never what it computes: seeded random programs
of elementwise ops, broadcasts, keepdim reductions, reshapes, transposes, slices (of slices),
concatenations and attention over head slices, compiled with optimization_level 0 (no FlatIR pass)
and 3, both against a numpy evaluation of the same program."""

import numpy as np
import pytest

import tripy as tp

N_PROGRAMS = 200


class Program:
    """A random program over one float32 input, built as tripy ops and as numpy ops side by side."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.shape = tuple(int(d) for d in self.rng.integers(2, 5, size=3))
        self.steps = [self._pick() for _ in range(int(self.rng.integers(3, 9)))]

    def _pick(self):
        kind = self.rng.choice(["unary", "binary", "splat", "norm", "reshape", "transpose", "slice", "concat"])
        return kind, int(self.rng.integers(0, 1 << 30))

    def run(self, x, lib):
        """Applies the steps to x with `lib` ("tp" or "np"); returns every value made (outputs)."""
        values = [x]
        for kind, seed in self.steps:
            rng = np.random.default_rng(seed)
            a = values[int(rng.integers(len(values)))]
            values.append(STEPS[kind](a, values, rng, lib))
        return values[-2:]


def _shape(a):
    return tuple(int(d) for d in a.shape)


def _unary(a, values, rng, lib):
    name = rng.choice(["tanh", "exp_small", "neg", "sigmoid"])
    if name == "exp_small":
        return tp.exp(a * 0.1) if lib == "tp" else np.exp(a * np.float32(0.1))
    if name == "neg":
        return -a
    if name == "tanh":
        return tp.tanh(a) if lib == "tp" else np.tanh(a)
    return tp.sigmoid(a) if lib == "tp" else 1 / (1 + np.exp(-a))


def _binary(a, values, rng, lib):
    same = [v for v in values if _shape(v) == _shape(a)]
    b = same[int(rng.integers(len(same)))]
    op = rng.choice(["+", "-", "*"])
    return a + b if op == "+" else a - b if op == "-" else a * b


def _splat(a, values, rng, lib):
    c = float(np.float32(rng.uniform(-2, 2)))
    return a * c + 0.5


def _norm(a, values, rng, lib):
    # RMSNorm written by hand: a keepdim mean, + eps, rsqrt, broadcast back.
    if lib == "tp":
        return a * tp.rsqrt(tp.mean(a * a, dim=-1, keepdim=True) + 1e-3)
    return a / np.sqrt((a * a).mean(-1, keepdims=True) + np.float32(1e-3))


def _reshape(a, values, rng, lib):
    s = _shape(a)
    if len(s) >= 2 and rng.integers(2):
        new = s[:-2] + (s[-2] * s[-1],)
    else:
        new = s + (1,) if len(s) < 4 else s
    return a.reshape(new)


def _transpose(a, values, rng, lib):
    if len(_shape(a)) < 2:
        return a
    perm = [int(p) for p in rng.permutation(len(_shape(a)))]
    return tp.permute(a, perm) if lib == "tp" else np.transpose(a, perm)


def _slice(a, values, rng, lib):
    index = []
    for d in _shape(a):
        lo = int(rng.integers(0, d))
        hi = int(rng.integers(lo + 1, d + 1))
        index.append(slice(lo, hi))
    return a[tuple(index)]


def _concat(a, values, rng, lib):
    s = _shape(a)
    axis = int(rng.integers(len(s)))
    same = [v for v in values if _shape(v) == s]
    b = same[int(rng.integers(len(same)))]
    return tp.concatenate([a, b], dim=axis) if lib == "tp" else np.concatenate([a, b], axis=axis)


STEPS = {"unary": _unary, "binary": _binary, "splat": _splat, "norm": _norm, "reshape": _reshape,
         "transpose": _transpose, "slice": _slice, "concat": _concat}


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_programs_compute_the_same_with_and_without_the_passes(device, seed):
    program = Program(seed)
    x = np.random.default_rng(seed + 1000).standard_normal(program.shape).astype(np.float32)
    want = program.run(x, "np")
    info = tp.InputInfo(program.shape, tp.float32)
    for level in (0, 3):
        exe = tp.compile(lambda t: tuple(program.run(t, "tp")), level, args=[info])
        got = exe(tp.Tensor(x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-5, err_msg=f"optimization_level={level}")


@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (2, 2)])
def test_attention_over_head_slices_of_one_projection(device, heads, kv_heads):
    # An LLM's q, k, v as head slices of one (B, T, heads, D) projection, k and q rotated together:
    # the passes read them as head windows in place.
    D, T = 8, 5
    rng = np.random.default_rng(heads)
    qkv = rng.standard_normal((1, T, heads + 2 * kv_heads, D)).astype(np.float32)

    def step(qkv):
        qk = qkv[:, :, : heads + kv_heads] * 1.5
        q, k, v = qk[:, :, :heads], qk[:, :, heads:], qkv[:, :, heads + kv_heads :]
        y = tp.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return y.transpose(1, 2)

    q, k, v = qkv[:, :, :heads] * 1.5, qkv[:, :, heads : heads + kv_heads] * 1.5, qkv[:, :, heads + kv_heads :]
    group = heads // kv_heads
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D)
    scores = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)
    for level in (0, 3):
        exe = tp.compile(step, level, args=[tp.InputInfo(qkv.shape, tp.float32)])
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(qkv))), want, rtol=1e-5, atol=1e-5)

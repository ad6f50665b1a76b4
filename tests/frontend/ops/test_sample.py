"""tp.sample against numpy: greedy is the argmax, top_k=1 is the argmax at any temperature, draws
stay inside the top-k set and the nucleus that numpy computes, the frequencies over fixed keys
match numpy's filtered softmax (a chi-square bound; the keys are fixed, so the test is exact, not
flaky), a key decides a draw, rows and keys draw apart; dynamic shapes and in-graph keys inside
tp.compile; float16 and bfloat16 logits; argument errors at the caller's line; on every device, and
the GPU draws exactly the CPU's tokens (core/tests/backend/cuda/codegen/cuda_sample_test.cc checks
the kernels themselves)."""

import math

import numpy as np
import pytest

import tripy as tp
from tripy import _C
from tripy.frontend.device import default_device

RNG = np.random.default_rng(11)


def _dev(data, **kwargs):
    return tp.Tensor(data, device=default_device(), **kwargs)


def _key(k, device=None):
    return tp.Tensor(np.array([k], dtype=np.int64), device=device or default_device())


def _kept_probs(logits, temperature, top_k=0, top_p=1.0):
    """numpy's filtered softmax of one row: the probability of each token under tp.sample's rule
    (z in float32, the rest in float64)."""
    x = np.asarray(logits, dtype=np.float32)
    z = (x / np.float32(temperature)).astype(np.float64)
    w = np.exp(z - z.max())
    keep = np.ones(x.shape, dtype=bool)
    if 0 < top_k < x.size:
        keep &= x >= np.sort(x)[::-1][top_k - 1]
    if top_p < 1:
        kept = np.where(keep)[0]
        order = kept[np.argsort(-z[kept], kind="stable")]
        total = w[kept].sum()
        running, tau = 0.0, None
        for i, idx in enumerate(order):
            running += w[idx]
            last_of_tie = i + 1 == len(order) or z[order[i + 1]] != z[idx]
            if last_of_tie and running >= top_p * total:
                tau = z[idx]
                break
        keep &= z >= tau
    p = np.where(keep, w, 0.0)
    return p / p.sum()


def _chi_square_bound(dof, z=4.0):
    """The chi-square quantile about z standard deviations up (Wilson-Hilferty)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def test_greedy_is_numpys_argmax(device):
    x = RNG.standard_normal((6, 300)).astype(np.float32)
    x[1, 40:45] = 9.0  # ties: the first wins
    x[2, 7] = np.nan
    x[2, 9] = np.nan  # the first NaN wins
    x[3, :] = -np.inf
    got = tp.sample(_dev(x), _key(5), temperature=0).tolist()
    assert got == np.argmax(x, axis=-1).tolist()
    assert got[1] == 40 and got[2] == 7 and got[3] == 0


@pytest.mark.parametrize("temperature", [0.05, 1.0, 30.0])
def test_top_k_of_one_is_the_argmax_at_any_temperature(temperature, device):
    x = (RNG.standard_normal((8, 1000)) * 3).astype(np.float32)
    for k in range(5):
        assert tp.sample(_dev(x), _key(k), temperature=temperature, top_k=1).tolist() == np.argmax(x, -1).tolist()


@pytest.mark.parametrize("top_k,top_p", [(5, 1.0), (0, 0.5), (40, 0.8), (3, 0.3)])
def test_draws_stay_inside_the_top_k_set_and_the_nucleus(top_k, top_p, device):
    x = (RNG.standard_normal((16, 200)) * 2).astype(np.float32)
    allowed = [set(np.nonzero(_kept_probs(row, 0.9, top_k, top_p))[0].tolist()) for row in x]
    fn = tp.compile(lambda t, k: tp.sample(t, k, 0.9, top_k, top_p),
                    args=[tp.InputInfo((16, 200), tp.float32), tp.InputInfo((1,), tp.int64)])
    logits = _dev(x)
    for key in range(60):
        for r, token in enumerate(fn(logits, _key(key)).tolist()):
            assert token in allowed[r], (key, r, token, sorted(allowed[r]))


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 6, 1.0), (1.5, 0, 0.8), (1.0, 8, 0.9)])
def test_frequencies_over_fixed_keys_match_the_filtered_softmax(temperature, top_k, top_p, device):
    row = np.array([2.0, 1.5, 1.5, 0.0, -1.0, 3.0, 0.5, -0.5, 1.0, 2.5, -2.0, 0.25], dtype=np.float32)
    want = _kept_probs(row, temperature, top_k, top_p)
    n = 4000
    exe = tp.compile(lambda t, k: tp.sample(t, k, temperature, top_k, top_p),
                     args=[tp.InputInfo((1, row.size), tp.float32), tp.InputInfo((1,), tp.int64)])
    logits = _dev(row[None])
    by_key = np.bincount([exe(logits, _key(1000 + k)).tolist()[0] for k in range(n)], minlength=row.size)
    # The same over rows: 4000 copies of the row and one key.
    by_row = np.bincount(tp.sample(_dev(np.tile(row, (n, 1))), _key(77), temperature, top_k, top_p).tolist(),
                         minlength=row.size)
    kept = want > 0
    for counts in (by_key, by_row):
        assert counts[~kept].sum() == 0, counts
        expected = n * want[kept]
        chi2 = (((counts[kept] - expected) ** 2) / expected).sum()
        assert chi2 < _chi_square_bound(kept.sum() - 1), (chi2, counts, expected)


def test_a_key_decides_the_draw_and_rows_and_keys_draw_apart(device):
    x = np.zeros((64, 1000), dtype=np.float32)  # uniform: every draw equally likely
    a = tp.sample(_dev(x), _key(9)).tolist()
    assert tp.sample(_dev(x), _key(9)).tolist() == a
    b = tp.sample(_dev(x), _key(10)).tolist()
    assert sum(i != j for i, j in zip(a, b)) > 55  # keys 9 and 10 agree by chance only (about 1 in 1000)
    assert len(set(a)) > 55  # the rows draw apart
    # Neighbouring keys and rows do not line up: (key, row + 1) is not (key + 1, row).
    assert a[1:] != b[:-1]


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 50, 1.0), (1.2, 0, 0.9), (0.8, 200, 0.95)])
def test_the_gpu_draws_the_cpus_tokens(dtype, temperature, top_k, top_p):
    x = (RNG.standard_normal((32, 50257)) * 2.5).astype(np.float32)
    x[:, 100:105] = 8.0
    tokens = {}
    for device in ("cpu", "gpu"):
        logits = tp.cast(tp.Tensor(x, device=device), getattr(tp, dtype))
        tokens[device] = [tp.sample(logits, _key(k, device), temperature, top_k, top_p).tolist() for k in range(20)]
    assert tokens["cpu"] == tokens["gpu"]


def test_dynamic_shapes_and_a_key_computed_in_the_graph(device):
    def step(logits, seed, position):
        key = seed + tp.cast(position, tp.int64)  # a new key per decode step, made in the graph
        return tp.sample(logits, key, temperature=0.9, top_k=20, top_p=0.95)

    exe = tp.compile(step, args=[tp.InputInfo(((1, 2, 8), (10, 500, 1000)), tp.float32), tp.InputInfo((1,), tp.int64),
                                 tp.InputInfo((1,), tp.int32)])
    for rows, vocab in [(1, 10), (8, 1000), (3, 517)]:
        x = (RNG.standard_normal((rows, vocab)) * 2).astype(np.float32)
        for position in (0, 7):
            got = exe(_dev(x), _key(42), _dev(np.array([position], dtype=np.int32))).tolist()
            want = tp.sample(_dev(x), _key(42 + position), temperature=0.9, top_k=20, top_p=0.95).tolist()
            assert got == want
            assert all(p[t] > 0 for p, t in zip((_kept_probs(r, 0.9, 20, 0.95) for r in x), got))


def test_any_rank_of_logits(device):
    x = RNG.standard_normal((2, 3, 50)).astype(np.float32)
    out = tp.sample(_dev(x), _key(1), temperature=0)
    assert out.shape == (2, 3) and out.dtype == tp.int32
    assert out.tolist() == np.argmax(x, -1).tolist()
    one = tp.sample(_dev(x[0, 0]), _key(1), temperature=0)
    assert one.shape == () and one.tolist() == int(np.argmax(x[0, 0]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_logits_draw_as_their_float32_values(dtype, device):
    # Quarters in [-8, 8): exact in float16 and bfloat16, so every draw equals float32's.
    x = (np.round(RNG.standard_normal((12, 300)) * 12) / 4).astype(np.float32)
    narrow = tp.cast(_dev(x), getattr(tp, dtype))
    assert tp.sample(narrow, _key(3), temperature=0).tolist() == np.argmax(x, -1).tolist()
    for key in range(5):
        args = dict(temperature=0.8, top_k=30, top_p=0.9)
        assert tp.sample(narrow, _key(key), **args).tolist() == tp.sample(_dev(x), _key(key), **args).tolist()


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda x, k: tp.sample(x, k, temperature=-1.0), "temperature must be a finite number >= 0"),
        (lambda x, k: tp.sample(x, k, temperature=float("nan")), "temperature must be a finite number >= 0"),
        (lambda x, k: tp.sample(x, k, temperature=float("inf")), "temperature must be a finite number >= 0"),
        (lambda x, k: tp.sample(x, k, temperature="hot"), "temperature must be a float"),
        (lambda x, k: tp.sample(x, k, top_k=-1), "top_k must be >= 0"),
        (lambda x, k: tp.sample(x, k, top_k=2.5), "top_k must be an int"),
        (lambda x, k: tp.sample(x, k, top_p=0.0), r"top_p must be in \(0, 1\]"),
        (lambda x, k: tp.sample(x, k, top_p=1.5), r"top_p must be in \(0, 1\]"),
        (lambda x, k: tp.sample(x, 7), "the key must be a tripy.Tensor of dtype int64"),
        (lambda x, k: tp.sample(x, tp.Tensor([7], dtype=tp.int32)), "input 1 has dtype int32, but it must be one of: int64"),
        (lambda x, k: tp.sample(x, tp.Tensor([7, 8], dtype=tp.int64)), r"the key must be an int64 tensor of shape \(1,\)"),
        (lambda x, k: tp.sample(tp.Tensor([[1, 2]]), k), "input 0 has dtype int32"),
        (lambda x, k: tp.sample(tp.Tensor(1.0), k), "the logits must have rank >= 1"),
        (lambda x, k: tp.sample(tp.ones((2, 0)), k), r"the vocabulary\) must be in \[1, "),
    ],
)
def test_bad_arguments_raise_at_the_callers_line(call, message):
    x, k = tp.ones((2, 5)), tp.Tensor([7], dtype=tp.int64)
    with pytest.raises(tp.TripyException, match=message) as e:
        call(x, k)
    assert "test_sample.py" in str(e.value)

"""GPT-2 with a KV cache (examples/gpt2.py's GPT.cached, compiled as in examples/gpt2_generate.py): a
prefill and decode steps give the logits of a full recompute, the caches are updated in place, and a
decode past the cache's end is an error naming the user's line."""

import os
import sys

import numpy as np
import pytest

import tripy as tp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import gpt2  # noqa: E402
import gpt2_generate  # noqa: E402

CONFIG = gpt2.GPTConfig(block_size=24, vocab_size=53, n_layer=2, n_head=2, n_embd=32)
TOL = 1e-4  # float32 against float64: max |error| / max |reference|


@pytest.fixture
def setup(device):
    weights = gpt2.random_weights(CONFIG, seed=3)
    model = gpt2.GPT(CONFIG)
    gpt2.load_gpt(model, weights)
    prefill, decode = gpt2_generate.compile_steps(model, prefill_opt=8)
    return model, weights, prefill, decode


def _rel(got, want):
    return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()


def _ids(a):
    return tp.Tensor(np.asarray(a, np.int32))


def test_decode_steps_equal_a_full_recompute(setup):
    model, weights, prefill, decode = setup
    seq = np.random.default_rng(5).integers(0, CONFIG.vocab_size, (1, 12)).astype(np.int32)
    full = tp.compile(model, args=[tp.InputInfo((1, (1, 8, CONFIG.block_size)), tp.int32)])
    caches = gpt2_generate.empty_caches(model)
    logits, *caches = prefill(_ids(seq[:, :5]), gpt2_generate.position(0), *caches)
    for t in range(5, 12):  # logits for the token at t - 1, then feed the token at t (teacher forced)
        want = gpt2.numpy_forward(weights, seq[:, :t], CONFIG)[:, -1]
        assert _rel(np.asarray(logits)[:, -1], want) < TOL, t
        assert _rel(np.asarray(full(_ids(seq[:, :t])))[:, -1], want) < TOL, t  # Tripy without a cache agrees
        logits, *caches = decode(_ids(seq[:, t : t + 1]), gpt2_generate.position(t), *caches)
    want = gpt2.numpy_forward(weights, seq, CONFIG)[:, -1]
    assert _rel(np.asarray(logits)[:, -1], want) < TOL


@pytest.mark.parametrize("length", [1, 7, CONFIG.block_size])
def test_a_prefill_of_any_length_equals_a_full_recompute(setup, length):
    model, weights, prefill, _ = setup
    seq = np.random.default_rng(length).integers(0, CONFIG.vocab_size, (1, length)).astype(np.int32)
    logits, *_ = prefill(_ids(seq), gpt2_generate.position(0), *gpt2_generate.empty_caches(model))
    assert _rel(np.asarray(logits)[:, -1], gpt2.numpy_forward(weights, seq, CONFIG)[:, -1]) < TOL


def test_the_caches_are_updated_in_place_and_never_copied(setup):
    model, _, prefill, decode = setup
    for exe in (prefill, decode):
        kinds = [kind for kind, _, _ in exe._impl.kernels]
        assert kinds.count("update_slice") == 2 * CONFIG.n_layer and "copy" not in kinds
        assert all(exe.input_infos[f"arg{i}"].donate for i in range(2, 2 + 2 * CONFIG.n_layer))
    caches = gpt2_generate.empty_caches(model)
    _, *out = prefill(_ids([[1, 2, 3]]), gpt2_generate.position(0), *caches)
    k0 = np.asarray(caches[0])  # the caller's tensor now holds the first 3 positions' keys
    assert np.abs(k0[:, :, :3]).min() > 0 and not k0[:, :, 3:].any()
    np.testing.assert_array_equal(np.asarray(out[0]), k0)


def test_two_sequences_with_their_own_caches_do_not_mix(setup):
    # Interleaved calls with other cache tensors (on a GPU: other addresses for the graph).
    model, weights, prefill, decode = setup
    rng = np.random.default_rng(9)
    seqs = [rng.integers(0, CONFIG.vocab_size, (1, 9)).astype(np.int32) for _ in range(2)]
    state = []
    for s in seqs:
        logits, *caches = prefill(_ids(s[:, :4]), gpt2_generate.position(0), *gpt2_generate.empty_caches(model))
        state.append(caches)
    for t in range(4, 9):
        for i, s in enumerate(seqs):
            logits, *state[i] = decode(_ids(s[:, t : t + 1]), gpt2_generate.position(t), *state[i])
            want = gpt2.numpy_forward(weights, s[:, : t + 1], CONFIG)[:, -1]
            assert _rel(np.asarray(logits)[:, -1], want) < TOL, (i, t)


def test_a_decode_past_the_cache_is_an_error_naming_the_line(setup):
    model, _, prefill, decode = setup
    n = CONFIG.block_size
    logits, *caches = prefill(_ids(np.zeros((1, n), np.int32)), gpt2_generate.position(0), *gpt2_generate.empty_caches(model))
    before = [np.asarray(c).copy() for c in caches]
    # Past the end, the position embedding's lookup fails first (GPT-2 has block_size positions);
    # a negative position is a valid lookup (from the end) but no cache row.
    errors = {n: ("index 24 is out of bounds for axis 0 with size 24", 'self.transformer["wpe"](positions)'),
              n + 5: ("index 29 is out of bounds", 'self.transformer["wpe"](positions)'),
              -1: (rf"the start must lie in \[0, {n - 1}\]", "k_cache = tp.update_slice(k_cache, 2, pos, k)")}
    for pos, (message, line) in errors.items():
        with pytest.raises(tp.TripyException, match=message) as e:
            # On the GPU the error surfaces no later than the read of the result.
            np.asarray(decode(_ids([[1]]), gpt2_generate.position(pos), *caches)[0])
        assert line in str(e.value) and "gpt2.py" in str(e.value)
    for b, c in zip(before, caches):
        np.testing.assert_array_equal(np.asarray(c), b)  # nothing was written


def test_caches_of_the_wrong_shape_or_dtype_are_rejected(setup):
    model, _, _, decode = setup
    good = gpt2_generate.empty_caches(model)
    B, H, S, D = model.cache_shape(1)
    short = tp.zeros((B, H, S - 1, D))
    with pytest.raises(tp.TripyException, match=r"'arg2': dimension 2 has size 23") as e:
        decode(_ids([[1]]), gpt2_generate.position(0), short, *good[1:])
    assert "decode(_ids([[1]]), gpt2_generate.position(0), short, *good[1:])" in str(e.value)
    with pytest.raises(tp.TripyException, match="'arg3' has dtype float16"):
        decode(_ids([[1]]), gpt2_generate.position(0), good[0], tp.zeros((B, H, S, D), dtype=tp.float16), *good[2:])
    with pytest.raises(tp.TripyException, match="'pos' has dtype int64"):
        decode(_ids([[1]]), tp.Tensor(np.array([0], np.int64)), *good)


def test_the_decoding_guide_runs():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    import re

    text = open(os.path.join(root, "docs", "decoding.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/decoding.md should hold one python block"
    scope = {}
    exec(blocks[0], scope)
    cache = np.asarray(scope["cache"])
    np.testing.assert_array_equal(cache[:3], np.ones((3, 4)))  # written in place, one row per step
    assert not cache[3:].any()
    np.testing.assert_allclose(np.asarray(scope["out"]), np.ones((1, 1, 1, 4)))

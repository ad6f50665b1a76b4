"""The split-KV attention kernels (few query rows per kv head: decode steps) against torch's SDPA on
the same device: one row per head and GQA groups of up to 16 rows, every float dtype, head sizes 64,
128 and 80, bool/additive/causal masks, caches of any length in one compiled executable, and many
calls in a row (the merge's counters must return to zero after every launch and graph replay).
TRIPY_ATTENTION_SPLIT=0 builds the same programs without split-KV as a second reference. Skipped
without a GPU or torch."""

import os

import numpy as np
import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import check as _check  # noqa: E402
from attention_torch_ref import off_by_one_element as _off_by_one_element  # noqa: E402
from attention_torch_ref import rand as _rand  # noqa: E402
from attention_torch_ref import ref as _ref  # noqa: E402


def _sdpa(q, k, v, mask=None, causal=False):
    return tp.scaled_dot_product_attention(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v),
                                           attn_mask=None if mask is None else tp.Tensor(mask), is_causal=causal)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("head", [64, 128, 80])
@pytest.mark.parametrize("batch, S", [(1, 1024), (1, 1), (3, 31), (2, 1500), (64, 200)])
def test_one_query_per_head_matches_torch(dtype, head, batch, S):
    q = _rand(batch, 12, 1, head, dtype=dtype)
    k, v = _rand(batch, 12, S, head, dtype=dtype, seed=1), _rand(batch, 12, S, head, dtype=dtype, seed=2)
    _check(_sdpa(q, k, v), _ref(q, k, v), dtype)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_a_decode_mask_hides_the_unwritten_cache(kind):
    # GPT-2's decode step: a (1, 1, 1, S) mask keeps positions 0..pos of a cache of 1024.
    q = _rand(1, 12, 1, 64, dtype="float16")
    k, v = _rand(1, 12, 1024, 64, dtype="float16", seed=1), _rand(1, 12, 1024, 64, dtype="float16", seed=2)
    for pos in (0, 37, 511, 1023):
        keep = torch.arange(1024, device="cuda").view(1, 1, 1, 1024) <= pos
        mask = keep if kind == "bool" else torch.zeros(keep.shape, device="cuda", dtype=torch.float16).masked_fill(~keep, float("-inf"))
        _check(_sdpa(q, k, v, mask), _ref(q, k, v, mask), "float16")


@pytest.mark.parametrize("hq, hkv, L", [(8, 2, 1), (8, 2, 4), (32, 8, 4), (16, 1, 1), (4, 4, 16), (12, 12, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_heads_and_few_rows_match_torch(hq, hkv, L, causal):
    q = _rand(2, hq, L, 128, dtype="bfloat16")
    k, v = _rand(2, hkv, 700, 128, dtype="bfloat16", seed=1), _rand(2, hkv, 700, 128, dtype="bfloat16", seed=2)
    _check(_sdpa(q, k, v, causal=causal), _ref(q, k, v, causal=causal), "bfloat16")


def test_broadcast_masks_per_head_and_row():
    q = _rand(2, 8, 3, 64, dtype="float16")
    k, v = _rand(2, 2, 900, 64, dtype="float16", seed=1), _rand(2, 2, 900, 64, dtype="float16", seed=2)
    for shape in [(2, 8, 3, 900), (1, 8, 1, 900), (2, 1, 3, 900)]:
        mask = torch.rand(shape, device="cuda") > 0.5
        mask[..., 0] = True
        _check(_sdpa(q, k, v, mask), _ref(q, k, v, mask), "float16")
        add = _rand(*shape, dtype="float16", seed=3)
        _check(_sdpa(q, k, v, add), _ref(q, k, v, add), "float16")


def test_a_query_with_every_key_masked_is_nan_as_on_other_paths():
    q = _rand(1, 4, 1, 64, dtype="float16")
    k, v = _rand(1, 4, 300, 64, dtype="float16", seed=1), _rand(1, 4, 300, 64, dtype="float16", seed=2)
    mask = torch.ones(1, 4, 1, 300, dtype=torch.bool, device="cuda")
    mask[:, 1] = False  # head 1 sees nothing
    got = torch.from_dlpack(_sdpa(q, k, v, mask)).float()
    assert torch.isnan(got[:, 1]).all() and not torch.isnan(got[:, [0, 2, 3]]).any()


def _compile_decode(split):
    old = os.environ.get("TRIPY_ATTENTION_SPLIT")
    os.environ["TRIPY_ATTENTION_SPLIT"] = "1" if split else "0"
    try:
        S = tp.NamedDimension("S", 1, 1024, 4096)

        def step(q, k, v):
            return tp.scaled_dot_product_attention(q, k, v)

        return tp.compile(step, args=[tp.InputInfo((2, 8, 1, 128), tp.float16),
                                      tp.InputInfo((2, 2, S, 128), tp.float16), tp.InputInfo((2, 2, S, 128), tp.float16)])
    finally:
        if old is None:
            del os.environ["TRIPY_ATTENTION_SPLIT"]
        else:
            os.environ["TRIPY_ATTENTION_SPLIT"] = old


def test_one_executable_serves_every_cache_length_and_many_calls():
    # Lengths that give different chunk counts alternate, each replayed from a graph several times:
    # a counter left non-zero would make the wrong block merge and the results drift.
    exe, plain = _compile_decode(split=True), _compile_decode(split=False)
    q = _rand(2, 8, 1, 128, dtype="float16")
    caches = {S: (_rand(2, 2, S, 128, dtype="float16", seed=1), _rand(2, 2, S, 128, dtype="float16", seed=2))
              for S in (1, 33, 1024, 4096)}
    for _ in range(3):
        for S, (k, v) in caches.items():
            want = _ref(q, k, v)
            for _ in range(4):
                _check(exe(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v)), want, "float16")
            _check(plain(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v)), want, "float16")


def test_keys_and_values_off_16_byte_alignment_match_torch():
    # The tensor-core split kernels read 16-byte aligned rows; at another address the same entry
    # point runs its CUDA-core body (both the one-row kernel and the GQA one).
    q = _rand(1, 12, 1, 64, dtype="float16")
    k, v = _rand(1, 12, 1024, 64, dtype="float16", seed=1), _rand(1, 12, 1024, 64, dtype="float16", seed=2)
    _check(_sdpa(q, _off_by_one_element(k), _off_by_one_element(v)), _ref(q, k, v), "float16")
    exe = _compile_decode(split=True)
    q = _rand(2, 8, 1, 128, dtype="float16")
    for S in (33, 1024):
        k, v = _rand(2, 2, S, 128, dtype="float16", seed=1), _rand(2, 2, S, 128, dtype="float16", seed=2)
        got = exe(tp.Tensor(q), tp.Tensor(_off_by_one_element(k)), tp.Tensor(_off_by_one_element(v)))
        _check(got, _ref(q, k, v), "float16")
        _check(exe(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v)), _ref(q, k, v), "float16")


def test_the_gpt2_decode_step_with_split_kv_equals_a_full_recompute():
    # examples/gpt2_generate's decode step at a cache of 256 (8 chunks of 32 keys per head) against
    # numpy recomputing the whole sequence (test_gpt2_decode.py covers a cache of 24: one chunk).
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples"))
    import gpt2
    import gpt2_generate

    config = gpt2.GPTConfig(block_size=256, vocab_size=97, n_layer=2, n_head=4, n_embd=64)
    weights = gpt2.random_weights(config, seed=3)
    model = gpt2.GPT(config)
    gpt2.load_gpt(model, weights)
    tp.config.default_device, old = "gpu", tp.config.default_device
    try:
        _, decode = gpt2_generate.compile_steps(model, prefill_opt=8)
        caches = gpt2_generate.empty_caches(model)
        seq = np.random.default_rng(5).integers(0, config.vocab_size, (1, 40)).astype(np.int32)
        for t in range(seq.shape[1]):
            logits, *caches = decode(tp.Tensor(seq[:, t : t + 1]), gpt2_generate.position(t), *caches)
            if t % 13 == 0 or t == seq.shape[1] - 1:
                want = gpt2.numpy_forward(weights, seq[:, : t + 1], config)[:, -1]
                got = np.asarray(logits)[:, -1]
                assert np.abs(got - want).max() / np.abs(want).max() < 1e-4, t
    finally:
        tp.config.default_device = old

"""A decode step's KV cache writes folded into its split-KV attention (the GPU's launch plan drops
the two update_slice launches and the attention reads the new rows from the projection, writing
them into the caches itself): the output and both caches after every step against torch, and the
same executable planned with TRIPY_ATTENTION_APPEND=0 (the writes as launches of their own), over
the tensor-core kernel (heads of 128), the CUDA-core one (heads of 80, float32) and unaligned
caches, for Llama's cache layout and GPT-2's (the v slice between the two writes); a position past
the cache is the same error either way. Skipped without a GPU or torch."""

import os
import time

import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import check as _check  # noqa: E402
from attention_torch_ref import off_by_one_element as _off_by_one_element  # noqa: E402
from attention_torch_ref import rand as _rand  # noqa: E402
from attention_torch_ref import ref as _ref  # noqa: E402

B, H, HKV, S = 2, 8, 2, 300


def _compile(dtype, head):
    """Llama's decode step over one qkv projection (B, 1, H + 2 HKV, head) and caches (B, S, HKV,
    head) donated: q, k and v are head windows of the projection, the caches are written at `pos`
    and read through a transpose."""

    def step(qkv, pos, k_cache, v_cache):
        q, k, v = qkv[:, :, :H], qkv[:, :, H : H + HKV], qkv[:, :, H + HKV :]
        k_cache = tp.update_slice(k_cache, 1, pos, k)
        v_cache = tp.update_slice(v_cache, 1, pos, v)
        visible = tp.iota((1, S), dim=1, dtype=tp.int32) <= tp.iota((1, S), dim=0, dtype=tp.int32) + pos
        y = tp.scaled_dot_product_attention(q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                            attn_mask=visible.reshape((1, 1, 1, S)))
        return y, k_cache, v_cache

    t = getattr(tp, dtype)
    cache = tp.InputInfo((B, S, HKV, head), t, donate=True)
    return tp.compile(step, args=[tp.InputInfo((B, 1, H + 2 * HKV, head), t), tp.InputInfo((1,), tp.int32), cache, cache])


def _compile_gpt2(dtype, head):
    """GPT-2's decode step: one projection (B, 1, 3 H head), caches (B, H, S, head) donated, k and v
    slices of the projection split into heads and written along S, the v slice between the two
    writes."""
    C = H * head

    def step(qkv, pos, k_cache, v_cache):
        def heads(x):
            return x.reshape((B, 1, H, head)).transpose(1, 2)

        q = heads(qkv[:, :, :C])
        k_cache = tp.update_slice(k_cache, 2, pos, heads(qkv[:, :, C : 2 * C]))
        v_cache = tp.update_slice(v_cache, 2, pos, heads(qkv[:, :, 2 * C :]))
        visible = tp.iota((1, S), dim=1, dtype=tp.int32) <= tp.iota((1, S), dim=0, dtype=tp.int32) + pos
        y = tp.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible.reshape((1, 1, 1, S)))
        return y, k_cache, v_cache

    t = getattr(tp, dtype)
    cache = tp.InputInfo((B, H, S, head), t, donate=True)
    return tp.compile(step, args=[tp.InputInfo((B, 1, 3 * C), t), tp.InputInfo((1,), tp.int32), cache, cache])


def _run(exe, qkv, pos, k, v, fold):
    """One call (the first call of a signature plans its launches: the environment then decides)."""
    old = os.environ.pop("TRIPY_ATTENTION_APPEND", None)
    if not fold:
        os.environ["TRIPY_ATTENTION_APPEND"] = "0"
    try:
        p = torch.tensor([pos], dtype=torch.int32, device="cuda")
        return [torch.from_dlpack(x) for x in exe(tp.Tensor(qkv), tp.Tensor(p), tp.Tensor(k), tp.Tensor(v))]
    finally:
        os.environ.pop("TRIPY_ATTENTION_APPEND", None)
        if old is not None:
            os.environ["TRIPY_ATTENTION_APPEND"] = old


@pytest.mark.parametrize("dtype, head, aligned", [("bfloat16", 128, True), ("float16", 128, False),
                                                  ("float16", 80, True), ("float32", 64, True)])
def test_the_steps_output_and_caches_match_torch_with_and_without_the_fold(dtype, head, aligned, monkeypatch, capfd):
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    exes = {fold: _compile(dtype, head) for fold in (True, False)}
    k0, v0 = _rand(B, S, HKV, head, dtype=dtype, seed=1), _rand(B, S, HKV, head, dtype=dtype, seed=2)
    for step, pos in enumerate((0, 7, 130, S - 1)):
        qkv = _rand(B, 1, H + 2 * HKV, head, dtype=dtype, seed=10 + step)
        k_want, v_want = k0.clone(), v0.clone()
        k_want[:, pos], v_want[:, pos] = qkv[:, 0, H : H + HKV], qkv[:, 0, H + HKV :]
        q = qkv[:, :, :H].transpose(1, 2)
        want = _ref(q, k_want[:, : pos + 1].transpose(1, 2), v_want[:, : pos + 1].transpose(1, 2))
        for fold, exe in exes.items():
            k, v = k0.clone(), v0.clone()
            if not aligned:
                k, v = _off_by_one_element(k), _off_by_one_element(v)
            y, k_out, v_out = _run(exe, qkv, pos, k, v, fold)
            _check(y, want, dtype)
            # Every row of both caches: the new one written, the others as they were.
            assert torch.equal(k_out, k_want), (fold, pos)
            assert torch.equal(v_out, v_want), (fold, pos)
            if step == 0:  # the first call plans: TRIPY_DEBUG says whether the writes were folded
                assert ("folded in" in capfd.readouterr().err) == fold


@pytest.mark.parametrize("dtype, head", [("float16", 64), ("float32", 64)])
def test_gpt2s_layout_folds_its_writes_across_the_slice_between_them(dtype, head, monkeypatch, capfd):
    monkeypatch.setenv("TRIPY_DEBUG", "1")
    exes = {fold: _compile_gpt2(dtype, head) for fold in (True, False)}
    C = H * head
    k0, v0 = _rand(B, H, S, head, dtype=dtype, seed=1), _rand(B, H, S, head, dtype=dtype, seed=2)
    for step, pos in enumerate((0, 9, S - 1)):
        qkv = _rand(B, 1, 3 * C, dtype=dtype, seed=20 + step)
        heads = [qkv[:, 0, i * C : (i + 1) * C].reshape(B, H, head) for i in range(3)]
        k_want, v_want = k0.clone(), v0.clone()
        k_want[:, :, pos], v_want[:, :, pos] = heads[1], heads[2]
        want = _ref(heads[0].unsqueeze(2), k_want[:, :, : pos + 1], v_want[:, :, : pos + 1])
        for fold, exe in exes.items():
            y, k_out, v_out = _run(exe, qkv, pos, k0.clone(), v0.clone(), fold)
            _check(y, want, dtype)
            assert torch.equal(k_out, k_want) and torch.equal(v_out, v_want), (fold, pos)
            if step == 0:
                assert ("folded in" in capfd.readouterr().err) == fold


def test_a_position_past_the_cache_is_the_writes_error_either_way():
    # As for any update_slice on the GPU, the error surfaces at a later call (or a read), naming
    # the write's line, and nothing is written.
    for fold in (True, False):
        exe = _compile("bfloat16", 128)
        k, v = _rand(B, S, HKV, 128, dtype="bfloat16", seed=1), _rand(B, S, HKV, 128, dtype="bfloat16", seed=2)
        qkv = _rand(B, 1, H + 2 * HKV, 128, dtype="bfloat16", seed=3)
        _run(exe, qkv, 3, k, v, fold)  # plans the signature
        kept = (k.clone(), v.clone())
        with pytest.raises(tp.TripyException, match=rf"at {S} .* the start must lie in \[0, {S - 1}\]") as e:
            _run(exe, qkv, S, k, v, fold)
            deadline = time.time() + 10
            while time.time() < deadline:  # the same rows again at 3: the caches as they were
                _run(exe, qkv, 3, k, v, fold)
        assert "k_cache = tp.update_slice(k_cache, 1, pos, k)" in str(e.value), fold
        assert torch.equal(k, kept[0]) and torch.equal(v, kept[1]), fold

"""The GPU attention kernels against torch's SDPA on the same device: the tensor-core flash kernel
(float16/bfloat16, head sizes 64 and 128: causal, masks, GQA, ragged lengths, read through head
split views) and the generic kernel (float32, other head sizes). Skipped without a GPU or torch."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import check as _check  # noqa: E402
from attention_torch_ref import rand as _rand  # noqa: E402
from attention_torch_ref import ref as _ref  # noqa: E402


def _tp(t):
    return tp.Tensor(t)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [(1024, 1024), (333, 333), (77, 301), (300, 45), (1, 129)])
def test_flash_kernel_matches_torch(dtype, head, causal, lengths):
    L, S = lengths
    q, k, v = _rand(2, 4, L, head, dtype=dtype), _rand(2, 4, S, head, dtype=dtype, seed=1), _rand(2, 4, S, head, dtype=dtype, seed=2)
    out = tp.scaled_dot_product_attention(_tp(q), _tp(k), _tp(v), is_causal=causal)
    _check(out, _ref(q, k, v, causal=causal), dtype)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("shape", [(1, 1, 200, 150), (2, 1, 1, 150), (2, 4, 200, 150)])
def test_flash_kernel_reads_broadcast_masks(kind, shape):
    q, k, v = _rand(2, 4, 200, 64, dtype="float16"), _rand(2, 4, 150, 64, dtype="float16", seed=1), _rand(2, 4, 150, 64, dtype="float16", seed=2)
    if kind == "bool":
        mask = torch.rand(shape, device="cuda") > 0.3
        mask[..., 0] = True
    else:
        mask = _rand(*shape, dtype="float16", seed=3)
    out = tp.scaled_dot_product_attention(_tp(q), _tp(k), _tp(v), attn_mask=_tp(mask), is_causal=True)
    _check(out, _ref_masked_causal(q, k, v, mask), "float16")


def _ref_masked_causal(q, k, v, mask):
    L, S = q.shape[-2], k.shape[-2]
    causal = torch.ones(L, S, dtype=torch.bool, device="cuda").tril()
    if mask.dtype == torch.bool:
        return _ref(q, k, v, mask=mask & causal)
    return _ref(q, k, v, mask=mask.float().masked_fill(~causal, float("-inf")))


@pytest.mark.parametrize("hkv", [1, 3])
def test_flash_kernel_grouped_query_heads(hkv):
    q = _rand(2, 12, 257, 128, dtype="bfloat16")
    k, v = _rand(2, hkv, 257, 128, dtype="bfloat16", seed=1), _rand(2, hkv, 257, 128, dtype="bfloat16", seed=2)
    out = tp.scaled_dot_product_attention(_tp(q), _tp(k), _tp(v), is_causal=True)
    _check(out, _ref(q, k, v, causal=True), "bfloat16")


@pytest.mark.parametrize("dtype, head", [("float32", 64), ("float16", 80), ("float32", 300)])
def test_generic_kernel_matches_torch(dtype, head):
    q, k, v = _rand(2, 3, 70, head, dtype=dtype), _rand(2, 3, 90, head, dtype=dtype, seed=1), _rand(2, 3, 90, head, dtype=dtype, seed=2)
    for causal in (False, True):
        out = tp.scaled_dot_product_attention(_tp(q), _tp(k), _tp(v), is_causal=causal)
        _check(out, _ref(q, k, v, causal=causal), dtype)


def _attend_heads(B, H, D):
    """Causal self-attention over (B, T, H * D) inputs split into H heads by views."""

    def attend(q, k, v):
        split = lambda x: tp.transpose(tp.reshape(x, (B, x.shape[1], H, D)), 1, 2)
        y = tp.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return tp.reshape(tp.transpose(y, 1, 2), (B, y.shape[2], H * D))

    return attend


# T up to 1024: split-KV serves one token; up to 128 (no more keys than one split-KV block), the
# flash kernel does.
@pytest.mark.parametrize("t_max, lengths", [(1024, (1024, 97, 1)), (128, (1, 2, 77, 128))])
def test_compiled_head_split_views_match_torch(t_max, lengths):
    B, H, D = 4, 12, 64
    T = tp.NamedDimension("T", 1, t_max // 4, t_max)
    info = tp.InputInfo((B, T, H * D), dtype=tp.float16)
    exe = tp.compile(_attend_heads(B, H, D), args=[info, info, info])
    for t in lengths:
        q, k, v = (_rand(B, t, H * D, dtype="float16", seed=s) for s in range(3))
        heads = lambda x: x.view(B, t, H, D).transpose(1, 2)
        want = _ref(heads(q), heads(k), heads(v), causal=True).transpose(1, 2).reshape(B, t, H * D)
        _check(exe(_tp(q), _tp(k), _tp(v)), want, "float16")

"""Long-sequence attention through cuDNN's fused attention (kCudnnAttentionMinQueries = 512
queries and more) against torch's SDPA on the same device: float16 and bfloat16, causal or not,
head sizes 64, 80 and 128, grouped-query heads, more keys than queries, and q/k/v read as head
windows of one projection (nanoGPT's layout). A subprocess with TRIPY_DEBUG=1 shows that cuDNN,
not our kernel, ran these shapes, and that TRIPY_ATTENTION_CUDNN=0 turns it off. Skipped without a
GPU or torch; where cuDNN is missing, the same cases check our kernel (and the subprocess test is
skipped)."""

import os
import subprocess
import sys

import pytest

import tripy as tp
from tripy import _C

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not _C.gpu_available() or not torch.cuda.is_available(), reason="needs a GPU and torch")

from attention_torch_ref import check as _check  # noqa: E402
from attention_torch_ref import rand as _rand  # noqa: E402
from attention_torch_ref import ref as _ref  # noqa: E402

CASES = [  # dtype, batch, q heads, kv heads, queries, keys, head, causal
    ("float16", 2, 4, 4, 512, 512, 64, True),
    ("bfloat16", 1, 8, 8, 1024, 1024, 128, False),
    ("float16", 1, 8, 2, 640, 640, 64, True),
    ("float16", 1, 4, 4, 512, 512, 80, True),
    ("bfloat16", 1, 4, 4, 600, 1000, 64, False),
    ("float16", 1, 2, 2, 700, 900, 64, True),
]


@pytest.mark.parametrize("dtype, b, hq, hkv, L, S, d, causal", CASES)
def test_long_sequences_match_torch(dtype, b, hq, hkv, L, S, d, causal):
    q = _rand(b, hq, L, d, dtype=dtype)
    k, v = _rand(b, hkv, S, d, dtype=dtype, seed=1), _rand(b, hkv, S, d, dtype=dtype, seed=2)

    def f(q, k, v):
        return tp.scaled_dot_product_attention(q, k, v, is_causal=causal)

    infos = [tp.InputInfo(shape=tuple(t.shape), dtype=getattr(tp, dtype)) for t in (q, k, v)]
    exe = tp.compile(f, args=infos)
    want = _ref(q, k, v, causal=causal)
    for _ in range(2):  # the first call plans (and captures), the second replays
        _check(exe(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v)), want, dtype)


def test_head_windows_of_one_projection_match_torch():
    # nanoGPT: q, k and v are slices of one (B, T, 3C) projection, split into heads by views; the
    # attention reads them in place (head windows), and cuDNN takes their strides.
    B, T, H, D = 2, 512, 6, 64
    C = H * D
    x = _rand(B, T, 3 * C, dtype="float16")

    def f(x):
        q, k, v = tp.split(x, 3, dim=2)
        q, k, v = (tp.transpose(tp.reshape(t, (B, T, H, D)), 1, 2) for t in (q, k, v))
        return tp.scaled_dot_product_attention(q, k, v, is_causal=True)

    exe = tp.compile(f, args=[tp.InputInfo(shape=(B, T, 3 * C), dtype=tp.float16)])
    q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in x.split(C, dim=2))
    _check(exe(tp.Tensor(x)), _ref(q, k, v, causal=True), "float16")


_SCRIPT = """
import torch, tripy as tp
q, k, v = (torch.randn(1, 4, {L}, 64, device="cuda", dtype=torch.float16) for _ in range(3))
f = lambda q, k, v: tp.scaled_dot_product_attention(q, k, v, is_causal=True)
exe = tp.compile(f, args=[tp.InputInfo(shape=(1, 4, {L}, 64), dtype=tp.float16)] * 3)
exe(tp.Tensor(q), tp.Tensor(k), tp.Tensor(v))
"""


@pytest.mark.parametrize("L, off, expect", [(1024, False, True), (1024, True, False), (128, False, False)])
def test_cudnn_runs_long_sequences_unless_turned_off(L, off, expect):
    if not torch.backends.cudnn.is_available():
        pytest.skip("no cuDNN here")
    env = dict(os.environ, TRIPY_DEBUG="1")
    env.pop("TRIPY_ATTENTION_CUDNN", None)
    if off:
        env["TRIPY_ATTENTION_CUDNN"] = "0"
    r = subprocess.run([sys.executable, "-c", _SCRIPT.format(L=L)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert ("attention through cuDNN" in r.stderr) == expect, r.stderr[-2000:]

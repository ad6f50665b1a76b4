"""Weights that a GPU tensor holds become the executable's constants in place: tp.compile neither
copies them to the host nor uploads a second copy, every executable of one model reads the same
memory, and save/load and the passes that read constants (a causal mask that
match_attention recognises) still see their values. Checked against numpy; the memory by what
Tripy's allocator has handed out (its cache of freed blocks, such as GEMM timing buffers, aside)."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

pytestmark = pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")

RNG = np.random.default_rng(11)


def _on_gpu(x):
    t = tp.copy(tp.Tensor(np.ascontiguousarray(x)), "gpu")
    t.eval()
    return t


def _numpy(t):
    return np.from_dlpack(tp.copy(t, "cpu"))


def test_executables_share_a_gpu_weight_instead_of_copying_it():
    k, n = 4096, 8192  # 128 MiB of float32
    w = RNG.standard_normal((k, n), dtype=np.float32) / 64
    weight = _on_gpu(w)
    x = RNG.standard_normal((1, k), dtype=np.float32)

    def project(a):
        return a @ weight

    def compiled():
        exe = tp.compile(project, args=[tp.InputInfo((1, k), dtype=tp.float32)])
        out = _numpy(exe(tp.Tensor(x)))  # the first call loads the program
        np.testing.assert_allclose(out, x.astype(np.float64) @ w, rtol=2e-3, atol=2e-3)
        return exe

    exes = [compiled()]
    before = _C._cuda_bytes_in_use()
    exes += [compiled(), compiled()]
    # Two private copies would hold 256 MiB more; sharing adds only the executables' own memory
    # (a GEMM workspace each).
    grown = _C._cuda_bytes_in_use() - before
    assert grown < w.nbytes, grown / 2**20


def test_a_shared_weight_is_saved_with_its_values(tmp_path):
    w = RNG.standard_normal((256, 512), dtype=np.float32)  # 512 KiB: kept on the GPU
    b = RNG.standard_normal((512,), dtype=np.float32)  # 2 KiB: comes to the host
    weight, bias = _on_gpu(w), _on_gpu(b)

    def layer(a):
        return tp.relu(a @ weight + bias)

    x = RNG.standard_normal((4, 256), dtype=np.float32)
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    exe = tp.compile(layer, args=[tp.InputInfo((4, 256), dtype=tp.float32)])
    np.testing.assert_allclose(_numpy(exe(tp.Tensor(x))), want, rtol=2e-3, atol=2e-3)
    exe.save(tmp_path / "layer.tpy")
    loaded = tp.Executable.load(tmp_path / "layer.tpy")
    np.testing.assert_allclose(_numpy(loaded(tp.Tensor(x))), want, rtol=2e-3, atol=2e-3)


def test_a_causal_mask_held_on_the_gpu_is_still_recognised():
    t, d = 512, 64  # a 1 MiB float32 mask: device-resident
    mask = _on_gpu(np.tril(np.ones((1, 1, t, t), np.float32)))
    q = RNG.standard_normal((1, 2, t, d), dtype=np.float32)

    def attend(x):
        s = (x @ tp.transpose(x, 2, 3)) * (1.0 / np.sqrt(d))
        s = tp.masked_fill(s, mask == 0, float("-inf"))
        return tp.softmax(s, dim=-1) @ x

    exe = tp.compile(attend, args=[tp.InputInfo((1, 2, t, d), dtype=tp.float32)])
    s = q.astype(np.float64) @ q.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(d)
    s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ q
    np.testing.assert_allclose(_numpy(exe(tp.Tensor(q))), want, rtol=2e-3, atol=2e-3)

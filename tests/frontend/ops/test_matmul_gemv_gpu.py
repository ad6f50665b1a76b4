"""Few-row products on the GPU's GEMV kernel (core/src/backend/cuda/cuda_gemv.h): x (M rows, M <= 16;
on tensor cores from 8) @ W.T with W a Linear's weight stored [N, K], float16 and bfloat16 summed in
float32, bias and relu/GELU applied in the kernel, against numpy in float64. TRIPY_GEMV=1 makes the
tuner take the GEMV wherever it applies (else timing decides, as in test_the_timed_choice_is_right),
TRIPY_GEMV=tma its tensor-core tiles' TMA form where that applies (sm_90, weight rows of 16-byte
multiples); each executable runs three times, so CUDA graph replays are checked too, and dynamic M
runs sizes on both sides of 16 (above it, cuBLASLt's heuristic runs the same dot)."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

pytestmark = pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")

RNG = np.random.default_rng(5)
TOL = {"float16": 4e-3, "bfloat16": 2e-2}


def _bf16_round(x):
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def _held(x, dtype):
    """`x` as `dtype` holds it, in float64."""
    x = np.asarray(x, np.float32)
    return (_bf16_round(x) if dtype == "bfloat16" else x.astype(np.float16)).astype(np.float64)


def _tensor(x, dtype):
    t = tp.Tensor(np.ascontiguousarray(x, np.float32))
    t = tp.cast(t, getattr(tp, dtype))
    t.eval()
    return t


def _numpy(t):
    return np.from_dlpack(tp.copy(tp.cast(t, tp.float32), "cpu")).astype(np.float64)


def _gelu(x):
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


ACTS = {"none": (lambda y: y, lambda y: y), "relu": (tp.relu, lambda y: np.maximum(y, 0)), "gelu": (tp.gelu, _gelu)}


def _linear(k, n, dtype, bias):
    lin = tp.Linear(k, n, bias=bias, dtype=getattr(tp, dtype))
    w = RNG.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)
    b = RNG.standard_normal((n,)).astype(np.float32) * 0.5
    state = {"weight": _tensor(w, dtype)}
    if bias:
        state["bias"] = _tensor(b, dtype)
    lin.load_state_dict(state)
    return lin, _held(w, dtype), (_held(b, dtype) if bias else 0.0)


def _check(exe, lin_w, lin_b, act, dtype, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    want = ACTS[act][1](_held(x, dtype) @ lin_w.T + lin_b)
    xt = _tensor(x, dtype)
    for _ in range(3):  # a direct launch, then CUDA graph replays
        got = _numpy(exe(xt))
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * max(1.0, np.abs(want).max()))


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    monkeypatch.setenv("TRIPY_GEMV", "1")


@pytest.fixture
def gpu_tma(monkeypatch):
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    monkeypatch.setenv("TRIPY_GEMV", "tma")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m", [1, 3, 8, 11, 16])  # 8 and up: the tensor-core kernel
@pytest.mark.parametrize("k,n", [(2048, 3072), (64, 24), (200, 1001), (40, 7), (19, 33), (8200, 130)])
def test_gemv_matches_numpy(gpu, dtype, m, k, n):
    lin, w, b = _linear(k, n, dtype, bias=False)
    exe = tp.compile(lin, args=[tp.InputInfo((m, k), dtype=getattr(tp, dtype))])
    assert "transpose_rhs" in exe._impl.program_text
    _check(exe, w, b, "none", dtype, (m, k))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("k,n", [(256, 512), (72, 45)])
def test_gemv_bias_and_activation_in_the_kernel(gpu, dtype, act, k, n):
    lin, w, b = _linear(k, n, dtype, bias=True)
    exe = tp.compile(lambda x: ACTS[act][0](lin(x)), args=[tp.InputInfo((3, k), dtype=getattr(tp, dtype))])
    text = exe._impl.program_text
    assert "has_bias = true" in text, text
    if act != "none":
        assert f"activation = {act}" in text, text
    _check(exe, w, b, act, dtype, (3, k))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemv_with_dynamic_rows_and_folded_batch(gpu, dtype):
    k, n = 128, 300
    lin, w, b = _linear(k, n, dtype, bias=True)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 4, 40), k), dtype=getattr(tp, dtype))])
    for m in (1, 3, 8, 9, 16, 17, 40):  # the GEMV up to 16 rows, cuBLASLt above
        _check(exe, w, b, "none", dtype, (m, k))
    exe3 = tp.compile(lin, args=[tp.InputInfo((2, (1, 2, 8), k), dtype=getattr(tp, dtype))])
    for t in (1, 5, 8):  # M = 2 * t rows of one product
        _check(exe3, w, b, "none", dtype, (2, t, k))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_timed_choice_is_right(monkeypatch, dtype):
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    monkeypatch.delenv("TRIPY_GEMV", raising=False)
    lin, w, b = _linear(2048, 3072, dtype, bias=False)
    exe = tp.compile(lin, args=[tp.InputInfo((1, 2048), dtype=getattr(tp, dtype))])
    _check(exe, w, b, "none", dtype, (1, 2048))


def test_a_saved_executable_runs_the_chosen_gemv(gpu, tmp_path):
    lin, w, b = _linear(512, 768, "bfloat16", bias=True)
    exe = tp.compile(lin, args=[tp.InputInfo((2, 512), dtype=tp.bfloat16)])
    path = str(tmp_path / "gemv.tpy")
    exe.save(path)
    loaded = tp.Executable.load(path)
    _check(loaded, w, b, "none", "bfloat16", (2, 512))


# The TMA form: K past the last whole box (200, 8200), N past the last 16-row box (1001, 130, 7),
# rows of x below and at its tiles (5, 8 of the 8-row tile; 11, 16 of the 16-row one); K = 19 has
# rows of 38 bytes (no tensor map: gemv_mma runs).
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m", [5, 8, 11, 16])
@pytest.mark.parametrize("k,n", [(2048, 3072), (200, 1001), (8200, 130), (64, 7), (19, 33)])
def test_tma_gemv_matches_numpy(gpu_tma, dtype, m, k, n):
    lin, w, b = _linear(k, n, dtype, bias=False)
    exe = tp.compile(lin, args=[tp.InputInfo((m, k), dtype=getattr(tp, dtype))])
    _check(exe, w, b, "none", dtype, (m, k))


@pytest.mark.parametrize("act", ["none", "gelu"])
def test_tma_gemv_bias_activation_dynamic_rows_and_a_saved_file(gpu_tma, act, tmp_path):
    lin, w, b = _linear(384, 520, "bfloat16", bias=True)
    exe = tp.compile(lambda x: ACTS[act][0](lin(x)), args=[tp.InputInfo(((1, 8, 16), 384), dtype=tp.bfloat16)])
    for m in (8, 3, 16, 12):  # the TMA tiles, and the CUDA-core rows below them
        _check(exe, w, b, act, "bfloat16", (m, 384))
    path = str(tmp_path / "tma.tpy")
    exe.save(path)
    loaded = tp.Executable.load(path)
    _check(loaded, w, b, act, "bfloat16", (9, 384))

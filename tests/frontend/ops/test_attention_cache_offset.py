"""A KV-cache step's mask, `iota(dim=1) <= iota(dim=0) + pos` (examples/gpt2.py), compiles to an
attention with a causal offset that the kernel reads when it runs: the program says so
(`mask = causal_offset`), results equal a float64 numpy reference with the full mask for positions
at the start, middle and end of the cache, 1 and 4 queries, grouped-query heads, float32, float16
and bfloat16 and a dynamic number of queries; rows past the ones written are never read (NaN there
changes nothing), and where the offset hides every key from a query (a negative position, a sum
that wraps), the result is the bool mask's exactly. On every device; on the GPU the same programs
run the split-KV, flash and generic kernels."""

import os

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

S = 96  # the cache: several key blocks on the CPU (64) and split-KV chunks (32) on the GPU


def _dev(data, dtype=None):
    t = tp.Tensor(data, device=default_device())
    return tp.cast(t, dtype) if dtype is not None else t


def _np(t):
    return np.array(tp.cast(t, tp.float32).tolist() if t.dtype != tp.float32 else t.tolist(), dtype=np.float64)


def _visible(T, pos, dtype=np.int32):
    """The mask as the step computes it, in the position's dtype (wrapping as integers do)."""
    with np.errstate(over="ignore"):
        return np.arange(S, dtype=dtype)[None, :] <= np.arange(T, dtype=dtype)[:, None] + dtype(pos)


def _reference(q, k, v, keep):
    """Full-mask attention in float64; grouped-query k/v heads repeated per q head."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    scores = np.where(keep, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v


def _step(T):
    def step(q, k_cache, v_cache, pos):
        visible = tp.iota((T, S), dim=1, dtype=pos.dtype) <= tp.iota((T, S), dim=0, dtype=pos.dtype) + pos
        return tp.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible.reshape((1, 1, T, S)))

    return step


def _compile(T, hq=4, hkv=4, d=64, dtype=tp.float32, pos_dtype=tp.int32, dynamic=False):
    q_len = tp.NamedDimension("T", 1, 4, 8) if dynamic else T
    step = _step(T) if not dynamic else lambda q, k, v, pos: _step(q.shape[2])(q, k, v, pos)
    exe = tp.compile(step, args=[tp.InputInfo((1, hq, q_len, d), dtype), tp.InputInfo((1, hkv, S, d), dtype),
                                 tp.InputInfo((1, hkv, S, d), dtype), tp.InputInfo((1,), pos_dtype)])
    assert "mask = causal_offset" in exe._impl.program_text, exe._impl.program_text
    return exe


_TOL = {"float32": (1e-4, 1e-5), "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2)}


def _run_and_check(exe, T, pos, hq=4, hkv=4, d=64, dtype="float32", pos_dtype=np.int32, seed=0):
    rng = np.random.default_rng(seed + pos)
    q = rng.standard_normal((1, hq, T, d)).astype(np.float32)
    k, v = (rng.standard_normal((1, hkv, S, d)).astype(np.float32) for _ in range(2))
    keep = _visible(T, pos, pos_dtype)
    want = _reference(q, k, v, keep)
    # Rows no query sees have not been written: NaN there must not reach the result.
    k[:, :, pos + T :], v[:, :, pos + T :] = np.nan, np.nan
    dt = None if dtype == "float32" else getattr(tp, dtype)
    got = exe(_dev(q, dt), _dev(k, dt), _dev(v, dt), _dev(np.array([pos], pos_dtype)))
    rtol, atol = _TOL[dtype]
    np.testing.assert_allclose(_np(got), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("T", [1, 4])
def test_a_cache_step_attends_to_the_rows_written(T, device):
    exe = _compile(T)
    for pos in (0, S // 2 - 3, S - T):  # one executable: the position is read when it runs
        _run_and_check(exe, T, pos)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("T", [1, 4])
def test_grouped_query_heads_and_narrow_dtypes(dtype, T, device):
    exe = _compile(T, hq=8, hkv=2, dtype=getattr(tp, dtype))
    for pos in (0, 41, S - T):
        _run_and_check(exe, T, pos, hq=8, hkv=2, dtype=dtype)


def test_a_dynamic_number_of_queries_and_an_int64_position(device):
    exe = _compile(None, dynamic=True, pos_dtype=tp.int64)
    for T, pos in ((1, 0), (4, 17), (8, S - 8), (3, 60)):
        _run_and_check(exe, T, pos, pos_dtype=np.int64)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_prefill_of_many_rows(dtype, device):
    # 48 queries per head: the flash kernel (float16) or the generic one (float32) on the GPU.
    exe = _compile(48, hq=2, hkv=1, dtype=getattr(tp, dtype))
    for pos in (0, 20, S - 48):
        _run_and_check(exe, 48, pos, hq=2, hkv=1, dtype=dtype)


def _with_mask_input(T):
    """The same attention with the mask passed in: always the bool mask path (today's behaviour)."""
    fn = lambda q, k, v, m: tp.scaled_dot_product_attention(q, k, v, attn_mask=m.reshape((1, 1, T, S)))
    return tp.compile(fn, args=[tp.InputInfo((1, 4, T, 64), tp.float32), tp.InputInfo((1, 4, S, 64), tp.float32),
                                tp.InputInfo((1, 4, S, 64), tp.float32), tp.InputInfo((T, S), tp.bool)])


@pytest.mark.parametrize("pos_dtype", [np.int32, np.int64])
def test_queries_that_see_no_key_match_the_bool_mask(pos_dtype, device):
    # A negative position hides every key from the first rows; near the dtype's largest value the
    # mask's sum wraps and hides every key from the last rows. Both paths give NaN there.
    T = 4
    exe, masked = _compile(T, pos_dtype=getattr(tp, np.dtype(pos_dtype).name)), _with_mask_input(T)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 4, T, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 4, S, 64)).astype(np.float32) for _ in range(2))
    for pos in (-2, -T, -1000, np.iinfo(pos_dtype).max - 1, np.iinfo(pos_dtype).min):
        keep = _visible(T, pos, pos_dtype)
        got = _np(exe(_dev(q), _dev(k), _dev(v), _dev(np.array([pos], pos_dtype))))
        want = _np(masked(_dev(q), _dev(k), _dev(v), _dev(keep)))
        hidden = ~keep.any(axis=1)
        assert hidden.any(), pos
        np.testing.assert_array_equal(np.isnan(got).any(axis=-1), np.broadcast_to(hidden, (1, 4, T)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # NaN where the other has NaN
        np.testing.assert_allclose(got[:, :, ~hidden], _reference(q, k, v, keep)[:, :, ~hidden], rtol=1e-4, atol=1e-5)


def test_the_docs_decode_mask_of_one_row_is_recognised(device):
    # docs/decoding.md's step: `iota((1, 8), dim=1) <= pos`, no query iota at all.
    def step(cache, pos, row):
        cache = tp.update_slice(cache, 0, pos, row)
        seen = tp.iota((1, 8), dim=1, dtype=tp.int32) <= pos
        kv = cache.reshape((1, 1, 8, 4))
        return tp.scaled_dot_product_attention(row.reshape((1, 1, 1, 4)), kv, kv, attn_mask=seen.reshape((1, 1, 1, 8)))

    exe = tp.compile(step, args=[tp.InputInfo((8, 4), tp.float32), tp.InputInfo((1,), tp.int32),
                                 tp.InputInfo((1, 4), tp.float32)])
    assert "mask = causal_offset" in exe._impl.program_text
    cache = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
    for p in (0, 3, 7):
        row = np.full((1, 4), 0.5 * p, np.float32)
        written = cache.copy()
        written[p] = row
        want = _reference(row.reshape(1, 1, 1, 4), written.reshape(1, 1, 8, 4), written.reshape(1, 1, 8, 4),
                          np.arange(8)[None, :] <= p)
        got = exe(_dev(cache), _dev(np.array([p], np.int32)), _dev(row))
        np.testing.assert_allclose(_np(got), want, rtol=1e-4, atol=1e-5)


def test_without_split_kv_the_flash_kernel_reads_the_offset_too(device):
    if device != "gpu":
        pytest.skip("TRIPY_ATTENTION_SPLIT chooses between GPU kernels")
    old = os.environ.get("TRIPY_ATTENTION_SPLIT")
    os.environ["TRIPY_ATTENTION_SPLIT"] = "0"
    try:
        exe = _compile(4, dtype=tp.float16)
        for pos in (0, 50, S - 4):
            _run_and_check(exe, 4, pos, dtype="float16")
    finally:
        if old is None:
            del os.environ["TRIPY_ATTENTION_SPLIT"]
        else:
            os.environ["TRIPY_ATTENTION_SPLIT"] = old


def test_a_gpu_decode_step_replays_without_waiting_for_the_gpu(device):
    if device != "gpu":
        pytest.skip("CUDA graphs and host waits are the GPU's")
    from tripy import _C

    exe = _compile(1, hq=8, hkv=2, dtype=tp.float16)
    q, k, v = (_dev(np.zeros(s, np.float32), tp.float16) for s in ((1, 8, 1, 64), (1, 2, S, 64), (1, 2, S, 64)))
    positions = [_dev(np.array([p], np.int32)) for p in range(8)]
    for p in positions[:3]:  # planning, graph capture
        exe(q, k, v, p)
    tp.default_stream().synchronize()
    before = _C._cuda_host_waits()
    for p in positions:
        exe(q, k, v, p)
    assert _C._cuda_host_waits() == before

"""scaled_dot_product_attention (one fused op) against a float64 numpy reference: causal (also with
L != S), bool, additive and broadcast masks, grouped-query heads, head sizes 32/64/128, float32,
float16 and bfloat16, eager, compiled static and compiled dynamic (L and S from InputInfo ranges),
on every device; bad inputs raise a TripyException that shows the caller's line."""

import inspect

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(5)


def _dev(data, dtype=None):
    """``data`` on the default device (numpy arrays would otherwise stay, zero-copy, on the CPU),
    optionally cast to ``dtype`` there (numpy has no bfloat16)."""
    t = tp.Tensor(data, device=default_device())
    return tp.cast(t, dtype) if dtype is not None else t


def _np(t):
    return np.array(tp.cast(t, tp.float32).tolist() if t.dtype != tp.float32 else t.tolist(), dtype=np.float64)


def _sdpa_ref(q, k, v, mask=None, causal=False, scale=None):
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:  # grouped-query heads: repeat each k/v head
        rep = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        keep = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        scores = np.where(keep, scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


_TOL = {"float32": (1e-4, 1e-5), "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2)}


def _check(got, want, dtype="float32"):
    rtol, atol = _TOL[dtype]
    np.testing.assert_allclose(_np(got), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_attention_matches_numpy(causal, mode, device):
    q, k, v = _rand(2, 3, 5, 8), _rand(2, 3, 5, 8), _rand(2, 3, 5, 8)
    fn = lambda a, b, c: tp.scaled_dot_product_attention(a, b, c, is_causal=causal)
    ref = _sdpa_ref(q, k, v, causal=causal)
    if mode == "eager":
        out = fn(_dev(q), _dev(k), _dev(v))
    else:
        seq = 5 if mode == "static" else tp.NamedDimension("seq", 1, 5, 9)
        info = tp.InputInfo((2, 3, seq, 8), dtype=tp.float32)
        exe = tp.compile(fn, args=[info, info, info])
        out = exe(_dev(q), _dev(k), _dev(v))
        if mode == "dynamic":
            q2, k2, v2 = _rand(2, 3, 7, 8), _rand(2, 3, 7, 8), _rand(2, 3, 7, 8)
            _check(exe(_dev(q2), _dev(k2), _dev(v2)), _sdpa_ref(q2, k2, v2, causal=causal))
    _check(out, ref)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("head", [32, 64, 128])
def test_attention_dtypes_and_head_sizes(dtype, head, device):
    # Long enough for several key blocks (the online softmax rescales) and a ragged last block.
    q, k, v = _rand(1, 2, 75, head), _rand(1, 2, 140, head), _rand(1, 2, 140, head)
    dt = getattr(tp, dtype)
    for causal in (False, True):
        out = tp.scaled_dot_product_attention(_dev(q, dt), _dev(k, dt), _dev(v, dt), is_causal=causal)
        assert out.dtype == dt
        _check(out, _sdpa_ref(q, k, v, causal=causal), dtype)


@pytest.mark.parametrize("shape", [(4, 9), (1, 4, 9), (2, 1, 1, 9), (2, 3, 4, 9), (3, 1, 9)])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_attention_masks_broadcast(shape, kind, device):
    q, k, v = _rand(2, 3, 4, 8), _rand(2, 3, 9, 8), _rand(2, 3, 9, 5)
    if kind == "bool":
        mask = RNG.random(shape) > 0.3
        mask[..., 0] = True  # every row keeps a key
    else:
        mask = _rand(*shape)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(mask))
    _check(got, _sdpa_ref(q, k, v, mask=mask))


def test_attention_with_bool_and_additive_masks(device):
    q, k, v = _rand(2, 4, 8), _rand(2, 6, 8), _rand(2, 6, 3)
    keep = RNG.random((4, 6)) > 0.3
    keep[:, 0] = True
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(keep))
    _check(got, _sdpa_ref(q, k, v, mask=keep))
    bias = _rand(2, 4, 6)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(bias), is_causal=True)
    _check(got, _sdpa_ref(q, k, v, mask=bias, causal=True))


@pytest.mark.parametrize("lq, ls", [(3, 11), (11, 3), (1, 17)])
def test_attention_causal_with_different_lengths(lq, ls, device):
    # Top-left aligned, as torch: query i sees keys 0..i whatever S is.
    q, k, v = _rand(2, 2, lq, 16), _rand(2, 2, ls, 16), _rand(2, 2, ls, 16)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), is_causal=True)
    _check(got, _sdpa_ref(q, k, v, causal=True))


@pytest.mark.parametrize("hkv", [1, 2, 6])
def test_attention_grouped_query_heads(hkv, device):
    q, k, v = _rand(2, 6, 7, 16), _rand(2, hkv, 10, 16), _rand(2, hkv, 10, 16)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), is_causal=True)
    _check(got, _sdpa_ref(q, k, v, causal=True))


def test_attention_embedding_dim_sets_the_scale(device):
    q, k, v = _rand(1, 3, 8), _rand(1, 5, 8), _rand(1, 5, 8)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), embedding_dim=32)
    _check(got, _sdpa_ref(q, k, v, scale=1 / np.sqrt(32)))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_attention_compiled_with_dynamic_query_and_key_lengths(dtype, device):
    dt = getattr(tp, dtype)
    L, S = tp.NamedDimension("L", 1, 8, 80), tp.NamedDimension("S", 1, 16, 160)
    q_info = tp.InputInfo((2, 4, L, 64), dtype=dt)
    kv_info = tp.InputInfo((2, 2, S, 64), dtype=dt)
    mask_info = tp.InputInfo((L, S), dtype=tp.bool)
    exe = tp.compile(
        lambda q, k, v, m: tp.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True),
        args=[q_info, kv_info, kv_info, mask_info],
    )
    for lq, ls in ((8, 16), (80, 150), (1, 1), (33, 7)):
        q, k, v = _rand(2, 4, lq, 64), _rand(2, 2, ls, 64), _rand(2, 2, ls, 64)
        mask = RNG.random((lq, ls)) > 0.2
        mask[:, 0] = True
        _check(exe(_dev(q, dt), _dev(k, dt), _dev(v, dt), _dev(mask)), _sdpa_ref(q, k, v, mask=mask, causal=True), dtype)


def test_attention_rows_with_every_key_masked_are_nan(device):
    q, k, v = _rand(1, 2, 4), _rand(1, 3, 4), _rand(1, 3, 4)
    keep = np.ones((2, 3), dtype=bool)
    keep[1] = False
    got = _np(tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(keep)))
    assert np.isnan(got[0, 1]).all() and not np.isnan(got[0, 0]).any()


def _raises_here(match, fn):
    """Calls fn, expecting a TripyException matching ``match`` that shows the caller's line."""
    caller = inspect.stack()[1]
    with pytest.raises(tp.TripyException, match=match) as e:
        fn()
    text = str(e.value)
    assert f"test_attention.py:{caller.lineno}" in text or f"line {caller.lineno}" in text, text
    return text


def test_attention_rejects_integer_and_vector_inputs():
    x = tp.ones((2, 2), dtype=tp.int32)
    _raises_here("expected float tensors", lambda: tp.scaled_dot_product_attention(x, x, x))
    _raises_here("key must have rank >= 2", lambda: tp.scaled_dot_product_attention(tp.ones((2, 2)), tp.ones((2,)), tp.ones((2, 2))))


def test_attention_rejects_mismatched_inputs():
    q = tp.ones((2, 4, 5, 8))
    sdpa = tp.scaled_dot_product_attention
    _raises_here("must share a dtype", lambda: sdpa(q, tp.ones((2, 4, 5, 8), dtype=tp.float16), q))
    _raises_here("one head size", lambda: sdpa(q, tp.ones((2, 4, 5, 4)), tp.ones((2, 4, 5, 4))))
    _raises_here("one sequence length", lambda: sdpa(q, tp.ones((2, 4, 6, 8)), tp.ones((2, 4, 5, 8))))
    _raises_here("must divide the query heads", lambda: sdpa(q, tp.ones((2, 3, 5, 8)), tp.ones((2, 3, 5, 8))))
    _raises_here("equal batch dims", lambda: sdpa(q, tp.ones((3, 4, 5, 8)), tp.ones((3, 4, 5, 8))))
    _raises_here("one rank", lambda: sdpa(q, tp.ones((4, 5, 8)), tp.ones((4, 5, 8))))


def test_attention_rejects_bad_masks():
    q = tp.ones((2, 4, 5, 8))
    sdpa = tp.scaled_dot_product_attention
    _raises_here("does not broadcast", lambda: sdpa(q, q, q, attn_mask=tp.ones((5, 6), dtype=tp.bool)))
    _raises_here("must be bool", lambda: sdpa(q, q, q, attn_mask=tp.ones((5, 5), dtype=tp.int32)))
    _raises_here("must be bool", lambda: sdpa(q, q, q, attn_mask=tp.ones((5, 5), dtype=tp.float16)))
    _raises_here("pass a mask by keyword", lambda: sdpa(q, q, q, tp.ones((5, 5), dtype=tp.bool)))


def test_attention_rejects_sizes_that_differ_at_run_time():
    L = tp.NamedDimension("L", 1, 4, 8)
    S = tp.NamedDimension("S", 1, 4, 8)
    exe = tp.compile(
        tp.scaled_dot_product_attention,
        args=[tp.InputInfo((1, 2, L, 8), dtype=tp.float32), tp.InputInfo((1, 2, S, 8), dtype=tp.float32),
              tp.InputInfo((1, 2, L, 8), dtype=tp.float32)],
    )
    q = _dev(_rand(1, 2, 4, 8))
    # value's length follows L, key's S: they differ here, which the run must refuse.
    with pytest.raises(tp.TripyException, match="sequence length"):
        exe(q, _dev(_rand(1, 2, 5, 8)), q)


def _compiled(capsys, fn, args):
    """tp.compile(fn) and the Program it built (the "program" stage of the IR dump)."""
    capsys.readouterr()
    with tp.logger.use_verbosity({"ir"}):
        exe = tp.compile(fn, args=args)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    return exe, text[text.rindex("program:") :]


def _kernels(program):
    """Kinds of the Program's kernels, in order ("b7 = attention 'attention'(b0, ...)" lines)."""
    kinds = []
    for line in program.splitlines():
        parts = line.split(" = ", 1)
        if len(parts) == 2 and parts[0].startswith("b") and "'" in parts[1]:
            kinds.append(parts[1].split(" ")[0])
    return kinds


def test_gpt2_head_split_and_merge_compile_to_one_kernel(capsys, device):
    B, H, D = 2, 4, 16
    T = tp.NamedDimension("T", 1, 8, 32)

    def attend(q, k, v):
        split = lambda x: tp.transpose(tp.reshape(x, (B, x.shape[1], H, D)), 1, 2)
        y = tp.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return tp.reshape(tp.transpose(y, 1, 2), (B, y.shape[2], H * D))

    info = tp.InputInfo((B, T, H * D), dtype=tp.float32)
    exe, program = _compiled(capsys, attend, [info, info, info])
    assert _kernels(program) == ["attention"], program  # no transpose or copy kernels
    q, k, v = _rand(B, 11, H * D), _rand(B, 11, H * D), _rand(B, 11, H * D)
    heads = lambda x: x.reshape(B, 11, H, D).transpose(0, 2, 1, 3)
    want = _sdpa_ref(heads(q), heads(k), heads(v), causal=True).transpose(0, 2, 1, 3).reshape(B, 11, H * D)
    _check(exe(_dev(q), _dev(k), _dev(v)), want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_hand_written_attention_becomes_one_kernel(dtype, capsys, device):
    # nanoGPT's form: scores scaled, a causal buffer sliced to [:T, :T] filled with -inf, softmax, @ v.
    B, H, D = 2, 3, 8
    dt = getattr(tp, dtype)
    bias = tp.Tensor(np.tril(np.ones((16, 16), dtype=np.float32)).reshape(1, 1, 16, 16))

    def attend(q, k, v):
        T = q.shape[2]
        att = (q @ tp.transpose(k, -2, -1)) * (1.0 / np.sqrt(D))
        att = tp.masked_fill(att, bias[:, :, :T, :T] == 0, float("-inf"))
        return tp.softmax(att, -1) @ v

    info = tp.InputInfo((B, H, tp.NamedDimension("T", 1, 8, 16), D), dtype=dt)
    exe, program = _compiled(capsys, attend, [info, info, info])
    kinds = _kernels(program)
    assert kinds.count("attention") == 1 and "dot" not in kinds, program
    q, k, v = _rand(B, H, 13, D), _rand(B, H, 13, D), _rand(B, H, 13, D)
    _check(exe(_dev(q, dt), _dev(k, dt), _dev(v, dt)), _sdpa_ref(q, k, v, causal=True), dtype)


def test_gpt2_hand_written_attention_with_static_sizes_becomes_one_kernel(capsys, device):
    # With T static, constant folding turns `bias[:, :, :T, :T] == 0` into a bool constant, and the
    # head split's transpose of k merges with k^T into one transpose (dims [0, 2, 3, 1]).
    B, T, H, D = 2, 12, 3, 8
    bias = tp.Tensor(np.tril(np.ones((16, 16), dtype=np.float32)).reshape(1, 1, 16, 16))

    def attend(qkv):
        q, k, v = (tp.transpose(tp.reshape(x, (B, T, H, D)), 1, 2) for x in tp.split(qkv, 3, dim=2))
        att = (q @ tp.transpose(k, -2, -1)) * (1.0 / np.sqrt(D))
        att = tp.masked_fill(att, bias[:, :, :T, :T] == 0, float("-inf"))
        y = tp.softmax(att, dim=-1) @ v
        return tp.reshape(tp.transpose(y, 1, 2), (B, T, H * D))

    exe, program = _compiled(capsys, attend, [tp.InputInfo((B, T, 3 * H * D), dtype=tp.float32)])
    kinds = _kernels(program)
    assert kinds.count("attention") == 1 and "dot" not in kinds, program
    qkv = _rand(B, T, 3 * H * D)
    heads = lambda x: x.reshape(B, T, H, D).transpose(0, 2, 1, 3)
    q, k, v = (heads(x) for x in np.split(qkv, 3, axis=2))
    want = _sdpa_ref(q, k, v, causal=True).transpose(0, 2, 1, 3).reshape(B, T, H * D)
    _check(exe(_dev(qkv)), want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_repeated_kv_heads_are_read_unrepeated_by_grouped_query_attention(dynamic, capsys, device):
    # Llama's repeat_kv, written with tp.repeat, and v's head split: the attention reads k and v as
    # they are (its own grouped-query indexing does the repeat), so neither is copied.
    B, H, HKV, D = 2, 6, 2, 8

    def attend(q, k, v):
        v = tp.transpose(tp.reshape(v, (B, v.shape[1], HKV, D)), 1, 2)
        k, v = tp.repeat(k, H // HKV, dim=1), tp.repeat(v, H // HKV, dim=1)
        return tp.scaled_dot_product_attention(q, k, v, is_causal=True)

    T = tp.NamedDimension("T", 1, 8, 16) if dynamic else 11
    args = [tp.InputInfo((B, H, T, D), dtype=tp.float32), tp.InputInfo((B, HKV, T, D), dtype=tp.float32),
            tp.InputInfo((B, T, HKV * D), dtype=tp.float32)]
    exe, program = _compiled(capsys, attend, args)
    assert _kernels(program) == ["attention"], program
    q, k, v = _rand(B, H, 11, D), _rand(B, HKV, 11, D), _rand(B, 11, HKV * D)
    heads = v.reshape(B, 11, HKV, D).transpose(0, 2, 1, 3)
    want = _sdpa_ref(q, np.repeat(k, H // HKV, axis=1), np.repeat(heads, H // HKV, axis=1), causal=True)
    _check(exe(_dev(q), _dev(k), _dev(v)), want)


def test_a_repeat_that_is_not_head_grouping_is_kept(capsys, device):
    # Repeated along the sequence, k and v are other keys: the attention reads the copies.
    B, H, D = 1, 2, 4

    def attend(q, k, v):
        return tp.scaled_dot_product_attention(q, tp.repeat(k, 2, dim=2), tp.repeat(v, 2, dim=2))

    args = [tp.InputInfo((B, H, 6, D), dtype=tp.float32), tp.InputInfo((B, H, 3, D), dtype=tp.float32),
            tp.InputInfo((B, H, 3, D), dtype=tp.float32)]
    exe, program = _compiled(capsys, attend, args)
    assert _kernels(program).count("attention") == 1, program
    q, k, v = _rand(B, H, 6, D), _rand(B, H, 3, D), _rand(B, H, 3, D)
    _check(exe(_dev(q), _dev(k), _dev(v)), _sdpa_ref(q, np.repeat(k, 2, axis=2), np.repeat(v, 2, axis=2)))


@pytest.mark.parametrize("dynamic", [False, True])
def test_qkv_projection_stays_one_gemm_read_in_place_by_attention(dynamic, capsys, device, tmp_path):
    # nanoGPT's c_attn: one x @ W + b for q, k and v, split along the last axis. The attention reads
    # each third through a head window, so no GEMM is split and no slice is copied.
    B, H, D, C = 2, 3, 8, 24
    w, b = _rand(C, 3 * C), _rand(3 * C)
    W, bias = tp.Tensor(w), tp.Tensor(b)

    def attend(x):
        T = x.shape[1]
        qkv = x @ W + bias
        q, k, v = (tp.transpose(tp.reshape(t, (B, T, H, D)), 1, 2) for t in tp.split(qkv, 3, dim=2))
        y = tp.scaled_dot_product_attention(q, k, v, is_causal=True)
        return tp.reshape(tp.transpose(y, 1, 2), (B, T, C))

    T = tp.NamedDimension("T", 1, 8, 16) if dynamic else 11
    exe, program = _compiled(capsys, attend, [tp.InputInfo((B, T, C), dtype=tp.float32)])
    assert _kernels(program) == ["dot", "attention"], program
    # Heads [0, 3), [3, 6) and [6, 9) of the projection, for q, k and v (the mask and out read whole).
    assert "heads = [{count = 3}, {start = 3, count = 3}, {start = 6, count = 3}, {}, {}]" in program, program
    x = _rand(B, 11, C)
    heads = lambda t: t.reshape(B, 11, H, D).transpose(0, 2, 1, 3)
    q, k, v = (heads(t) for t in np.split(x @ w + b, 3, axis=2))
    want = _sdpa_ref(q, k, v, causal=True).transpose(0, 2, 1, 3).reshape(B, 11, C)
    _check(exe(_dev(x)), want)
    exe.save(str(tmp_path / "qkv.tpy"))  # the windows are saved with the kernel
    _check(tp.Executable.load(str(tmp_path / "qkv.tpy"))(_dev(x)), want)


def test_attention_with_a_head_size_known_only_at_run_time(device):
    D = tp.NamedDimension("D", 2, 8, 16)
    info = tp.InputInfo((1, 2, 5, D), dtype=tp.float32)
    exe = tp.compile(lambda q, k, v: tp.scaled_dot_product_attention(q, k, v, is_causal=True), args=[info] * 3)
    for d in (8, 3):
        q, k, v = _rand(1, 2, 5, d), _rand(1, 2, 5, d), _rand(1, 2, 5, d)
        _check(exe(_dev(q), _dev(k), _dev(v)), _sdpa_ref(q, k, v, causal=True))

"""Programs one step away from what a compiler rewrite matches (hand-written attention, a causal
mask, repeated key/value heads, a biased product read through column slices, GEMM and convolution
epilogues, BatchNorm folding, common subexpressions, identities), each compiled without the passes
(optimization_level 0) and with them (3) and compared with numpy: where the rewrite must not fire,
the program still computes what it says."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(26)


def _both_levels(fn, want, *arrays, rtol=1e-5, atol=1e-5):
    infos = [tp.InputInfo(a.shape, tp.float32) for a in arrays]
    for level in (0, 3):
        exe = tp.compile(fn, level, args=infos)
        got = exe(*[tp.Tensor(a) for a in arrays])
        got = got if isinstance(got, (tuple, list)) else [got]
        want_list = want if isinstance(want, (tuple, list)) else [want]
        for g, w in zip(got, want_list):
            np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol, err_msg=f"optimization_level={level}")


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


Q, K, V = (RNG.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))


def _scores(q, k, lib):
    return q @ (tp.transpose(k, 2, 3) if lib == "tp" else k.transpose(0, 1, 3, 2))


@pytest.mark.parametrize("mask", [
    np.tril(np.ones((3, 3), bool)),  # the causal rule itself: the control
    np.array([[True, False, False]]),  # one row for every query: every query sees key 0 only
    np.array([[True], [True], [True]]),  # one column for every key: every key visible
    np.ones((1, 1), bool),
], ids=["triangle", "row", "column", "one"])
def test_a_constant_mask_is_causal_only_when_it_is_the_whole_triangle(device, mask):
    def attend(q, k, v, lib):
        s = _scores(q, k, lib) * 0.5
        if lib == "tp":
            s = tp.where(tp.Tensor(mask), s, tp.Tensor(float("-inf")))
            return tp.softmax(s, dim=-1) @ v
        return _softmax(np.where(mask, s, -np.inf)) @ v

    _both_levels(lambda q, k, v: attend(q, k, v, "tp"), attend(Q, K, V, "np"), Q, K, V)


@pytest.mark.parametrize("variant", ["per_head_scale", "constant_over_scores", "softmax_over_queries",
                                     "scores_also_returned", "additive_product"])
def test_attention_one_step_from_the_matched_form(device, variant):
    head_scale = np.array([0.5, 0.25], np.float32).reshape(1, 2, 1, 1)

    def attend(q, k, v, lib):
        s = _scores(q, k, lib)
        softmax = (lambda x, d: tp.softmax(x, dim=d)) if lib == "tp" else _softmax
        if variant == "per_head_scale":
            return softmax(s * (tp.Tensor(head_scale) if lib == "tp" else head_scale), -1) @ v
        if variant == "constant_over_scores":
            return softmax(2.0 / s, -1) @ v
        if variant == "softmax_over_queries":
            return softmax(s * 0.5, -2) @ v
        if variant == "scores_also_returned":
            scaled = s * 0.5
            return softmax(scaled, -1) @ v, scaled
        return softmax(s * 0.5 + _scores(v, q, lib), -1) @ v  # the "mask" is another product

    _both_levels(lambda q, k, v: attend(q, k, v, "tp"), attend(Q, K, V, "np"), Q, K, V, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("form", ["interleaved", "tiled"])
def test_key_value_heads_repeated_in_turn_or_tiled(device, form):
    # q with 4 heads over k and v of 2: each kv head repeated in turn (grouped-query attention,
    # which the kernel reads unrepeated) or the 2 heads tiled twice (which it must not).
    q = RNG.standard_normal((1, 4, 3, 4)).astype(np.float32)
    k, v = (RNG.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(2))

    def heads(x, lib):
        if lib == "np":
            return np.repeat(x, 2, axis=1) if form == "interleaved" else np.concatenate([x, x], axis=1)
        if form == "interleaved":
            return tp.reshape(tp.expand(tp.reshape(x, (1, 2, 1, 3, 4)), (1, 2, 2, 3, 4)), (1, 4, 3, 4))
        return tp.reshape(tp.expand(tp.reshape(x, (1, 1, 2, 3, 4)), (1, 2, 2, 3, 4)), (1, 4, 3, 4))

    def attend(q, k, v, lib):
        if lib == "tp":
            return tp.scaled_dot_product_attention(q, heads(k, lib), heads(v, lib))
        return _softmax(_scores(q, heads(k, lib), lib) / 2.0) @ heads(v, lib)

    _both_levels(lambda q, k, v: attend(q, k, v, "tp"), attend(q, k, v, "np"), q, k, v, rtol=1e-4)


W = RNG.standard_normal((2, 4)).astype(np.float32)
X = RNG.standard_normal((3, 2)).astype(np.float32)


@pytest.mark.parametrize("bias", [np.array([5.0], np.float32), np.arange(3, dtype=np.float32).reshape(3, 1),
                                  np.arange(4, dtype=np.float32)], ids=["one", "per_row", "per_column"])
def test_a_biased_product_read_through_column_slices(device, bias):
    def fn(x, lib):
        y = x @ (tp.Tensor(W) if lib == "tp" else W) + (tp.Tensor(bias) if lib == "tp" else bias)
        return y[:, :2] * y[:, 2:]

    _both_levels(lambda x: fn(x, "tp"), fn(X, "np"), X)


@pytest.mark.parametrize("epilogue", ["max_half", "min_zero", "bias_per_row", "relu_also_returned"])
def test_gemm_epilogues_one_step_from_bias_and_relu(device, epilogue):
    b_col = np.arange(4, dtype=np.float32)
    b_row = np.arange(3, dtype=np.float32).reshape(3, 1)

    def fn(x, lib):
        T = (lambda a: tp.Tensor(a)) if lib == "tp" else (lambda a: a)
        mx = tp.maximum if lib == "tp" else np.maximum
        mn = tp.minimum if lib == "tp" else np.minimum
        y = x @ T(W)
        if epilogue == "max_half":
            return mx(y + T(b_col), T(np.float32(0.5)))
        if epilogue == "min_zero":
            return mn(y + T(b_col), T(np.float32(0.0)))
        if epilogue == "bias_per_row":
            return mx(y + T(b_row), T(np.float32(0.0)))
        z = y + T(b_col)
        return mx(z, T(np.float32(0.0))), z

    _both_levels(lambda x: fn(x, "tp"), fn(X, "np"), X)


def _conv1x1(x, w):
    return np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x)


@pytest.mark.parametrize("variant", ["divided_by_conv", "scale_along_width", "conv_also_returned", "max_by_channel"])
def test_a_convolution_one_step_from_batchnorm_folding(device, variant):
    x = RNG.standard_normal((1, 3, 2, 4)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    per_channel = np.array([2.0, -0.5], np.float32).reshape(2, 1, 1)
    per_width = np.array([1.0, 2.0, 3.0, 4.0], np.float32)

    def fn(x, lib):
        if lib == "tp":
            conv = tp.Conv(3, 2, (1, 1), bias=False)
            conv.weight = tp.Tensor(w)
            y, T = conv(x), tp.Tensor
        else:
            y, T = _conv1x1(x, w), (lambda a: a)
        if variant == "divided_by_conv":
            return T(per_channel) / (y * y + 1.0)
        if variant == "scale_along_width":
            return y * T(per_width)
        if variant == "conv_also_returned":
            return y * T(per_channel) + 1.0, y
        return (tp.maximum if lib == "tp" else np.maximum)(y, T(per_channel))

    _both_levels(lambda x: fn(x, "tp"), fn(x, "np"), x, rtol=1e-4)


def test_values_that_differ_only_in_an_attribute_are_not_merged(device):
    x = RNG.standard_normal((3, 3)).astype(np.float32) * 10

    def fn(x, lib):
        if lib == "tp":
            return (tp.sum(x, 0) - tp.sum(x, 1), x[0:2] - x[1:3], tp.permute(x, (1, 0)) - x,
                    tp.cast(tp.cast(x, tp.float16), tp.float32) - tp.cast(tp.cast(x, tp.bfloat16), tp.float32),
                    x[::-1] - x, 0.0 - x, 1.0 / x)
        f16 = x.astype(np.float16).astype(np.float32)
        bf16 = (x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
        return (x.sum(0) - x.sum(1), x[0:2] - x[1:3], x.T - x, f16 - bf16.view(np.float32), x[::-1] - x, -x, 1.0 / x)

    _both_levels(lambda x: fn(x, "tp"), fn(x, "np"), x)

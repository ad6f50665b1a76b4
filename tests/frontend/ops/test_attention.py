"""scaled_dot_product_attention against numpy: causal, bool and additive masks; eager, compiled
static and compiled dynamic (sequence length), on every device."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(5)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _sdpa_ref(q, k, v, mask=None, causal=False):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        keep = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        scores = np.where(keep, scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


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
            got = exe(_dev(q2), _dev(k2), _dev(v2))
            np.testing.assert_allclose(np.array(got.tolist()), _sdpa_ref(q2, k2, v2, causal=causal), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-4, atol=1e-5)


def test_attention_with_bool_and_additive_masks(device):
    q, k, v = _rand(2, 4, 8), _rand(2, 6, 8), _rand(2, 6, 3)
    keep = RNG.random((4, 6)) > 0.3
    keep[:, 0] = True  # every row keeps a key
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(keep))
    np.testing.assert_allclose(np.array(got.tolist()), _sdpa_ref(q, k, v, mask=keep), rtol=1e-4, atol=1e-5)
    bias = _rand(2, 4, 6)
    got = tp.scaled_dot_product_attention(_dev(q), _dev(k), _dev(v), attn_mask=_dev(bias))
    np.testing.assert_allclose(np.array(got.tolist()), _sdpa_ref(q, k, v, mask=bias), rtol=1e-4, atol=1e-5)


def test_attention_rejects_integer_and_vector_inputs():
    with pytest.raises(tp.TripyException, match="expected float tensors") as e:
        x = tp.ones((2, 2), dtype=tp.int32)
        tp.scaled_dot_product_attention(x, x, x)
    assert "test_attention.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="key must have rank >= 2"):
        tp.scaled_dot_product_attention(tp.ones((2, 2)), tp.ones((2,)), tp.ones((2, 2)))

"""The normalizations of core/src/trace/ops_norm.cc (LayerNorm, RMSNorm, GroupNorm, InstanceNorm)
against numpy in float64: eager, and compiled with static shapes and with dynamic batch and
spatial dims at their min, opt and max; float16/bfloat16 statistics in float32; bad inputs are
errors naming the user's line (at the call, or at run time for dynamic channels)."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(31)
HERE = "test_norm.py"


def _layer_ref(x, w, b, k, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axes, keepdims=True) + eps) * w + b


def _rms_ref(x, w, k, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps) * w


def _group_ref(x, groups, w, b, eps=1e-5):
    g = x.reshape(x.shape[0], groups, -1)
    normed = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = [1, -1] + [1] * (x.ndim - 2)
    return normed * w.reshape(shape) + b.reshape(shape)


def _params(shape, dtype=np.float32):
    return (RNG.uniform(0.5, 1.5, shape).astype(dtype), RNG.standard_normal(shape).astype(dtype))


def _case(name):
    """(module, numpy reference of x, input shape (C = 6), dynamic dims as tp.InputInfo dims)."""
    if name == "layer":
        w, b = _params((5, 7))
        m = tp.LayerNorm((5, 7))
        m.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
        return m, lambda x: _layer_ref(x, w, b, 2), (3, 5, 7), ((1, 3, 6), 5, 7)
    if name == "rms":
        w, _ = _params((7,))
        m = tp.RMSNorm(7, eps=1e-3)
        m.load_state_dict({"weight": tp.Tensor(w)})
        return m, lambda x: _rms_ref(x, w, 1, 1e-3), (3, 5, 7), ((1, 3, 6), (1, 5, 9), 7)
    w, b = _params((6,))
    groups = 3 if name == "group" else 6
    m = tp.GroupNorm(3, 6) if name == "group" else tp.InstanceNorm(6, eps=1e-3)
    m.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
    eps = 1e-5 if name == "group" else 1e-3
    return m, lambda x: _group_ref(x, groups, w, b, eps), (2, 6, 4, 5), ((1, 2, 3), 6, (2, 4, 8), (1, 5, 5))


NAMES = ["layer", "rms", "group", "instance"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_norm_matches_numpy(name, mode):
    module, ref, shape, dynamic = _case(name)
    if mode == "eager":
        runs, fn = [shape], lambda x: module(tp.Tensor(x))
    else:
        dims = shape if mode == "static" else dynamic
        exe = tp.compile(module, args=[tp.InputInfo(dims, dtype=tp.float32)])
        fn = lambda x: exe(tp.Tensor(x))
        # Every dim at its min, its opt and its max.
        runs = [shape] if mode == "static" else [
            tuple(d if isinstance(d, int) else d[i] for d in dynamic) for i in range(3)
        ]
    for s in runs:
        x = (RNG.standard_normal(s) * 3 + 1).astype(np.float32)
        got = np.asarray(fn(x))
        want = ref(x.astype(np.float64))
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_float16_statistics_are_computed_in_float32(name):
    # A large offset and many elements per row: float16 sums lose the statistics' low bits (and
    # the sum of squares of RMSNorm overflows 65504).
    module, ref, shape, _ = _case(name)
    shape = shape[:-1] + (400,) if name in ("layer", "rms") else (2, 6, 20, 20)
    if name == "layer":
        w, b = _params((400,))
        module = tp.LayerNorm(400, dtype=tp.float16)
        module.load_state_dict({"weight": tp.Tensor(w.astype(np.float16)), "bias": tp.Tensor(b.astype(np.float16))})
        ref = lambda x: _layer_ref(x, w.astype(np.float16).astype(np.float64), b.astype(np.float16), 1)
        shape = (3, 400)
    elif name == "rms":
        w, _ = _params((400,))
        module = tp.RMSNorm(400, dtype=tp.float16)
        module.load_state_dict({"weight": tp.Tensor(w.astype(np.float16))})
        ref = lambda x: _rms_ref(x, w.astype(np.float16).astype(np.float64), 1)
        shape = (3, 400)
    else:
        w, b = _params((6,))
        module = tp.GroupNorm(3, 6, dtype=tp.float16) if name == "group" else tp.InstanceNorm(6, dtype=tp.float16)
        module.load_state_dict({"weight": tp.Tensor(w.astype(np.float16)), "bias": tp.Tensor(b.astype(np.float16))})
        groups = 3 if name == "group" else 6
        ref = lambda x: _group_ref(x, groups, w.astype(np.float16).astype(np.float64),
                                   b.astype(np.float16).astype(np.float64))
    x = (RNG.standard_normal(shape) * 2 + 30).astype(np.float16)
    got = module(tp.Tensor(x))
    assert got.dtype == tp.float16
    want = ref(x.astype(np.float64))
    # One rounding to float16 at the end: half an ulp (2**-11 relative) plus float32's own error.
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=2**-10, atol=2e-3)


def test_bfloat16_layer_and_rms_norm_round_once():
    x = (RNG.standard_normal((4, 256)) + 8).astype(np.float32)
    ln, rms = tp.LayerNorm(256, dtype=tp.bfloat16), tp.RMSNorm(256, dtype=tp.bfloat16)
    ln.load_state_dict({"weight": tp.ones((256,), dtype=tp.bfloat16), "bias": tp.zeros((256,), dtype=tp.bfloat16)})
    rms.load_state_dict({"weight": tp.ones((256,), dtype=tp.bfloat16)})
    xb = tp.cast(tp.Tensor(x), tp.bfloat16)
    x64 = np.asarray(tp.cast(xb, tp.float32)).astype(np.float64)  # the bfloat16 input, exactly
    for module, want in ((ln, _layer_ref(x64, 1.0, 0.0, 1)), (rms, _rms_ref(x64, 1.0, 1))):
        got = np.asarray(tp.cast(module(xb), tp.float32)).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2**-8, atol=2**-7)


def test_a_chain_of_residual_adds_and_rms_norms_matches_numpy(device):
    # Nothing between them, so the GPU fuses them into one kernel: 48 reductions in a chain, each
    # behind a barrier, whose partial sums must share a block's shared memory.
    norms = []
    for _ in range(24):
        norm = tp.RMSNorm(256)
        w, _ = _params((256,))
        norm.load_state_dict({"weight": tp.Tensor(w)})
        norms.append((norm, w))

    def chain(h, r):
        for norm, _ in norms:
            h = h + r
            r = norm(h)
        return h, r

    exe = tp.compile(chain, args=[tp.InputInfo((3, 256), dtype=tp.float32)] * 2)
    h, r = (RNG.standard_normal((3, 256)).astype(np.float32) for _ in range(2))
    got_h, got_r = (np.asarray(t) for t in exe(tp.Tensor(h), tp.Tensor(r)))
    want_h, want_r = h.astype(np.float64), r.astype(np.float64)
    for _, w in norms:
        want_h = want_h + want_r
        want_r = _rms_ref(want_h, w, 1)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_r, want_r, rtol=1e-4, atol=1e-4)


def test_dynamic_channels_that_do_not_match_are_an_error_of_the_call_naming_the_norm():
    norm = tp.GroupNorm(2, 4)
    norm.load_state_dict({"weight": tp.ones((4,)), "bias": tp.zeros((4,))})

    def f(x):
        return norm(x)

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo((1, (2, 4, 6), 3), dtype=tp.float32)])
    assert np.asarray(exe(tp.Tensor(np.ones((1, 4, 3), np.float32)))).shape == (1, 4, 3)
    with pytest.raises(tp.TripyException, match="GroupNorm expects 4 channels") as e:
        exe(tp.Tensor(np.ones((1, 6, 3), np.float32)))
    assert f"{HERE}:{line}" in str(e.value)


def test_bad_norm_inputs_name_the_line():
    ln, rms, gn, inorm = tp.LayerNorm(3), tp.RMSNorm((2, 3)), tp.GroupNorm(2, 4), tp.InstanceNorm(3)
    for call, match in (
        (lambda: ln(tp.ones((2, 4))), r"LayerNorm's weight has shape \(3,\), but the input's normalized dims are \(4,\)"),
        (lambda: rms(tp.ones((3,))), "RMSNorm normalises 2 dims of a rank 1 input"),
        (lambda: rms(tp.ones((2, 2, 4))), "RMSNorm's weight has shape"),
        (lambda: gn(tp.ones((1, 3, 2))), r"GroupNorm expects an input of shape \(N, 4, ...\), but got shape \(1, 3, 2\)"),
        (lambda: inorm(tp.ones((3,))), r"InstanceNorm expects an input of shape \(N, 3, ...\)"),
        (lambda: gn(tp.ones((1, 4), dtype=tp.int32)), "Unsupported data type for GroupNorm"),
        (lambda: ln(tp.ones((2, 3), dtype=tp.float16)), "Mismatched data types for LayerNorm"),
    ):
        with pytest.raises(tp.TripyException, match=match) as e:
            call()
        assert f"{HERE}:{call.__code__.co_firstlineno}" in str(e.value)

"""resize against a numpy reference written from the interpolation formulas (the ones
torch.nn.functional.interpolate uses): nearest, linear and cubic, sizes and scales, align_corners;
eager, compiled static and compiled dynamic (batch), on every device."""

import math

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(6)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _cubic(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def _matrix(n_in, n_out, mode, align_corners, ratio):
    """The (n_out, n_in) interpolation matrix of one dim, element by element."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        if mode == "nearest":
            m[i, min(int(math.floor(i * ratio)), n_in - 1)] = 1
            continue
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = (i + 0.5) * ratio - 0.5
        if mode == "linear":
            src = max(src, 0.0)
            lo = min(int(math.floor(src)), n_in - 1)
            t = src - lo
            m[i, lo] += 1 - t
            m[i, min(lo + 1, n_in - 1)] += t
        else:
            base = int(math.floor(src))
            for off in (-1, 0, 1, 2):
                m[i, min(max(base + off, 0), n_in - 1)] += _cubic(src - (base + off))
    return m


def _resize_ref(x, out_shape, mode, align_corners, ratios):
    out = x.astype(np.float64)
    for dim, (n_in, n_out, ratio) in enumerate(zip(x.shape, out_shape, ratios)):
        if n_in == n_out and ratio == n_in / n_out:
            continue
        out = np.moveaxis(np.tensordot(_matrix(n_in, n_out, mode, align_corners, ratio), np.moveaxis(out, dim, 0), 1), 0, dim)
    return out.astype(np.float32)


SHAPE = (2, 3, 4, 5)
CASES = {
    # name: (mode, output_shape, scales, align_corners)
    "nearest_up": ("nearest", (2, 3, 8, 7), None, False),
    "nearest_down": ("nearest", (2, 3, 3, 2), None, False),
    "linear_up": ("linear", (2, 3, 7, 9), None, False),
    "linear_down": ("linear", (2, 3, 3, 3), None, False),
    "linear_align": ("linear", (2, 3, 6, 8), None, True),
    "linear_scales": ("linear", None, (1, 1, 2.0, 1.5), False),
    "cubic_up": ("cubic", (2, 3, 7, 10), None, False),
    "cubic_align": ("cubic", (2, 3, 5, 9), None, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_resize_matches_numpy(name, mode, device):
    interp, output_shape, scales, align = CASES[name]
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    if scales is not None:
        out_shape = [int(math.floor(n * s)) for n, s in zip(SHAPE, scales)]
        ratios = [1.0 / s for s in scales]
    else:
        out_shape, ratios = output_shape, [n / m for n, m in zip(SHAPE, output_shape)]
    ref = _resize_ref(x, out_shape, interp, align, ratios)

    def fn(t):
        shape = None if output_shape is None else (t.shape[0],) + output_shape[1:]
        return tp.resize(t, output_shape=shape, scales=scales, mode=interp, align_corners=align)

    if mode == "eager":
        out = fn(_dev(x))
    else:
        dims = SHAPE if mode == "static" else ((1, 2, 3),) + SHAPE[1:]
        exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])
        out = exe(_dev(x))
        if mode == "dynamic":
            np.testing.assert_allclose(np.array(exe(_dev(x[:1].copy())).tolist()), ref[:1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-5, atol=1e-5)


SPATIAL = {
    # name: (mode, align_corners, output (H, W)); the input's H and W are dynamic
    "nearest": ("nearest", False, (7, 4)),
    "linear": ("linear", False, (7, 4)),
    "linear_align": ("linear", True, (7, 2)),
    "cubic": ("cubic", False, (6, 9)),
    "cubic_align": ("cubic", True, (5, 3)),
}


@pytest.mark.parametrize("name", sorted(SPATIAL))
def test_resize_of_dynamic_spatial_dims_matches_numpy(name, device):
    interp, align, (h_out, w_out) = SPATIAL[name]
    H, W = tp.NamedDimension("H", 1, 4, 12), tp.NamedDimension("W", 2, 5, 9)

    def fn(t):
        return tp.resize(t, output_shape=(t.shape[0], 2, h_out, w_out), mode=interp, align_corners=align)

    exe = tp.compile(fn, args=[tp.InputInfo(((1, 2, 3), 2, H, W), dtype=tp.float32)])
    # the minimum sizes, down- and up-sampling, sizes equal to the output's, the maximum
    for b, h, w in ((1, 1, 2), (2, 4, 5), (3, 12, 9), (1, h_out, w_out), (2, 3, 8)):
        x = RNG.standard_normal((b, 2, h, w)).astype(np.float32)
        ref = _resize_ref(x, (b, 2, h_out, w_out), interp, align, [1.0, 1.0, h / h_out, w / w_out])
        np.testing.assert_allclose(np.array(exe(_dev(x)).tolist()), ref, rtol=1e-5, atol=1e-5)


def test_dynamic_dims_cannot_be_resized_by_scales():
    H = tp.NamedDimension("H", 1, 4, 12)
    with pytest.raises(tp.TripyException, match="resize it with output_shape") as e:
        tp.compile(lambda t: tp.resize(t, scales=(1, 2.0)), args=[tp.InputInfo((1, H), dtype=tp.float32)])
    assert "test_resize.py" in str(e.value)


def test_nearest_resize_keeps_integers(device):
    x = np.arange(6, dtype=np.int32).reshape(1, 2, 3)
    out = tp.resize(_dev(x), output_shape=(1, 4, 3), mode="nearest")
    assert out.tolist() == [[[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5]]]


def test_resize_rejects_bad_arguments():
    with pytest.raises(tp.TripyException, match="give exactly one of output_shape and scales") as e:
        tp.resize(tp.ones((1, 2)), output_shape=(1, 4), scales=(1, 2))
    assert "test_resize.py" in str(e.value)
    with pytest.raises(tp.TripyException, match=r"expected 2 entries \(one per dim\)"):
        tp.resize(tp.ones((1, 2)), output_shape=(4,))
    with pytest.raises(tp.TripyException, match="unsupported mode 'area'"):
        tp.resize(tp.ones((1, 2)), output_shape=(1, 4), mode="area")
    with pytest.raises(tp.TripyException, match="linear interpolation needs a float tensor"):
        tp.resize(tp.ones((1, 2), dtype=tp.int32), output_shape=(1, 4))


def test_nearest_resize_of_dynamic_dims_keeps_integers(device):
    H, W = tp.NamedDimension("H", 1, 3, 6), tp.NamedDimension("W", 2, 4, 8)
    exe = tp.compile(lambda t: tp.resize(t, output_shape=(5, 3), mode="nearest"),
                     args=[tp.InputInfo((H, W), dtype=tp.int32)])
    for h, w in ((1, 2), (3, 4), (6, 8)):  # min, opt, max
        x = np.arange(h * w, dtype=np.int32).reshape(h, w)
        ref = x[[i * h // 5 for i in range(5)]][:, [j * w // 3 for j in range(3)]]
        assert exe(_dev(x)).tolist() == ref.tolist()


@pytest.mark.parametrize("interp", ["linear", "cubic"])
def test_float16_resize_of_dynamic_dims_matches_numpy(interp, device):
    W = tp.NamedDimension("W", 2, 5, 9)
    exe = tp.compile(lambda t: tp.resize(t, output_shape=(2, 7), mode=interp),
                     args=[tp.InputInfo((2, W), dtype=tp.float16)])
    for w in (2, 5, 9):  # min, opt, max
        x = RNG.standard_normal((2, w)).astype(np.float16)
        ref = _resize_ref(x.astype(np.float32), (2, 7), interp, False, [1.0, w / 7])
        np.testing.assert_allclose(np.array(exe(_dev(x)).tolist()), ref, rtol=1e-2, atol=1e-2)


def test_eager_resizes_differing_only_in_align_corners_or_scales_are_not_confused(device):
    # Same input and output shapes: only the attributes tell the compiled subgraphs apart.
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    for align in (False, True, False):
        out = tp.resize(_dev(x), output_shape=(1, 7), mode="linear", align_corners=align)
        ref = _resize_ref(x, (1, 7), "linear", align, [1.0, 4 / 7])
        np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-5, atol=1e-5)
    for scale in (1.5, 1.6):  # both give 6 elements, from different source positions
        out = tp.resize(_dev(x), scales=(1, scale), mode="linear")
        ref = _resize_ref(x, (1, 6), "linear", False, [1.0, 1 / scale])
        np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-5, atol=1e-5)


def test_dynamic_dims_cannot_take_another_dims_size():
    H, W = tp.NamedDimension("H", 1, 4, 12), tp.NamedDimension("W", 2, 5, 9)
    with pytest.raises(tp.TripyException, match="must be an int or that dimension's own size") as e:
        tp.compile(lambda t: tp.resize(t, output_shape=(t.shape[1], t.shape[1])),
                   args=[tp.InputInfo((H, W), dtype=tp.float32)])
    assert "test_resize.py" in str(e.value)

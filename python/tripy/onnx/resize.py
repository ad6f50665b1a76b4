"""ONNX's Resize (and Upsample) as Tripy ops. Where ONNX's rule is ``tp.resize``'s (nearest with
``asymmetric`` coordinates and ``floor``, which ``torch.onnx.export`` writes for nearest
interpolation; linear and cubic with Keys' a = -0.75 at pixel centres or aligned corners, as torch's
bilinear and bicubic), the fused op runs. Every other coordinate rule, nearest rounding, cubic
coefficient and ``exclude_outside`` is computed here for static dims: each resized dim's source
indices and weights (ONNX's reference rules, edge values repeated past the ends), then a gather per
tap and their weighted sum."""

import math

from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.resize import resize
from tripy.frontend.ops.shape_ops import gather, reshape
from tripy.frontend.tensor import Tensor

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MODES = ("nearest", "linear", "cubic")


def _source(i, n_in, length, n_out, scale, coordinate, roi):
    """The position in the input that output position ``i`` reads (ONNX's coordinate rules;
    ``length`` is ``n_in * scale`` before rounding down to ``n_out`` where scales were given)."""
    if coordinate == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if coordinate == "half_pixel_symmetric":  # opset 19: centred when rounding shortened the output
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (i + 0.5) / scale - 0.5
    if coordinate == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if length > 1 else 0.0
    if coordinate == "align_corners":
        return 0.0 if length == 1 else i * (n_in - 1) / (length - 1)
    if coordinate == "asymmetric":
        return i / scale
    if coordinate == "tf_crop_and_resize":
        start, end = roi
        if n_out == 1:
            return (start + end) / 2 * (n_in - 1)
        return start * (n_in - 1) + i * (end - start) * (n_in - 1) / (n_out - 1)
    return (i + 0.5) / scale  # tf_half_pixel_for_nn


def _nearest(x, rule):
    if rule == "floor":
        return math.floor(x)
    if rule == "ceil":
        return math.ceil(x)
    if x - math.floor(x) == 0.5:
        return math.floor(x) if rule == "round_prefer_floor" else math.ceil(x)
    return math.floor(x + 0.5)


def _cubic_weights(t, a):
    """Keys' kernel at the four taps around a fraction ``t`` (distances 1 + t, t, 1 - t, 2 - t)."""

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def taps(n_in, n_out, scale, mode, coordinate, nearest_rule="round_prefer_floor", cubic_a=-0.75,
         exclude_outside=False, roi=(0.0, 1.0)):
    """(indices, weights, outside) of one dim: ``out[i] = sum_k weights[k][i] * in[indices[k][i]]``
    (nearest: one tap, no weights); ``outside[i]`` where tf_crop_and_resize reads past the input."""
    clamp = lambda j: min(max(j, 0), n_in - 1)  # noqa: E731
    length = n_in * scale  # the output's length before rounding down, which the coordinate rules use
    sources = [_source(i, n_in, length, n_out, scale, coordinate, roi) for i in range(n_out)]
    outside = [coordinate == "tf_crop_and_resize" and not 0 <= x <= n_in - 1 for x in sources]
    if mode == "nearest":
        return [[clamp(_nearest(x, nearest_rule)) for x in sources]], None, outside
    count = 2 if mode == "linear" else 4
    first = 0 if mode == "linear" else -1
    indices = [[] for _ in range(count)]
    weights = [[] for _ in range(count)]
    for x in sources:
        base = math.floor(x)
        t = x - base
        w = [1.0 - t, t] if mode == "linear" else _cubic_weights(t, cubic_a)
        positions = [base + first + k for k in range(count)]
        if exclude_outside:
            w = [wk if 0 <= p < n_in else 0.0 for wk, p in zip(w, positions)]
            total = sum(w)
            w = [wk / total for wk in w] if total else w
        for k in range(count):
            indices[k].append(clamp(positions[k]))
            weights[k].append(w[k])
    return indices, weights, outside


def fused_rule(mode, coordinate, nearest_rule, cubic_a, exclude_outside):
    """``tp.resize``'s (mode, align_corners) for this ONNX rule, or None where it differs."""
    if mode == "nearest":
        return ("nearest", False) if coordinate == "asymmetric" and nearest_rule == "floor" else None
    if mode == "cubic" and (cubic_a != -0.75 or exclude_outside):
        return None
    if coordinate in ("half_pixel", "pytorch_half_pixel"):
        return mode, False
    if coordinate == "align_corners":
        return mode, True
    return None


def onnx_resize(x, sizes, scales, mode, coordinate, nearest_rule, cubic_a, exclude_outside, what, roi=None,
                extrapolation=0.0):
    """``x`` resized to ``sizes`` (ints or sizes of ``x`` kept) that ``scales`` (floats, or None when
    the sizes were given) produce; ``roi`` (starts, then ends, one per dim) is tf_crop_and_resize's
    crop. ``what(message)`` raises naming the node."""
    rank = x.rank
    crop = coordinate == "tf_crop_and_resize"
    changed = [d for d in range(rank) if crop or not (isinstance(sizes[d], int) and isinstance(x.shape[d], int)
                                                      and sizes[d] == x.shape[d] and (scales is None or scales[d] == 1.0))]
    if not changed:
        return x
    fused = fused_rule(mode, coordinate, nearest_rule, cubic_a, exclude_outside)
    if fused is not None and coordinate == "pytorch_half_pixel" and any(sizes[d] == 1 for d in changed):
        fused = None  # a size of 1 reads position 0, not the centre
    if fused is not None and coordinate == "align_corners" and scales is not None and any(
            not isinstance(x.shape[d], int) or x.shape[d] * scales[d] != sizes[d] for d in changed):
        fused = None  # corners map by the length before rounding down
    if fused is not None:
        tp_mode, align = fused
        if scales is not None and all(isinstance(x.shape[d], int) for d in changed):
            return resize(x, scales=list(scales), mode=tp_mode, align_corners=align)
        return resize(x, output_shape=list(sizes), mode=tp_mode, align_corners=align)
    for d in changed:
        n_in, n_out = x.shape[d], sizes[d]
        if not isinstance(n_in, int) or not isinstance(n_out, int):
            what(f"mode={mode!r} with coordinate_transformation_mode={coordinate!r} needs static sizes, but dim {d} "
                 "is dynamic")
        scale = scales[d] if scales is not None else n_out / n_in
        box = (roi[d], roi[d + rank]) if crop else (0.0, 1.0)
        indices, weights, outside = taps(n_in, n_out, scale, mode, coordinate, nearest_rule, cubic_a, exclude_outside,
                                         box)
        out = None
        for k, index in enumerate(indices):
            tap = gather(x, d, Tensor(index))
            if weights is not None:
                w = reshape(Tensor(weights[k], dtype=x.dtype), [n_out] + [1] * (rank - d - 1))
                tap = tap * w
            out = tap if out is None else out + tap
        if any(outside):  # later dims interpolate among these fills, which keeps them (weights sum to 1)
            mask = reshape(Tensor(outside), [n_out] + [1] * (rank - d - 1))
            out = where(mask, Tensor(extrapolation, dtype=x.dtype), out)
        x = out
    return x

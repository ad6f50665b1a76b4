"""ONNX's RoiAlign (detection heads: an [N, C, H, W] feature map pooled over [R, 4] boxes into
[R, C, output_height, output_width]) as Tripy ops, with the rules of ONNX Runtime's kernel: each bin
is sampled on a sampling_ratio x sampling_ratio grid; a sample reads the map bilinearly (a sample
beyond one pixel outside the map reads zero, one at the far edge reads the edge), the bin takes the
mean (avg) or the largest weighted tap (max) of its samples. The sample positions follow the boxes,
which are runtime values, so they are tensors: one gather over the map's pixels per tap. With
sampling_ratio 0 the grid of each bin grows with its box, a count that depends on input values,
which a static graph cannot hold: that form is refused at load. Its row joins the converter table
in ``converters.py``."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.elementwise import floor, maximum, minimum, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.reduce import max, sum
from tripy.frontend.ops.shape_ops import gather, permute, reshape, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.onnx.graph import _as_dtype_of
from tripy.onnx.rows import Row, attr_is, checks


def _adaptive_refused(n):
    if n.attr("sampling_ratio", 0) <= 0:
        return ("sampling_ratio=0 (adaptive) samples each bin on a grid sized by its box, a count that depends on the "
                "boxes' values, which Tripy's static graph cannot hold; export with sampling_ratio > 0 (e.g. 2)")
    return None


def _axis_samples(start, bin_size, pooled, grid, size, like):
    """For one axis: per box [R, pooled * grid] the low and high pixel, the weight of the high one,
    and whether the sample is inside [-1, size]."""
    fractions = [p + (g + 0.5) / grid for p in range(pooled) for g in range(grid)]
    at = unsqueeze(start, 1) + unsqueeze(bin_size, 1) * Tensor(fractions, dtype=like.dtype)  # [R, S]
    inside = (at >= -1.0) & (at <= float(size))
    at = maximum(at, _as_dtype_of(0.0, at))
    low = floor(at)
    at_edge = low >= float(size - 1)
    low = minimum(low, _as_dtype_of(float(size - 1), low))
    high = minimum(low + 1.0, _as_dtype_of(float(size - 1), low))
    frac = where(at_edge, at * 0.0, at - low)
    return cast(low, dtypes.int64), cast(high, dtypes.int64), frac, inside


def _roi_align(ctx, n):
    x, rois, batch = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1]), ctx.tensor(n.inputs[2])
    if x.rank != 4:
        _raise_here(f"ONNX {n.describe()}: RoiAlign needs an [N, C, H, W] input, not rank {x.rank}.")
    _, channels, height, width = x.shape
    if not isinstance(height, int) or not isinstance(width, int):
        _raise_here(f"ONNX {n.describe()}: RoiAlign needs the input's height and width static.")
    out_h, out_w = n.attr("output_height", 1), n.attr("output_width", 1)
    grid = n.attr("sampling_ratio", 0)
    scale = float(n.attr("spatial_scale", 1.0))
    # opset 16 added half_pixel (and made it the default); opset 10 always used the legacy rule
    half_pixel = n.opset >= 16 and n.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    rois = rois if rois.dtype == x.dtype else cast(rois, x.dtype)
    offset = 0.5 if half_pixel else 0.0
    x0, y0, x1, y1 = (rois[:, i] * scale - offset for i in range(4))
    roi_w, roi_h = x1 - x0, y1 - y0
    if not half_pixel:  # the legacy rule makes every box at least one pixel
        roi_w, roi_h = maximum(roi_w, _as_dtype_of(1.0, roi_w)), maximum(roi_h, _as_dtype_of(1.0, roi_h))
    y_low, y_high, ly, y_in = _axis_samples(y0, roi_h / float(out_h), out_h, grid, height, x)
    x_low, x_high, lx, x_in = _axis_samples(x0, roi_w / float(out_w), out_w, grid, width, x)
    valid = unsqueeze(y_in, 2) & unsqueeze(x_in, 1)  # [R, SY, SX]
    zero = _as_dtype_of(0.0, ly)
    ly, lx = unsqueeze(ly, 2), unsqueeze(lx, 1)
    # the map's pixels as rows [N * H * W, C]; a tap reads row b * H * W + y * W + x
    pixels = reshape(permute(x, [0, 2, 3, 1]), [-1, channels])
    base = unsqueeze(unsqueeze(cast(batch, dtypes.int64) * (height * width), 1), 2)
    taps = []
    for ys, wy in ((y_low, 1.0 - ly), (y_high, ly)):
        for xs, wx in ((x_low, 1.0 - lx), (x_high, lx)):
            weight = where(valid, wy * wx, zero)  # [R, SY, SX]
            picked = gather(pixels, 0, base + unsqueeze(ys * width, 2) + unsqueeze(xs, 1))  # [R, SY, SX, C]
            taps.append(picked * unsqueeze(weight, 3))
    bins = [-1, out_h, grid, out_w, grid, channels]
    if n.attr("mode", "avg") == "max":
        best = taps[0]
        for t in taps[1:]:
            best = maximum(best, t)
        out = max(reshape(best, bins), [2, 4])
    else:
        out = sum(reshape(taps[0] + taps[1] + taps[2] + taps[3], bins), [2, 4]) / float(grid * grid)
    return permute(out, [0, 3, 1, 2])


ROWS = {
    "RoiAlign": Row(_roi_align, ("coordinate_transformation_mode", "mode", "output_height", "output_width",
                                 "sampling_ratio", "spatial_scale"), first=10,
                    check=checks(attr_is("mode", ("avg", "max"), "avg"),
                                 attr_is("coordinate_transformation_mode", ("half_pixel", "output_half_pixel"),
                                         "half_pixel"),
                                 _adaptive_refused)),
}

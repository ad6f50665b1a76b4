"""ONNX's GridSample (2-D: an [N, C, H, W] input read at the [N, H_out, W_out, 2] normalized
positions of a grid) as Tripy ops, with PyTorch's rules that ONNX follows: positions unnormalized
by align_corners; border padding clamps them, reflection padding mirrors them; nearest (rounding
half to even), bilinear (4 taps) or bicubic (16 taps, Keys' a = -0.75) read each tap with one
gather over the input's pixels, taps outside the input reading zero. Its row joins the converter
table in ``converters.py``."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import iota
from tripy.frontend.ops.elementwise import floor, maximum, minimum, round, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import gather, permute, reshape, unsqueeze
from tripy.onnx.graph import _as_dtype_of
from tripy.onnx.rows import Row, attr_is, checks

_A = -0.75


def _clip(v, size):
    return minimum(maximum(v, _as_dtype_of(0.0, v)), _as_dtype_of(float(size - 1), v))


def _reflect(v, size, align_corners):
    """PyTorch's reflect_coordinates: ``v`` mirrored into [0, size - 1] (or [-0.5, size - 0.5])."""
    lo, hi = (0.0, float(size - 1)) if align_corners else (-0.5, size - 0.5)
    if hi <= lo:
        return v * 0.0
    span = hi - lo
    d = abs(v - lo)
    flips = floor(d / span)
    extra = d - flips * span
    even = (flips - floor(flips / 2.0) * 2.0) == 0.0
    return where(even, extra + lo, span - extra + lo)


def _pad_coordinate(v, size, padding, align_corners):
    if padding == "border":
        return _clip(v, size)
    if padding == "reflection":
        return _clip(_reflect(v, size, align_corners), size)
    return v


def _cubic(t):
    """Keys' weights of the taps at distances 1 + t, t, 1 - t, 2 - t."""
    def near(d):
        return ((d * (_A + 2)) - (_A + 3)) * d * d + 1.0

    def far(d):
        return ((d * _A - 5 * _A) * d + 8 * _A) * d - 4 * _A

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _grid_sample(ctx, n):
    x, grid = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    if x.rank != 4:
        _raise_here(f"ONNX {n.describe()}: GridSample of a rank-{x.rank} input is not supported (2-D images only).")
    batch, channels, height, width = x.shape
    if not isinstance(height, int) or not isinstance(width, int):
        _raise_here(f"ONNX {n.describe()}: GridSample needs the input's height and width static.")
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(n.attr("mode", "bilinear"), n.attr("mode", "bilinear"))
    padding, align = n.attr("padding_mode", "zeros"), bool(n.attr("align_corners", 0))
    grid = grid if grid.dtype == x.dtype else cast(grid, x.dtype)
    gx, gy = grid[..., 0], grid[..., 1]  # [N, H_out, W_out]
    if align:
        ix, iy = (gx + 1.0) * (0.5 * (width - 1)), (gy + 1.0) * (0.5 * (height - 1))
    else:
        ix, iy = ((gx + 1.0) * width - 1.0) * 0.5, ((gy + 1.0) * height - 1.0) * 0.5
    # the input's pixels as rows [N * H * W, C]; a tap reads the rows at n * H * W + y * W + x
    rows = reshape(permute(x, [0, 2, 3, 1]), [-1, channels])
    base = iota(list(ix.shape), 0, dtypes.int64) * (height * width)

    def tap(tx, ty, weight):
        if mode == "bicubic":
            tx, ty = _pad_coordinate(tx, width, padding, align), _pad_coordinate(ty, height, padding, align)
        inside = (tx >= 0.0) & (tx <= float(width - 1)) & (ty >= 0.0) & (ty <= float(height - 1))
        cx, cy = cast(_clip(tx, width), dtypes.int64), cast(_clip(ty, height), dtypes.int64)
        picked = gather(rows, 0, base + cy * width + cx)  # [N, H_out, W_out, C]
        w = where(inside, weight, _as_dtype_of(0.0, weight))
        return picked * unsqueeze(w, 3)

    if mode != "bicubic":
        ix, iy = _pad_coordinate(ix, width, padding, align), _pad_coordinate(iy, height, padding, align)
    if mode == "nearest":
        out = tap(round(ix), round(iy), ix * 0.0 + 1.0)
    elif mode == "bilinear":
        x0, y0 = floor(ix), floor(iy)
        tx, ty = ix - x0, iy - y0
        out = None
        for dy, wy in ((0.0, 1.0 - ty), (1.0, ty)):
            for dx, wx in ((0.0, 1.0 - tx), (1.0, tx)):
                t = tap(x0 + dx, y0 + dy, wx * wy)
                out = t if out is None else out + t
    else:
        x0, y0 = floor(ix), floor(iy)
        wxs, wys = _cubic(ix - x0), _cubic(iy - y0)
        out = None
        for j, wy in enumerate(wys):
            for i, wx in enumerate(wxs):
                t = tap(x0 + (i - 1.0), y0 + (j - 1.0), wx * wy)
                out = t if out is None else out + t
    return permute(out, [0, 3, 1, 2])


ROWS = {
    "GridSample": Row(_grid_sample, ("align_corners", "mode", "padding_mode"), first=16,
                      check=checks(attr_is("mode", ("bilinear", "nearest", "bicubic", "linear", "cubic"), "bilinear"),
                                   attr_is("padding_mode", ("zeros", "border", "reflection"), "zeros"))),
}

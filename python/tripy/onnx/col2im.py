"""ONNX's CenterCropPad and Col2Im (opset 18) as Tripy ops. CenterCropPad slices each named axis
to its target size around the centre, or pads it with zeros (the odd element goes last). Col2Im
folds [N, C * prod(block), L] columns back into an [N, C, *image] image, summing overlaps: that is
a transposed convolution of the columns, laid out as their sliding-window grid, by a constant
one-hot kernel (channel c * K + k writes kernel position k of output channel c, C groups). Their
rows join the converter table in ``converters.py``."""

import math

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.pad import pad
from tripy.frontend.ops.shape_ops import expand, reshape
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make
from tripy.onnx.graph import _axis, _static
from tripy.onnx.rows import Row


def _center_crop_pad(ctx, n):
    x = ctx.tensor(n.inputs[0])
    sizes = ctx.ints(n.inputs[1], n)
    axes = [_axis(a, x.rank) for a in n.attr("axes", list(range(x.rank)))]
    if len(axes) != len(sizes):
        _raise_here(f"ONNX {n.describe()}: {len(sizes)} sizes for {len(axes)} axes.")
    index, padding = [slice(None)] * x.rank, [(0, 0)] * x.rank
    for axis, want in zip(axes, sizes):
        have = x.shape[axis]
        if not isinstance(have, int) or not isinstance(want, int):
            _raise_here(f"ONNX {n.describe()}: CenterCropPad needs the size of axis {axis} and its target static.")
        if have > want:
            start = (have - want) // 2
            index[axis] = slice(start, start + want)
        elif have < want:
            before = (want - have) // 2
            padding[axis] = (before, want - have - before)
    out = x[tuple(index)] if any(s != slice(None) for s in index) else x
    return pad(out, padding) if any(p != (0, 0) for p in padding) else out


def _col2im(ctx, n):
    x = ctx.tensor(n.inputs[0])
    image, block = ctx.ints(n.inputs[1], n), ctx.ints(n.inputs[2], n)
    nd = len(block)
    if x.rank != 3 or len(image) != nd or not _static(image + block + [x.shape[1]]):
        _raise_here(f"ONNX {n.describe()}: Col2Im needs [N, C * prod(block), L] columns with a static channel dim "
                    f"and constant image and block shapes of one length (got {list(x.shape)}, {image}, {block}).")
    strides, dilations = n.attr("strides", [1] * nd), n.attr("dilations", [1] * nd)
    pads = n.attr("pads", [0] * (2 * nd))
    taps = math.prod(block)
    if x.shape[1] % taps:
        _raise_here(f"ONNX {n.describe()}: {x.shape[1]} channels are not a multiple of the block's {taps} positions.")
    channels = x.shape[1] // taps
    spans = [d * (k - 1) + 1 for d, k in zip(dilations, block)]
    grid = [(size + pads[i] + pads[i + nd] - spans[i]) // strides[i] + 1 for i, size in enumerate(image)]
    if math.prod(grid) != x.shape[2] and isinstance(x.shape[2], int):
        _raise_here(f"ONNX {n.describe()}: {x.shape[2]} columns, but the image, block, strides and pads give a "
                    f"{grid} grid of windows.")
    columns = reshape(x, [-1, x.shape[1]] + grid)
    one_hot = Tensor([[float(k == j) for j in range(taps)] for k in range(taps)], dtype=x.dtype)
    kernel = reshape(expand(reshape(one_hot, [1, taps, 1] + block), [channels, taps, 1] + block),
                     [channels * taps, 1] + block)
    # the full transposed convolution covers (grid - 1) * stride + span of the padded image; the
    # image starts pads-before into it, and past its end the image is zeros (no window reaches it)
    full = [(g - 1) * s + span for g, s, span in zip(grid, strides, spans)]
    cut = [(pads[i], max(full[i] - pads[i] - image[i], 0)) for i in range(nd)]
    conv = {"stride": strides, "padding": cut, "dilation": dilations, "groups": channels, "transposed": True,
            "output_padding": [0] * nd}
    out = make("convolution", [columns, kernel], convolution=conv)
    grow = [(0, max(image[i] - (full[i] - pads[i]), 0)) for i in range(nd)]
    return pad(out, [(0, 0), (0, 0)] + grow) if any(hi for _, hi in grow) else out


ROWS = {
    "CenterCropPad": Row(_center_crop_pad, ("axes",), first=18),
    "Col2Im": Row(_col2im, ("dilations", "pads", "strides"), first=18),
}

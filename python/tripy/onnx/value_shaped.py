"""ONNX's NonZero, Compress, Unique and NonMaxSuppression, whose outputs' shapes depend on input
values. A Tripy program's shapes are fixed before it runs, so, as If and Loop read a condition
(``control_flow.py``), these read the values that size their outputs while the graph is built: a
constant, a shape value, or, when the model runs eagerly, an input's actual value. Under
``tp.compile`` a value computed from a graph input is refused with an error naming the node.

What each does with the values it reads:

- NonZero: the positions of the nonzero values (row-major, as numpy's ``nonzero``; a 0-d input
  counts as one element) are read from its input's values and become an int64 constant.
- Compress: only the condition must be known; the output is a Tripy gather of the data (which may
  be a runtime input, also under ``tp.compile``) at the kept positions.
- Unique: which values (or slices along ``axis``) are distinct, their first positions, the
  inverse map and the counts are read from the input's values, sorted ascending (slices
  lexicographically) or in order of first occurrence; ``Y`` is a Tripy gather of the input at the
  first positions, so its values keep their dtype's bits. NaNs count as one value, sorted last.
- NonMaxSuppression: the whole selection is computed on the host from the known boxes and scores,
  exactly as ONNX Runtime's kernel does it in float32 (each step rounded to float32): per batch
  and class, boxes with a score above ``score_threshold`` (strictly) in order of falling score
  (equal scores: lower box index first), each kept unless its IoU with an already kept box of its
  class is above ``iou_threshold`` (strictly), up to ``max_output_boxes_per_class`` (0 where
  omitted); the ``[batch, class, box]`` rows become an int64 constant.

Their rows join the converter table in ``converters.py``."""

import math
import struct

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full
from tripy.frontend.ops.shape_ops import flatten, gather, reshape
from tripy.frontend.tensor import Tensor
from tripy.onnx.graph import Dims, _axis, _flat, as_tensor, known_values
from tripy.onnx.rows import Row, attr_is


def _known(ctx, n, i, what):
    """Input ``i`` of ``n`` as (its values as nested lists, the tensor, its shape), read while the
    graph is built; refused where they depend on a graph input's values under ``tp.compile``."""
    value = ctx.get(n.inputs[i])
    if not isinstance(value, Dims):
        value = ctx.tensor(n.inputs[i])
    values = known_values(value)
    if values is not None:
        t = as_tensor(value)
        return values, t, [int(d) for d in t.shape]
    _raise_here(f"ONNX {n.describe()}: the shape of its output depends on the values of {what} ({n.inputs[i]!r}), "
                "which are computed from a graph input and so known only when the executable runs; Tripy fixes a "
                "program's shapes before it runs. Run the model eagerly (the input's values are read then), or make "
                f"{what} a constant.")


def _optional_number(ctx, n, i, what, default):
    if n.input(i) is None:
        return default
    values, _, _ = _known(ctx, n, i, what)
    values = _flat(values)
    if len(values) != 1:
        _raise_here(f"ONNX {n.describe()}: {what} must hold one value, not {len(values)}.")
    return values[0]


def _int64(rows, width):
    """An int64 [len(rows), width] constant (a [0, width] one where no row)."""
    return Tensor(rows, dtype=dtypes.int64) if rows else full([0, width], 0, dtypes.int64)


# ---- NonZero --------------------------------------------------------------------------------------


def _nonzero(ctx, n):
    values, _, shape = _known(ctx, n, 0, "its input")
    shape = shape or [1]  # a 0-d input counts as one element, as numpy's nonzero reads it
    hits = [p for p, v in enumerate(_flat(values)) if v != 0]
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return Tensor([[(p // stride) % size for p in hits] for size, stride in zip(shape, strides)], dtype=dtypes.int64)


# ---- Compress -------------------------------------------------------------------------------------


def _compress(ctx, n):
    x = ctx.tensor(n.inputs[0])
    condition, _, _ = _known(ctx, n, 1, "the condition")
    kept = [p for p, c in enumerate(_flat(condition)) if c]
    if n.has("axis"):
        axis = _axis(n.attr("axis"), x.rank)
    else:
        x, axis = flatten(x) if x.rank else reshape(x, (1,)), 0
    size = x.shape[axis]
    if kept and isinstance(size, int) and kept[-1] >= size:
        _raise_here(f"ONNX {n.describe()}: the condition keeps position {kept[-1]}, past the {size} positions of "
                    f"{'the flattened input' if not n.has('axis') else f'dim {axis}'}.")
    return gather(x, axis, Tensor(kept, dtype=dtypes.int64))


# ---- Unique ---------------------------------------------------------------------------------------


def _key(v):
    """A sort key under which NaNs are one value, after every number (numpy's order)."""
    return (1, 0.0) if v != v else (0, v)


def _unique(ctx, n):
    values, x, shape = _known(ctx, n, 0, "its input")
    flat = _flat(values)
    if n.has("axis"):
        axis = _axis(n.attr("axis"), x.rank)
        outer, size, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        # slice i along the axis, its elements in row-major order of the other dims
        keys = [tuple(_key(flat[(o * size + i) * inner + r]) for o in range(outer) for r in range(inner))
                for i in range(size)]
    else:
        axis, keys = 0, [_key(v) for v in flat]
        x = flatten(x) if x.rank else reshape(x, (1,))
    first, counts = {}, {}
    for p, k in enumerate(keys):
        first.setdefault(k, p)
        counts[k] = counts.get(k, 0) + 1
    order = sorted(first) if n.attr("sorted", 1) else list(first)  # a dict keeps first-occurrence order
    slot = {k: j for j, k in enumerate(order)}
    indices = [first[k] for k in order]
    y = gather(x, axis, Tensor(indices, dtype=dtypes.int64))
    return (y, Tensor(indices, dtype=dtypes.int64), Tensor([slot[k] for k in keys], dtype=dtypes.int64),
            Tensor([counts[k] for k in order], dtype=dtypes.int64))


# ---- NonMaxSuppression ----------------------------------------------------------------------------


def _f32(v):
    """``v`` rounded to float32 (a double holds a float32 step's exact result before rounding)."""
    try:
        return struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _corners(box, center_point_box):
    """(x_min, y_min, x_max, y_max) of a box, in float32."""
    if center_point_box:  # [x_center, y_center, width, height]
        xc, yc, w, h = box
        half_w, half_h = _f32(w / 2), _f32(h / 2)
        return _f32(xc - half_w), _f32(yc - half_h), _f32(xc + half_w), _f32(yc + half_h)
    y1, x1, y2, x2 = box  # [y1, x1, y2, x2], either diagonal pair of corners
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _overlaps(a, b, iou_threshold):
    """Whether box ``a`` suppresses box ``b``: their IoU, in float32, is above the threshold."""
    left, right = max(a[0], b[0]), min(a[2], b[2])
    if right <= left:
        return False
    bottom, top = max(a[1], b[1]), min(a[3], b[3])
    if top <= bottom:
        return False
    inter = _f32(_f32(right - left) * _f32(top - bottom))
    area_a = _f32(_f32(a[2] - a[0]) * _f32(a[3] - a[1]))
    area_b = _f32(_f32(b[2] - b[0]) * _f32(b[3] - b[1]))
    union = _f32(_f32(area_a + area_b) - inter)
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return _f32(inter / union) > iou_threshold


def _nms(ctx, n):
    boxes, _, box_shape = _known(ctx, n, 0, "the boxes")
    scores, _, score_shape = _known(ctx, n, 1, "the scores")
    if len(box_shape) != 3 or box_shape[2] != 4 or len(score_shape) != 3 or score_shape[0] != box_shape[0] \
            or score_shape[2] != box_shape[1]:
        _raise_here(f"ONNX {n.describe()}: the boxes must be [batches, boxes, 4] and the scores [batches, classes, "
                    f"boxes], not {box_shape} and {score_shape}.")
    limit = max(int(_optional_number(ctx, n, 2, "max_output_boxes_per_class", 0)), 0)
    iou_threshold = _f32(_optional_number(ctx, n, 3, "iou_threshold", 0.0))
    if not 0.0 <= iou_threshold <= 1.0:
        _raise_here(f"ONNX {n.describe()}: iou_threshold must lie in [0, 1], not {iou_threshold}.")
    score_threshold = _optional_number(ctx, n, 4, "score_threshold", None)
    center_point_box = n.attr("center_point_box", 0)
    rows = []
    for b, (batch_boxes, batch_scores) in enumerate(zip(boxes, scores)):
        corners = [_corners(box, center_point_box) for box in batch_boxes]
        for c, class_scores in enumerate(batch_scores):
            candidates = [i for i, s in enumerate(class_scores) if score_threshold is None or s > score_threshold]
            candidates.sort(key=lambda i: (-class_scores[i], i))
            kept = []
            for i in candidates:
                if len(kept) == limit:
                    break
                if not any(_overlaps(corners[k], corners[i], iou_threshold) for k in kept):
                    kept.append(i)
            rows += [[b, c, i] for i in kept]
    return _int64(rows, 3)


ROWS = {
    "NonZero": Row(_nonzero, first=9),
    "Compress": Row(_compress, ("axis",), first=9),
    "Unique": Row(_unique, ("axis", "sorted"), first=11),
    "NonMaxSuppression": Row(_nms, ("center_point_box",), first=10, check=attr_is("center_point_box", (0, 1), 0)),
}

"""ONNX's NonZero, Compress, Unique and NonMaxSuppression (``tripy/onnx/value_shaped.py``), whose
outputs' shapes depend on input values, against numpy: eagerly (the input's values are read),
under ``tp.compile`` where those values are constants, and the refusal under ``tp.compile`` where
they are computed from a graph input."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_files import load_model  # noqa: E402

import tripy as tp  # noqa: E402

RNG = np.random.default_rng(13)
CPU = tp.device("cpu")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
_ELEM = {np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(bool): B, np.dtype(np.int32): TensorProto.INT32}


def _model(tmp_path, nodes, inputs, outputs, initializers=(), opset=17):
    """``inputs`` and ``outputs``: (name, elem type, shape) triples; ``initializers``: (name, array)."""
    infos = lambda triples: [helper.make_tensor_value_info(*t) for t in triples]  # noqa: E731
    return load_model(tmp_path, nodes, infos(inputs), infos(outputs), initializers, opset)


def _t(a):
    return tp.Tensor(np.asarray(a), device=CPU)


def _arrays(out):
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _refused(model, node, what):
    """tp.compile of ``model`` is refused, naming the node and the input whose values size the output."""
    with pytest.raises(tp.TripyException, match=rf"(?s)node '{node}'.*the shape of its output depends on the values "
                                                rf"of {what}.*computed from a graph input"):
        tp.compile(model, kwargs=model.input_infos())


# ---- NonZero --------------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [
    np.array([[1.0, 0.0, -2.0], [0.0, np.nan, 0.0]], np.float32),
    np.array([[[0, 3], [4, 0]], [[0, 0], [7, 8]]], np.int64),
    np.array([True, False, True, True]),
    np.zeros((2, 3), np.float32),
    np.array(5.0, np.float32),
    np.array(0, np.int64),
], ids=["float_nan", "int64_3d", "bool", "all_zero", "scalar", "scalar_zero"])
def test_nonzero_matches_numpy_eagerly(tmp_path, x):
    model = _model(tmp_path, [helper.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", _ELEM[x.dtype], x.shape)],
                   [("y", I64, None)])
    (y,) = _arrays(model(_t(x)))
    expected = np.array(np.nonzero(np.atleast_1d(x)), np.int64)  # ONNX reads a 0-d input as one element
    assert y.dtype == np.int64 and y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_nonzero_of_a_constant_compiles(tmp_path):
    c = np.array([[0, 2], [3, 0], [0, 5]], np.int64)
    model = _model(tmp_path, [helper.make_node("NonZero", ["c"], ["nz"]), helper.make_node("Cast", ["nz"], ["f"], to=F),
                              helper.make_node("Add", ["x", "f"], ["y"])],
                   [("x", F, [2, 3])], [("y", F, [2, 3])], [("c", c)])
    exe = tp.compile(model, kwargs=model.input_infos())
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(exe(x=_t(x))), x + np.array(np.nonzero(c), np.float32))


def test_nonzero_of_a_graph_input_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", F, [4])], [("y", I64, None)])
    _refused(model, "nz", r"its input \('x'\)")


# ---- Compress -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, condition, axis", [
    ((3, 2), [0, 1, 1], 0), ((3, 2), [0, 1], 1), ((3, 2), [1, 0], -1), ((3, 2), [0, 1, 0, 0, 1], None),
    ((4, 3, 2), [1, 0], 0), ((4, 3), [0, 0, 0, 0], 0), ((2, 5), [1, 1, 0, 1, 1], -1)])
def test_compress_matches_numpy_eagerly(tmp_path, shape, condition, axis):
    x = RNG.standard_normal(shape).astype(np.float32)
    condition = np.array(condition, bool)
    attrs = {} if axis is None else {"axis": axis}
    model = _model(tmp_path, [helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
                   [("x", F, list(shape)), ("c", B, [len(condition)])], [("y", F, None)])
    (y,) = _arrays(model(_t(x), _t(condition)))
    expected = np.compress(condition, x, axis=axis)
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


def test_compress_by_a_constant_condition_compiles_with_runtime_data(tmp_path):
    condition = np.array([1, 0, 1, 1, 0], bool)
    model = _model(tmp_path, [helper.make_node("Compress", ["x", "c"], ["y"], axis=1)],
                   [("x", F, ["batch", 5])], [("y", F, ["batch", 3])], [("c", condition)])
    exe = tp.compile(model, kwargs=model.input_infos({"batch": (1, 2, 4)}))
    for batch in (1, 4):
        x = RNG.standard_normal((batch, 5)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exe(x=_t(x))), np.compress(condition, x, axis=1))


def test_compress_by_a_runtime_condition_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("Compress", ["x", "c"], ["y"], name="keep", axis=0)],
                   [("x", F, [3, 2]), ("c", B, [3])], [("y", F, None)])
    _refused(model, "keep", r"the condition \('c'\)")


def test_compress_keeping_a_position_past_the_axis_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("Compress", ["x", "c"], ["y"], name="keep", axis=1)],
                   [("x", F, [3, 2]), ("c", B, [3])], [("y", F, None)])
    with pytest.raises(tp.TripyException, match=r"(?s)'keep'.*keeps position 2, past the 2 positions of dim 1"):
        model(_t(np.ones((3, 2), np.float32)), _t(np.array([0, 1, 1], bool)))


# ---- Unique ---------------------------------------------------------------------------------------


def _numpy_unique(x, axis, sorted_):
    """ONNX's four outputs from numpy's unique; unsorted: in order of first occurrence."""
    y, indices, inverse, counts = np.unique(x, True, True, True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(indices)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        flat = x.reshape(-1) if axis is None else x
        y = np.take(flat, indices[order], axis=0 if axis is None else axis)
        indices, inverse, counts = indices[order], rank[inverse], counts[order]
    return [y, indices.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


_UNIQUE_INPUTS = {
    "floats": np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0, -0.5, 2.0], np.float32),
    "ints_2d": np.array([[3, 1, 3], [0, 1, 7], [3, 1, 3], [0, 0, 7]], np.int64),
    "rows_3d": np.array([[[1., 1.], [0., 1.], [2., 1.], [0., 1.]], [[1., 1.], [0., 1.], [2., 1.], [0., 1.]]], np.float32),
    "random": RNG.integers(0, 3, (4, 3, 5)).astype(np.float32),
}


@pytest.mark.parametrize("name, axis", [("floats", None), ("ints_2d", None), ("ints_2d", 0), ("ints_2d", 1),
                                        ("ints_2d", -1), ("rows_3d", 1), ("random", 0), ("random", 2),
                                        ("random", -2), ("random", None)])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_matches_numpy_eagerly(tmp_path, name, axis, sorted_):
    x = _UNIQUE_INPUTS[name]
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    model = _model(tmp_path, [helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)],
                   [("x", _ELEM[x.dtype], list(x.shape))],
                   [("y", _ELEM[x.dtype], None)] + [(k, I64, None) for k in ("indices", "inverse", "counts")])
    outputs = _arrays(model(_t(x)))
    for got, expected in zip(outputs, _numpy_unique(x, axis, sorted_)):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_unique_with_only_its_first_output_of_a_constant_compiles(tmp_path):
    c = np.array([5, 1, 5, 2, 1], np.int64)
    model = _model(tmp_path, [helper.make_node("Unique", ["c"], ["u"], sorted=0), helper.make_node("Add", ["x", "u"], ["y"])],
                   [("x", I64, [3])], [("y", I64, [3])], [("c", c)])
    exe = tp.compile(model, kwargs=model.input_infos())
    x = np.array([10, 20, 30], np.int64)
    np.testing.assert_array_equal(np.asarray(exe(x=_t(x))), x + np.array([5, 1, 2]))


def test_unique_of_a_graph_input_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("Unique", ["x"], ["y"], name="uniq")], [("x", F, [6])], [("y", F, None)])
    _refused(model, "uniq", r"its input \('x'\)")


# ---- NonMaxSuppression ----------------------------------------------------------------------------


def _iou(a, b):
    """IoU of two boxes given as float32 [x_min, y_min, x_max, y_max] (0 where they do not overlap)."""
    w = np.minimum(a[2], b[2]) - np.maximum(a[0], b[0])
    h = np.minimum(a[3], b[3]) - np.maximum(a[1], b[1])
    if w <= 0 or h <= 0:
        return np.float32(0)
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else np.float32(0)


def _numpy_nms(boxes, scores, limit, iou_threshold, score_threshold, center_point_box):
    if center_point_box:
        half = boxes[..., 2:] / np.float32(2)
        corners = np.concatenate([boxes[..., :2] - half, boxes[..., :2] + half], -1)
    else:
        yx = boxes.reshape(*boxes.shape[:2], 2, 2)
        low, high = yx.min(2), yx.max(2)  # [y, x] of the two corners
        corners = np.concatenate([low[..., ::-1], high[..., ::-1]], -1)
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in np.lexsort((np.arange(len(s)), -s)) if score_threshold is None or s[i] > score_threshold]
            kept = []
            for i in order:
                if len(kept) == limit:
                    break
                if all(_iou(corners[b, k], corners[b, i]) <= iou_threshold for k in kept):
                    kept.append(i)
            rows += [[b, c, i] for i in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


def _nms_model(tmp_path, inputs, center_point_box=0):
    """NonMaxSuppression of ``inputs`` (boxes, scores, then the optional ones; None: omitted)."""
    names = ["boxes", "scores", "limit", "iou", "score"][:len(inputs)]
    given = [name if value is not None else "" for name, value in zip(names, inputs)]
    node = helper.make_node("NonMaxSuppression", given, ["selected"], name="nms", center_point_box=center_point_box)
    infos = [(name, elem, list(np.shape(value))) for name, elem, value in zip(names, [F, F, I64, F, F], inputs)
             if value is not None]
    return _model(tmp_path, [node], infos, [("selected", I64, None)])


def _nms_args(inputs):
    return [_t(v) for v in inputs if v is not None]


def _random_boxes(batches, count, center_point_box):
    if center_point_box:
        centre = RNG.uniform(0, 4, (batches, count, 2))
        size = RNG.uniform(0.5, 2, (batches, count, 2))
        return np.concatenate([centre, size], -1).astype(np.float32)
    return RNG.uniform(0, 4, (batches, count, 4)).astype(np.float32)  # corners in any order


@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize("limit, iou, score", [(3, 0.5, 0.2), (100, 0.3, None), (2, 0.0, 0.5), (100, 1.0, None)])
def test_nms_matches_numpy_eagerly(tmp_path, center_point_box, limit, iou, score):
    boxes = _random_boxes(2, 12, center_point_box)
    scores = RNG.choice(np.linspace(0, 1, 8, dtype=np.float32), (2, 3, 12))  # with ties among scores
    inputs = [boxes, scores, np.array([limit], np.int64), np.array([iou], np.float32),
              None if score is None else np.array([score], np.float32)]
    model = _nms_model(tmp_path, inputs, center_point_box)
    (got,) = _arrays(model(*_nms_args(inputs)))
    expected = _numpy_nms(boxes, scores, limit, np.float32(iou), None if score is None else np.float32(score),
                          center_point_box)
    assert got.dtype == np.int64 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_nms_keeps_an_iou_equal_to_the_threshold_and_drops_a_score_equal_to_its_threshold(tmp_path):
    boxes = np.array([[[0, 0, 1, 2], [0, 0, 1, 1], [5, 5, 6, 6]]], np.float32)  # IoU(0, 1) = 1 / 2 exactly
    scores = np.array([[[0.9, 0.8, 0.25]]], np.float32)
    for iou, expected in ((0.5, [[0, 0, 0], [0, 0, 1]]), (0.49, [[0, 0, 0]])):
        inputs = [boxes, scores, np.array([10], np.int64), np.array([iou], np.float32), np.array([0.25], np.float32)]
        (got,) = _arrays(_nms_model(tmp_path, inputs)(*_nms_args(inputs)))
        assert got.tolist() == expected


def test_nms_orders_equal_scores_by_box_index_and_stops_at_the_limit(tmp_path):
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5], [6, 6, 7, 7]]], np.float32)
    scores = np.array([[[0.5, 0.7, 0.5, 0.7]]], np.float32)
    inputs = [boxes, scores, np.array([3], np.int64)]
    (got,) = _arrays(_nms_model(tmp_path, inputs)(*_nms_args(inputs)))
    assert got.tolist() == [[0, 0, 1], [0, 0, 3], [0, 0, 0]]


def test_nms_without_a_limit_selects_nothing(tmp_path):
    inputs = [_random_boxes(1, 4, 0), RNG.random((1, 2, 4)).astype(np.float32)]
    (got,) = _arrays(_nms_model(tmp_path, inputs)(*_nms_args(inputs)))
    assert got.dtype == np.int64 and got.shape == (0, 3)


def test_nms_of_graph_inputs_is_refused_under_compile(tmp_path):
    inputs = [_random_boxes(1, 4, 0), RNG.random((1, 1, 4)).astype(np.float32), np.array([2], np.int64)]
    _refused(_nms_model(tmp_path, inputs), "nms", r"the boxes \('boxes'\)")


def test_an_error_evaluating_the_input_eagerly_is_reported_as_itself(tmp_path):
    # The input's values are known eagerly; evaluating them fails (an index past the data), and that
    # failure, not "computed from a graph input", is what the user sees.
    model = _model(tmp_path, [helper.make_node("Gather", ["x", "i"], ["g"], name="gather"),
                              helper.make_node("NonZero", ["g"], ["y"], name="nz")],
                   [("x", F, [3]), ("i", I64, [1])], [("y", I64, None)])
    with pytest.raises(tp.TripyException, match="out of bounds") as info:
        model(_t(np.ones(3, np.float32)), _t(np.array([5], np.int64)))
    assert "computed from a graph input" not in str(info.value)

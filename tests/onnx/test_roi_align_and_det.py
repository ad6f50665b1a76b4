"""RoiAlign beyond ONNX's two cases (max mode, spatial_scale, boxes past the map's edges, several
images and channels) against a numpy transcription of ONNX Runtime's kernel, its adaptive form
refused at load; Det of 1 x 1 to 4 x 4 matrices against numpy, larger ones refused with the reason."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import tripy as tp  # noqa: E402

RNG = np.random.default_rng(7)


def _model(tmp_path, node, inputs, opset):
    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, elem[v.dtype], v.shape) for k, v in inputs],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return tp.onnx.load(path, device="cpu")


def _run(model, inputs):
    return np.asarray(model(*[tp.Tensor(v, device=tp.device("cpu")) for _, v in inputs]))


def _bilinear(img, y, x):
    """ONNX Runtime's taps at (y, x) of one [H, W] plane: (weight, value) pairs."""
    h, w = img.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return [(0.0, 0.0)] * 4
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    return [((1 - ly) * (1 - lx), img[yl, xl]), ((1 - ly) * lx, img[yl, xh]), (ly * (1 - lx), img[yh, xl]),
            (ly * lx, img[yh, xh])]


def _roi_align_reference(x, rois, batch, out_h, out_w, grid, scale, mode, half_pixel):
    out = np.zeros((len(rois), x.shape[1], out_h, out_w), np.float32)
    offset = 0.5 if half_pixel else 0.0
    for r, (box, b) in enumerate(zip(rois, batch)):
        x0, y0, x1, y1 = (float(v) * scale - offset for v in box)
        rw, rh = x1 - x0, y1 - y0
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / out_h, rw / out_w
        for c in range(x.shape[1]):
            for ph in range(out_h):
                for pw in range(out_w):
                    values = []
                    for iy in range(grid):
                        for ix in range(grid):
                            taps = _bilinear(x[b, c], y0 + ph * bh + (iy + 0.5) * bh / grid,
                                             x0 + pw * bw + (ix + 0.5) * bw / grid)
                            values.append([wt * v for wt, v in taps])
                    out[r, c, ph, pw] = (max(max(v) for v in values) if mode == "max"
                                         else sum(sum(v) for v in values) / (grid * grid))
    return out


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_matches_onnx_runtime_rules(tmp_path, mode, transform):
    x = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    rois = np.array([[0, 0, 17, 13], [3, 2, 9, 11], [-4, -3, 5, 4], [10, 8, 22, 16], [6, 6, 6.5, 6.2]], np.float32)
    batch = np.array([0, 1, 1, 0, 1], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode=mode, output_height=3, output_width=4,
                            sampling_ratio=2, spatial_scale=0.5, coordinate_transformation_mode=transform)
    inputs = [("x", x), ("rois", rois), ("b", batch)]
    got = _run(_model(tmp_path, node, inputs, 16), inputs)
    want = _roi_align_reference(x, rois, batch, 3, 4, 2, 0.5, mode, transform == "half_pixel")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_of_opset_10_uses_the_legacy_coordinates(tmp_path):
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    rois, batch = np.array([[1, 1, 4, 5], [0, 2, 2.5, 3]], np.float32), np.array([0, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2, output_width=2, sampling_ratio=3)
    inputs = [("x", x), ("rois", rois), ("b", batch)]
    got = _run(_model(tmp_path, node, inputs, 10), inputs)
    np.testing.assert_allclose(got, _roi_align_reference(x, rois, batch, 2, 2, 3, 1.0, "avg", False), rtol=1e-5,
                               atol=1e-6)


def test_adaptive_roi_align_is_refused_at_load_with_the_reason(tmp_path):
    x, rois, batch = np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 4), np.float32), np.zeros((1,), np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], name="pool", output_height=2, output_width=2)
    with pytest.raises(tp.TripyException, match=r"'pool' \(RoiAlign.*sampling_ratio=0 \(adaptive\).*boxes' values"):
        _model(tmp_path, node, [("x", x), ("rois", rois), ("b", batch)], 16)


@pytest.mark.parametrize("shape", [(1, 1), (5, 2, 2), (4, 3, 3), (2, 3, 4, 4)])
def test_det_matches_numpy(tmp_path, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    got = _run(_model(tmp_path, helper.make_node("Det", ["x"], ["y"]), [("x", x)], 13), [("x", x)])
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_det_of_a_singular_matrix_with_a_zero_pivot_is_exact(tmp_path):
    x = np.array([[0, 1, 2], [1, 0, 3], [1, 1, 5]], np.float32)  # LU without pivoting divides by 0 here
    got = _run(_model(tmp_path, helper.make_node("Det", ["x"], ["y"]), [("x", x)], 13), [("x", x)])
    assert got == 0.0 and not math.isnan(got)


def test_det_of_a_5x5_matrix_is_refused_with_the_reason(tmp_path):
    x = np.eye(5, dtype=np.float32)
    model = _model(tmp_path, helper.make_node("Det", ["x"], ["y"], name="d"), [("x", x)], 13)
    with pytest.raises(tp.TripyException, match=r"Det of 5 x 5 matrices is not supported.*up to 4 x 4"):
        _run(model, [("x", x)])


def test_roi_align_compiles_with_a_dynamic_number_of_boxes(tmp_path):
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=3, output_width=3, sampling_ratio=2)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 8, 8]),
                                            helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["R", 4]),
                                            helper.make_tensor_value_info("b", TensorProto.INT64, ["R"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)
    model = tp.onnx.load(path, device="cpu")
    exe = tp.compile(model, kwargs=model.input_infos({"R": (1, 4, 16)}))
    x = RNG.standard_normal((2, 2, 8, 8)).astype(np.float32)
    for count in (1, 6):
        rois = np.concatenate([RNG.uniform(-1, 4, (count, 2)), RNG.uniform(4, 9, (count, 2))], 1).astype(np.float32)
        batch = RNG.integers(0, 2, count).astype(np.int64)
        out = exe(x=tp.Tensor(x), rois=tp.Tensor(rois), b=tp.Tensor(batch))
        np.testing.assert_allclose(np.asarray(out), _roi_align_reference(x, rois, batch, 3, 3, 2, 1.0, "avg", True),
                                   rtol=1e-5, atol=1e-5)

"""ONNX's ScatterElements and ScatterND without a reduction (``tripy/onnx/scatter.py``) where their
positions are known while the graph is built (an eager run's indices, or constant indices under
``tp.compile``): a gather of the updates, past the size the row-by-update comparison takes,
against numpy; the comparison still serves positions computed from a graph input."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_files import load_model  # noqa: E402

import tripy as tp  # noqa: E402
from tripy.onnx import scatter  # noqa: E402

RNG = np.random.default_rng(29)
CPU = tp.device("cpu")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(tmp_path, op, data_shape, index_shape, update_shape, initializers=(), **attrs):
    names = [("d", F, data_shape), ("i", I64, index_shape), ("u", F, update_shape)]
    inputs = [helper.make_tensor_value_info(*t) for t in names if t[0] not in dict(initializers)]
    return load_model(tmp_path, [helper.make_node(op, ["d", "i", "u"], ["y"], name="scatter", **attrs)], inputs,
                      [helper.make_tensor_value_info("y", F, None)], initializers)


def _t(a):
    return tp.Tensor(np.asarray(a), device=CPU)


def _scatter_elements_reference(data, indices, updates, axis):
    """numpy's ScatterElements without a reduction, the first update hitting a position winning."""
    out = data.copy()
    for where in reversed(list(np.ndindex(indices.shape))):  # reversed: earlier updates overwrite later ones
        target = list(where)
        target[axis] = indices[where]
        out[tuple(target)] = updates[where]
    return out


def test_scatter_elements_with_an_eager_runs_indices_gathers_past_the_comparisons_size(tmp_path):
    # A detector's RoI pooler puts each level's rows back at their positions: [rows, channels, 7, 7].
    rows, channels = 40, 64
    data = np.zeros((rows, channels, 7, 7), np.float32)
    kept = RNG.permutation(rows)[:30]
    indices = np.broadcast_to(kept[:, None, None, None], (30, channels, 7, 7)).astype(np.int64)
    updates = RNG.standard_normal((30, channels, 7, 7)).astype(np.float32)
    assert data.size * updates.size > scatter.MAX_COMPARED
    model = _model(tmp_path, "ScatterElements", data.shape, indices.shape, updates.shape, axis=0)
    y = np.asarray(model(_t(data), _t(indices), _t(updates)))
    np.testing.assert_array_equal(y, _scatter_elements_reference(data, indices, updates, 0))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_with_known_indices_matches_numpy_with_repeats_and_negative_indices(tmp_path, axis):
    data = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    index_shape = [2, 3, 2]
    size = data.shape[axis]
    indices = RNG.integers(-size, size, index_shape).astype(np.int64)  # repeats: the first update wins
    updates = RNG.standard_normal(index_shape).astype(np.float32)
    model = _model(tmp_path, "ScatterElements", data.shape, index_shape, index_shape, axis=axis)
    y = np.asarray(model(_t(data), _t(indices), _t(updates)))
    np.testing.assert_array_equal(y, _scatter_elements_reference(data, np.where(indices < 0, indices + size, indices),
                                                                 updates, axis % 3))


def test_scatter_nd_with_constant_indices_compiles_as_a_gather_of_runtime_updates(tmp_path):
    data = RNG.standard_normal((6, 4)).astype(np.float32)
    indices = np.array([[4], [1], [-1], [4]], np.int64)
    updates = RNG.standard_normal((4, 4)).astype(np.float32)
    model = _model(tmp_path, "ScatterND", data.shape, indices.shape, updates.shape, initializers=[("i", indices)])
    exe = tp.compile(model, kwargs=model.input_infos())
    expected = data.copy()
    expected[[4, 1, 5]] = updates[[0, 1, 2]]  # row 4: the first of its two updates
    np.testing.assert_array_equal(np.asarray(exe(d=_t(data), u=_t(updates))), expected)
    np.testing.assert_array_equal(np.asarray(model(_t(data), _t(updates))), expected)


def test_scatter_with_runtime_indices_under_compile_compares_rows_with_updates(tmp_path):
    data = RNG.standard_normal((5, 3)).astype(np.float32)
    indices = np.array([[3, 0, 4], [1, 0, 2]], np.int64)
    updates = RNG.standard_normal((2, 3)).astype(np.float32)
    model = _model(tmp_path, "ScatterElements", data.shape, indices.shape, updates.shape, axis=0)
    exe = tp.compile(model, kwargs=model.input_infos())
    y = np.asarray(exe(d=_t(data), i=_t(indices), u=_t(updates)))
    np.testing.assert_array_equal(y, _scatter_elements_reference(data, indices, updates, 0))


def test_a_known_index_outside_its_dim_is_refused_naming_the_node(tmp_path):
    data = np.zeros((4, 2), np.float32)
    indices = np.array([[0, 2]], np.int64)  # position 2 of the flattened data, but dim 1 has 2 entries
    model = _model(tmp_path, "ScatterElements", data.shape, indices.shape, indices.shape, axis=1)
    with pytest.raises(tp.TripyException, match=r"node 'scatter' \(ScatterElements.*index 2 lies outside dim 0 of size 2"):
        model(_t(data), _t(indices), _t(np.ones((1, 2), np.float32)))
    indices = np.array([[1, 0], [-5, 1]], np.int64)
    model = _model(tmp_path, "ScatterND", data.shape, indices.shape, [2], initializers=[("i", indices)])
    with pytest.raises(tp.TripyException, match=r"node 'scatter' \(ScatterND.*index -5 lies outside dim 0 of size 4"):
        model(_t(data), _t(np.ones(2, np.float32)))

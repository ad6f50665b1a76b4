"""ONNX rules at the edges of two converters, against numpy: integer Div truncates toward zero
(negative operands included, eagerly and compiled), and ReduceMax / ReduceMin take bool inputs
(opset 20) and give the dtype's identity over an empty dim (opset 18: -inf / inf, the lowest /
highest integer, False / True)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import tripy as tp  # noqa: E402
from onnx_files import load_model  # noqa: E402

INT_DTYPES = {np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}


@pytest.mark.parametrize("np_dtype", [np.int32, np.int64])
def test_integer_div_truncates_toward_zero(tmp_path, np_dtype):
    x = np.array([-7, 7, -7, 7, 5, -6, 0, -1], np_dtype)
    y = np.array([2, -2, -2, 2, 3, 3, -4, 5], np_dtype)
    t = INT_DTYPES[np_dtype]
    model = load_model(tmp_path, [helper.make_node("Div", ["x", "y"], ["z"])],
                       [helper.make_tensor_value_info("x", t, [8]), helper.make_tensor_value_info("y", t, [8])],
                       [helper.make_tensor_value_info("z", t, [8])])
    want = (np.abs(x) // np.abs(y)) * np.sign(x) * np.sign(y)
    np.testing.assert_array_equal(np.asarray(model(tp.Tensor(x), tp.Tensor(y))), want)
    exe = tp.compile(model, args=[tp.InputInfo((8,), tp.int32 if np_dtype == np.int32 else tp.int64)] * 2)
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x), tp.Tensor(y))), want)


def _reduce(tmp_path, op, elem, shape, out_shape, keepdims, opset):
    return load_model(tmp_path, [helper.make_node(op, ["a", "axes"], ["z"], keepdims=keepdims)],
                      [helper.make_tensor_value_info("a", elem, shape), helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                      [helper.make_tensor_value_info("z", elem, out_shape)], opset=opset)


@pytest.mark.parametrize("op, np_fn", [("ReduceMax", np.max), ("ReduceMin", np.min)])
def test_reduce_extremes_of_bool(tmp_path, op, np_fn):
    a = np.array([[True, False, True], [False, False, False]])
    model = _reduce(tmp_path, op, TensorProto.BOOL, [2, 3], [2, 1], 1, opset=20)
    got = np.asarray(model(tp.Tensor(a), tp.Tensor(np.array([1], np.int64))))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np_fn(a, axis=1, keepdims=True))


@pytest.mark.parametrize("op, highest", [("ReduceMax", False), ("ReduceMin", True)])
@pytest.mark.parametrize("np_dtype, elem, lowest_value, highest_value", [
    (np.float32, TensorProto.FLOAT, -np.inf, np.inf),
    (np.int32, TensorProto.INT32, np.iinfo(np.int32).min, np.iinfo(np.int32).max),
    (np.int64, TensorProto.INT64, np.iinfo(np.int64).min, np.iinfo(np.int64).max),
    (np.bool_, TensorProto.BOOL, False, True),
])
@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_extremes_over_an_empty_dim_give_the_identity(tmp_path, op, highest, np_dtype, elem, lowest_value,
                                                             highest_value, keepdims):
    out_shape = [2, 1, 4] if keepdims else [2, 4]
    model = _reduce(tmp_path, op, elem, [2, 0, 4], out_shape, keepdims, opset=20)
    got = np.asarray(model(tp.Tensor(np.zeros((2, 0, 4), np_dtype)), tp.Tensor(np.array([1], np.int64))))
    np.testing.assert_array_equal(got, np.full(out_shape, highest_value if highest else lowest_value, np_dtype))

"""nvtripy's spellings of calls: keyword names, positional forms and small properties that ported
programs use."""

import inspect

import numpy as np
import pytest

import tripy as tp


@pytest.mark.parametrize(
    "func, names",
    [
        (tp.allclose, ["input", "other", "rtol", "atol"]),
        (tp.equal, ["input", "other"]),
        (tp.outer, ["vec1", "vec2"]),
        (tp.tril, ["tensor", "diagonal"]),
        (tp.triu, ["tensor", "diagonal"]),
        (tp.full, ["shape", "value", "dtype"]),
        (tp.device, ["device"]),
        (tp.default_stream, ["device"]),
        (tp.Sequential, ["modules"]),
    ],
)
def test_parameter_names(func, names):
    assert list(inspect.signature(func).parameters) == names


def test_keyword_calls():
    a, b = tp.Tensor([1.0, 2.0]), tp.Tensor([1.0, 2.0 + 1e-7])
    assert tp.allclose(input=a, other=b) and tp.equal(input=a, other=a)
    assert tp.outer(vec1=a, vec2=a).tolist() == [[1.0, 2.0], [2.0, 4.0]]
    assert tp.tril(tensor=tp.ones((2, 2))).tolist() == [[1.0, 0.0], [1.0, 1.0]]
    assert tp.triu(tensor=tp.ones((2, 2)), diagonal=1).tolist() == [[0.0, 1.0], [0.0, 0.0]]
    assert tp.device(device="cpu").kind == "cpu"


def test_arange_stop_dtype_positional_form():
    out = tp.arange(4, tp.int32)
    assert out.dtype == tp.int32 and out.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(np.asarray(tp.arange(2.3, 0.8, -0.2)), np.arange(2.3, 0.8, -0.2), rtol=1e-6)
    with pytest.raises(tp.TripyException, match="takes no step"):
        tp.arange(4, tp.int32, 2)


def test_full_with_a_tensor_value():
    out = tp.full((2, 3), value=tp.Tensor(2.5))
    assert out.shape == (2, 3) and np.all(np.asarray(out) == 2.5)
    assert tp.full((2,), tp.Tensor([7]), dtype=tp.int32).tolist() == [7, 7]
    assert tp.full((), tp.Tensor(3.0)).tolist() == 3.0
    with pytest.raises(tp.TripyException, match="scalar tensor"):
        tp.full((2,), tp.Tensor([1.0, 2.0]))


def test_full_value_stays_a_runtime_input_inside_compile():
    exe = tp.compile(lambda v: tp.full((2, 2), v), args=[tp.InputInfo((), dtype=tp.float32)])
    assert exe(tp.Tensor(5.0)).tolist() == [[5.0, 5.0], [5.0, 5.0]]
    assert exe(tp.Tensor(-1.0)).tolist() == [[-1.0, -1.0], [-1.0, -1.0]]


def test_sequential_keyword_modules():
    model = tp.Sequential(*[tp.Linear(2, 2), tp.relu])
    assert len(model) == 2


def test_stream_ptr_is_an_int():
    stream = tp.default_stream()
    assert isinstance(stream.ptr, int)
    assert stream.ptr == tp.default_stream().ptr


def test_default_stream_rejects_other_devices():
    with pytest.raises(tp.TripyException, match="gpu:0 only"):
        tp.default_stream(tp.device("cpu"))

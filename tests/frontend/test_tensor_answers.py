"""What a user who knows torch or numpy meets first: a Python `if` inside tp.compile, torch's
method names, float()/int(), numpy operands, boolean masks and bfloat16 export each get the right
answer or an error that says what to do instead."""

import inspect

import numpy as np
import pytest

import tripy as tp


def test_an_if_on_a_traced_tensor_is_reported_at_the_if_and_points_to_where(device):
    def clip_negative(x):
        if tp.sum(x) > 0:
            return x
        return -x

    with pytest.raises(tp.TripyException) as e:
        tp.compile(clip_negative, args=[tp.InputInfo((2,), dtype=tp.float32)])
    lines, first = inspect.getsourcelines(clip_negative)
    if_line = first + next(i for i, line in enumerate(lines) if "if tp.sum" in line)
    text = str(e.value)
    assert f":{if_line} in clip_negative()" in text
    assert "tp.where(condition, x, y)" in text and "runtime input of tp.compile" in text
    # The suggested rewrite compiles.
    exe = tp.compile(
        lambda x: tp.where(tp.sum(x) > 0, x, -x), args=[tp.InputInfo((2,), dtype=tp.float32)]
    )
    assert exe(tp.Tensor([-1.0, -2.0])).tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "use, hint",
    [(lambda t: t.tolist(), "Return the tensor"), (lambda t: float(t), "Return the tensor"), (lambda t: print(t * 2.0), "Printing it")],
)
def test_reading_a_traced_value_says_where_and_why(use, hint):
    def f(x):
        use(x)
        return x

    with pytest.raises(tp.TripyException, match="depends on a runtime input of tp.compile") as e:
        tp.compile(f, args=[tp.InputInfo((1,), dtype=tp.float32)])
    assert hint in str(e.value)
    assert "tp.compile(f" not in str(e.value).split("\n\n")[0]  # the user's line, not the compile call


@pytest.mark.parametrize(
    "name, expected",
    [
        ("item", "float(t), int(t) or bool(t)"),
        ("numpy", "np.asarray(t)"),
        ("to", "tp.copy(t, tp.device"),
        ("T", "tp.transpose(t, 0, 1)"),
        ("view", "tp.reshape(t, shape)"),
        ("size", "t.shape"),
        ("dim", "t.rank"),
        ("cuda", 'tp.device("gpu")'),
        ("cpu", 'tp.device("cpu")'),
    ],
)
def test_torch_names_on_a_tensor_point_to_tripys_way(name, expected):
    with pytest.raises(AttributeError) as e:
        getattr(tp.Tensor([1.0]), name)
    text = str(e.value)
    assert text.startswith(f"Module: 'tripy.Tensor' does not have attribute: '{name}'. ")
    assert expected in text
    assert "Did you mean" not in text  # no close spelling of something else (item -> Stream)


def test_other_missing_names_still_get_the_closest_tripy_name():
    with pytest.raises(AttributeError, match=r"Did you mean: 'tripy.softmax'\?"):
        tp.Tensor([1.0]).softmax


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_float_and_int_read_a_one_element_tensor_like_bool(device, shape):
    t = tp.reshape(tp.Tensor([2.75]), shape)
    assert float(t) == 2.75 and isinstance(float(t), float)
    assert int(t) == 2 and isinstance(int(t), int)
    assert bool(t) is True
    assert int(tp.reshape(tp.Tensor([-7], dtype=tp.int64), shape)) == -7
    assert float(tp.Tensor(True)) == 1.0


def test_float_and_int_refuse_several_elements():
    t = tp.Tensor([1.0, 2.0])
    for convert in (float, int):
        with pytest.raises(tp.TripyException, match=r"Only single-element tensors convert to a Python"):
            convert(t)
    with pytest.raises(tp.TripyException, match="ambiguous.*tp.any"):
        bool(t)


def test_numpy_operands_are_refused_the_same_way_on_either_side(device):
    t = tp.Tensor([1.0, 2.0])
    array = np.ones(2, dtype=np.float32)
    messages = []
    for combine in (lambda: t + array, lambda: array + t, lambda: array * t, lambda: t < array):
        with pytest.raises(tp.TripyException, match="Cannot combine a tripy.Tensor with an object of type 'ndarray'") as e:
            combine()
        messages.append(str(e.value).split("\n\n", 1)[1])
        assert "tp.Tensor(array)" in messages[-1]
    assert len(set(messages)) == 1
    # What the message suggests works, and numpy functions still read tensors.
    assert (t + tp.Tensor(array)).tolist() == [2.0, 3.0]
    np.testing.assert_allclose(np.exp(t), np.exp([1.0, 2.0]), rtol=1e-6)


def test_boolean_mask_indexing_says_it_is_not_supported_and_what_to_use(device):
    t = tp.Tensor([-1.0, 2.0, 3.0])
    with pytest.raises(tp.TripyException, match=r"boolean mask \(t\[mask\]\) is not supported") as e:
        t[t > 0]
    assert "tp.where(mask, t, 0)" in str(e.value)
    assert tp.where(t > 0, t, 0.0).tolist() == [0.0, 2.0, 3.0]


def test_bfloat16_becomes_float32_in_numpy(device):
    values = [1.5, -2.25, 3.0e38, 0.0078125]
    t = tp.Tensor(values, dtype=tp.bfloat16)
    array = np.asarray(t)
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array, np.array(t.tolist(), dtype=np.float32))
    np.testing.assert_allclose(array, values, rtol=2**-8)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64

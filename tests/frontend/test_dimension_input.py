"""tp.DimensionInputInfo: a size given at run time. Inside tp.compile it is a tp.DimensionSize that
shapes may use; the executable takes an int for it, checks its range, and keeps it through save/load."""

import inspect

import numpy as np
import pytest

import tripy as tp


def _rows(x, n):
    return x[:n] * 2.0


@pytest.fixture
def rows(device):
    return tp.compile(_rows, args=[tp.InputInfo((8, 3), dtype=tp.float32), tp.DimensionInputInfo((1, 4, 8))])


def _x(rows=8, cols=3):
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)


def test_creation_shapes_follow_the_value_at_run_time(device):
    ones = tp.compile(lambda n: tp.ones((n, 4)), args=[tp.DimensionInputInfo((0, 2, 8))])
    for n in (0, 1, 5, 8):
        np.testing.assert_array_equal(np.from_dlpack(tp.copy(ones(n), tp.device("cpu"))), np.ones((n, 4), np.float32))
    grid = tp.compile(lambda m, n: tp.zeros((m, n * 2)), args=[tp.DimensionInputInfo((1, 2, 4))] * 2)
    assert grid(3, 2).shape == (3, 4)
    assert grid(1, 4).shape == (1, 8)


def test_iota_and_size_arithmetic(device):
    def f(n):
        return tp.iota((n * 2, 3), dim=0) + tp.iota((n // 2 + 1, 1), dim=0)[-1:]

    exe = tp.compile(f, args=[tp.DimensionInputInfo((1, 3, 6))])
    for n in (1, 2, 5):
        want = np.arange(n * 2, dtype=np.float32)[:, None] + np.zeros((1, 3), np.float32) + n // 2
        np.testing.assert_array_equal(np.array(exe(n).tolist()), want)


def test_the_value_is_also_data(device):
    exe = tp.compile(
        lambda x, n: x * tp.cast(n, tp.float32) + tp.cast(n * 10, tp.float32),
        args=[tp.InputInfo((2,), tp.float32), tp.DimensionInputInfo((0, 1, 50))],
    )
    for n in (0, 3, 50):
        want = [n + 10.0 * n, -2.0 * n + 10.0 * n]
        np.testing.assert_allclose(np.array(exe(tp.Tensor([1.0, -2.0]), n).tolist()), want)


def test_reshape_takes_a_runtime_size(device):
    exe = tp.compile(
        lambda x, n: tp.reshape(x, (n, -1)),
        args=[tp.InputInfo(((1, 12, 24),), tp.float32), tp.DimensionInputInfo((1, 3, 8))],
    )
    for length, n in ((12, 3), (24, 8), (6, 1), (8, 4)):
        x = np.arange(length, dtype=np.float32)
        np.testing.assert_array_equal(np.array(exe(tp.Tensor(x), n).tolist()), x.reshape(n, -1))
    with pytest.raises(tp.TripyException) as e:
        exe(tp.Tensor(np.arange(10, dtype=np.float32)), 4)
    msg = str(e.value)
    assert "reshape" in msg and "number of elements must not change" in msg and "10 and 8" in msg
    assert "tp.reshape(x, (n, -1))" in msg


def test_slices_take_runtime_bounds(rows):
    x = _x()
    for n in (1, 3, 8):
        np.testing.assert_array_equal(np.array(rows(tp.Tensor(x), n).tolist()), x[:n] * 2)


def test_slices_of_dynamic_dims_are_clamped_like_python(device):
    exe = tp.compile(
        lambda x, n: (x[:n], x[n:], x[1:n], x[-2:], x[:-1], x[1::2]),
        args=[tp.InputInfo(((1, 4, 8), 3), tp.float32), tp.DimensionInputInfo((0, 2, 10))],
    )
    for length in (1, 2, 5, 8):
        x = _x(length)
        for n in (0, 1, 3, 10):
            got = exe(tp.Tensor(x), n)
            for out, want in zip(got, (x[:n], x[n:], x[1:n], x[-2:], x[:-1], x[1::2])):
                assert out.shape == want.shape
                np.testing.assert_array_equal(np.array(out.tolist()).reshape(want.shape), want)


def test_slicing_with_a_size_and_a_negative_step_matches_numpy(device):
    exe = tp.compile(lambda x, n: x[n::-1], args=[tp.InputInfo((4,), tp.float32), tp.DimensionInputInfo((0, 1, 5))])
    x = np.arange(4, dtype=np.float32)
    for n in (0, 1, 3, 5):
        assert exe(tp.Tensor(x), n).tolist() == x[n::-1].tolist()


def test_value_outside_the_range_names_argument_and_bound(rows):
    with pytest.raises(tp.TripyException) as e:
        rows(tp.Tensor(_x()), 9)  # the line the error must show
    msg = str(e.value)
    assert "Argument 'n' has value 9, which is outside the range [1, 8]" in msg
    assert "test_dimension_input.py" in msg and "rows(tp.Tensor(_x()), 9)" in msg
    with pytest.raises(tp.TripyException, match=r"value 0, which is outside the range \[1, 8\]"):
        rows(tp.Tensor(_x()), 0)
    with pytest.raises(tp.TripyException, match=r"outside the range \[1, 8\]"):
        rows(tp.Tensor(_x()), 2**70)


@pytest.mark.parametrize("bad", [2.0, True, "3", None, tp.Tensor([3])], ids=["float", "bool", "str", "none", "tensor"])
def test_wrong_types_are_rejected(rows, bad):
    want = f"Argument 'n' must be an int or a tp.DimensionSize, but got: {type(bad).__name__}"
    with pytest.raises(tp.TripyException, match=want):
        rows(tp.Tensor(_x()), bad)


def test_accepts_ints_numpy_ints_and_eager_dimension_sizes(rows):
    x = tp.Tensor(_x())
    assert rows(x, 2).shape == (2, 3)
    assert rows(x, np.int64(5)).shape == (5, 3)
    assert rows(x, n=tp.DimensionSize(7)).shape == (7, 3)
    assert rows(x, tp.ones((6, 2)).shape[0]).shape == (6, 3)


def test_signature_str_and_input_infos_show_sizes(rows):
    assert str(rows) == "Executable(x: tripy.Tensor, n: int) -> tripy.Tensor"
    params = inspect.signature(rows).parameters
    assert params["n"].annotation is int and params["x"].annotation is tp.Tensor
    infos = rows.input_infos
    assert isinstance(infos["n"], tp.DimensionInputInfo) and infos["n"].value_bounds == tp.Bounds((1,), (4,), (8,))
    assert repr(infos["x"]) == "InputInfo(min=[8, 3], opt=[8, 3], max=[8, 3], dtype=float32)"


def test_save_and_load_keep_the_size_input(rows, tmp_path):
    path = tmp_path / "rows.tpy"
    rows.save(path)
    loaded = tp.Executable.load(path)
    assert str(loaded) == str(rows)
    assert repr(loaded.input_infos["n"]) == "DimensionInputInfo(min=1, opt=4, max=8)"
    x = _x()
    for n in (1, 6):
        np.testing.assert_array_equal(np.array(loaded(tp.Tensor(x), n=n).tolist()), x[:n] * 2)
    with pytest.raises(tp.TripyException, match=r"Argument 'n' has value 9, which is outside the range \[1, 8\]"):
        loaded(tp.Tensor(x), 9)


def test_evaluating_the_size_inside_compile_is_an_error(device):
    with pytest.raises(tp.TripyException, match="depends on a runtime input") as e:
        tp.compile(lambda n: tp.ones((int(n), 2)), args=[tp.DimensionInputInfo((1, 2, 3))])
    assert "int(n)" in str(e.value)


def test_sizes_nested_in_containers_are_inputs(device):
    exe = tp.compile(lambda sizes: tp.ones((sizes["rows"], 2)), args=[{"rows": tp.DimensionInputInfo((1, 2, 4))}])
    assert "sizes['rows']: int" in str(exe)
    assert exe(3).shape == (3, 2)

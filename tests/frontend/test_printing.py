"""The printed form of tensors, checked against the seeds' outputs and numpy's layout."""

import math

import numpy as np
import pytest

import tripy as tp

from tripy.frontend.printing import (
    format_data,
    format_tensor,
    summarize_needed,
    summary_slices,
)


@pytest.mark.parametrize("device", ["gpu:0", "cpu"])
def test_seed_outputs(device):
    assert format_tensor([[6.0]], "float32", (1, 1), device) == (
        f"tensor([[6.0000]], dtype=float32, loc={device}, shape=(1, 1))"
    )
    assert format_tensor([[1.0, 1.0]], "float32", (1, 2), device) == (
        "tensor(\n" "    [[1.0000, 1.0000]],\n" f"    dtype=float32, loc={device}, shape=(1, 2))"
    )
    assert format_tensor([[1.0, 2.0], [2.0, 3.0]], "float32", (2, 2), device) == (
        "tensor(\n"
        "    [[1.0000, 2.0000],\n"
        "     [2.0000, 3.0000]],\n"
        f"    dtype=float32, loc={device}, shape=(2, 2))"
    )
    assert format_tensor([[18.0], [42.0]], "float32", (2, 1), device) == (
        "tensor(\n"
        "    [[18.0000],\n"
        "     [42.0000]],\n"
        f"    dtype=float32, loc={device}, shape=(2, 1))"
    )


def test_rank_0_and_rank_1_print_on_one_line():
    assert format_tensor(5, "int32", (), "cpu") == "tensor(5, dtype=int32, loc=cpu, shape=())"
    assert format_tensor(2.5, "float32", (), "cpu") == "tensor(2.5000, dtype=float32, loc=cpu, shape=())"
    assert format_tensor([1, 2, 3], "int32", (3,), "cpu") == "tensor([1, 2, 3], dtype=int32, loc=cpu, shape=(3,))"


def test_all_unit_dims_print_on_one_line():
    assert format_tensor([[[7]]], "int64", (1, 1, 1), "cpu") == (
        "tensor([[[7]]], dtype=int64, loc=cpu, shape=(1, 1, 1))"
    )


def test_float_formatting():
    values = [1.0, -0.5, math.inf, -math.inf, math.nan, 0.0]
    assert format_data(values, "float32", (6,)) == (
        "[ 1.0000, -0.5000,     inf,    -inf,     nan,  0.0000]"
    )


def test_huge_floats_use_scientific_notation():
    assert format_data([1e9], "float32", (1,)) == "[1.0000e+09]"


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float8"])
def test_every_float_dtype_prints_four_decimals(dtype_name):
    assert format_data([1, 2], dtype_name, (2,)) == "[1.0000, 2.0000]"


def test_bools_and_ints_print_plainly_and_right_aligned():
    assert format_data([True, False], "bool", (2,)) == "[ True, False]"
    assert format_data([[1, -20], [300, 4]], "int32", (2, 2)) == "[[  1, -20],\n [300,   4]]"


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (2, 1, 3, 2)])
def test_nested_layout_matches_numpy(shape):
    array = np.arange(int(np.prod(shape))).reshape(shape)
    # numpy separates items with spaces; ours with commas, otherwise the layout is the same.
    expected = np.array2string(array, separator=", ")
    assert format_data(array.tolist(), "int32", shape) == expected


def test_blocks_of_rank_3_are_separated_by_blank_lines_without_trailing_spaces():
    array = np.arange(8).reshape(2, 2, 2)
    text = format_tensor(array.tolist(), "int32", (2, 2, 2), "cpu")
    assert text == (
        "tensor(\n"
        "    [[[0, 1],\n"
        "      [2, 3]],\n"
        "\n"
        "     [[4, 5],\n"
        "      [6, 7]]],\n"
        "    dtype=int32, loc=cpu, shape=(2, 2, 2))"
    )


def test_long_axes_of_large_tensors_are_summarised():
    assert format_tensor(list(range(1001)), "int32", (1001,), "cpu") == (
        "tensor([   0,    1,    2, ...,  998,  999, 1000], dtype=int32, loc=cpu, shape=(1001,))"
    )
    array = np.arange(1100).reshape(11, 100)
    assert format_data(array.tolist(), "int32", (11, 100)) == (
        "[[   0,    1,    2, ...,   97,   98,   99],\n"
        " [ 100,  101,  102, ...,  197,  198,  199],\n"
        " [ 200,  201,  202, ...,  297,  298,  299],\n"
        " ...,\n"
        " [ 800,  801,  802, ...,  897,  898,  899],\n"
        " [ 900,  901,  902, ...,  997,  998,  999],\n"
        " [1000, 1001, 1002, ..., 1097, 1098, 1099]]"
    )


def test_small_tensors_print_every_value_like_numpy():
    # numpy summarises only past 1000 elements; so does Tripy, wrapping long rows instead.
    assert not summarize_needed((10, 100)) and summarize_needed((1001,))
    text = str(tp.arange(12, dtype=tp.int32))
    assert text == (
        f"tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11], dtype=int32, loc={tp.arange(1).device}, shape=(12,))"
    )
    assert "..." not in str(tp.ones((2, 8))) and "..." not in str(tp.reshape(tp.arange(1000), (10, 100)))
    assert "..." in str(tp.arange(1001))


def test_long_rows_wrap_under_their_first_value():
    data = format_data(list(range(30)), "int32", (30,), line_width=40)
    lines = data.split("\n")
    assert all(len(line) <= 40 for line in lines) and len(lines) > 1
    assert all(line.startswith(" ") for line in lines[1:])
    assert [int(v) for v in data.replace("[", "").replace("]", "").replace("\n", "").split(",")] == list(range(30))
    printed = format_tensor(np.arange(200).reshape(2, 100).tolist(), "int32", (2, 100), "cpu")
    assert all(len(line) <= 80 for line in printed.split("\n"))


def test_six_items_are_not_summarised():
    assert not summarize_needed((6, 6))
    assert format_data(list(range(6)), "int32", (6,)) == "[0, 1, 2, 3, 4, 5]"


def test_already_summarised_values_print_like_full_ones():
    shape = (40, 30)
    array = np.arange(1200).reshape(shape)
    rows = np.concatenate([np.arange(start, stop) for start, stop in summary_slices(shape)[0]])
    cols = np.concatenate([np.arange(start, stop) for start, stop in summary_slices(shape)[1]])
    edges = array[np.ix_(rows, cols)]
    assert edges.shape == (6, 6)
    assert format_data(edges.tolist(), "int32", shape) == format_data(array.tolist(), "int32", shape)


def test_mismatched_values_and_shape_are_rejected():
    with pytest.raises(ValueError, match="Axis 1 has 3 entries"):
        format_data([[1, 2, 3]], "int32", (1, 2))


def test_empty_tensors():
    assert format_tensor([], "float32", (0,), "cpu") == "tensor([], dtype=float32, loc=cpu, shape=(0,))"
    assert format_data([[], []], "float32", (2, 0)) == "[[],\n []]"


def test_summary_helpers():
    assert not summarize_needed((1, 7)) and summarize_needed((3, 1000))
    assert summary_slices((3, 9)) == [[(0, 3)], [(0, 9)]]
    assert summary_slices((3, 1000)) == [[(0, 3)], [(0, 3), (997, 1000)]]

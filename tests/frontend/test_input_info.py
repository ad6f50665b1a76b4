"""InputInfo, NamedDimension and DimensionInputInfo: their printed form, bounds and validation."""

import numpy as np
import pytest

from tripy.exception import TripyException
from tripy.frontend.dtypes import float32
from tripy.frontend.input_info import Bounds, DimensionInputInfo, InputInfo, NamedDimension


def test_repr_matches_the_seed():
    info = InputInfo(shape=((1, 2, 4), 2), dtype=float32)
    assert repr(info) == "InputInfo(min=[1, 2], opt=[2, 2], max=[4, 2], dtype=float32)"


def test_static_shape():
    info = InputInfo(shape=(1, 2), dtype=float32)
    assert info.shape_bounds == Bounds(min=(1, 2), opt=(1, 2), max=(1, 2))
    assert info.shape_bounds.is_static()
    assert info.dimension_names == {}
    assert info.dtype is float32
    assert info.rank == 2
    assert repr(info) == "InputInfo(min=[1, 2], opt=[1, 2], max=[1, 2], dtype=float32)"


def test_list_shapes_and_numpy_ints_are_accepted():
    info = InputInfo(shape=[np.int64(3), [1, 2, 3]], dtype=float32)
    assert info.shape_bounds == Bounds(min=(3, 1), opt=(3, 2), max=(3, 3))
    bounds = info.shape_bounds
    assert all(type(value) is int for value in bounds.min + bounds.opt + bounds.max)


def test_scalar_input():
    info = InputInfo(shape=(), dtype=float32)
    assert info.shape_bounds == Bounds((), (), ())
    assert repr(info) == "InputInfo(min=[], opt=[], max=[], dtype=float32)"


def test_named_dimensions():
    batch = NamedDimension("batch", 1, 2, 4)
    info = InputInfo(shape=(batch, 8, batch), dtype=float32)
    assert info.shape_bounds.min == (1, 8, 1)
    assert info.shape_bounds.opt == (2, 8, 2)
    assert info.shape_bounds.max == (4, 8, 4)
    assert info.dimension_names == {0: "batch", 2: "batch"}
    assert batch.bounds == (1, 2, 4)
    assert repr(info) == (
        "InputInfo(min=[1, 8, 1], opt=[2, 8, 2], max=[4, 8, 4], dtype=float32, "
        "dimension_names={0: 'batch', 2: 'batch'})"
    )
    assert repr(batch) == "NamedDimension('batch', min=1, opt=2, max=4)"


def test_one_name_with_different_bounds_is_rejected():
    with pytest.raises(TripyException, match="NamedDimension 'n' appears with different bounds"):
        InputInfo(shape=(NamedDimension("n", 1, 2, 4), NamedDimension("n", 1, 2, 8)), dtype=float32)


@pytest.mark.parametrize(
    "bounds, message",
    [
        ((4, 2, 1), r"min <= opt <= max, but got: \(4, 2, 1\)"),
        ((1, 5, 4), r"min <= opt <= max, but got: \(1, 5, 4\)"),
        ((0, 1, 2), "min must be at least 1"),
        ((1, 2), r"must be an int or a \(min, opt, max\) tuple"),
        ((1, 2.5, 3), "must be an integer, but got: 2.5"),
    ],
)
def test_invalid_bounds_are_rejected(bounds, message):
    with pytest.raises(TripyException, match=message):
        InputInfo(shape=(bounds, 2), dtype=float32)


@pytest.mark.parametrize("size", [0, -3])
def test_static_sizes_must_be_positive(size):
    with pytest.raises(TripyException, match=f"Dimension 1 of InputInfo's shape must be positive, but got: {size}"):
        InputInfo(shape=(2, size), dtype=float32)


def test_bools_are_not_sizes():
    with pytest.raises(TripyException, match="must be an integer, but got: True"):
        InputInfo(shape=(True,), dtype=float32)


def test_shape_must_be_a_sequence():
    with pytest.raises(TripyException, match="shape must be a tuple or list"):
        InputInfo(shape=3, dtype=float32)


def test_dtype_must_be_a_tripy_dtype():
    with pytest.raises(TripyException, match="Expected InputInfo's dtype to be a tripy data type"):
        InputInfo(shape=(2,), dtype="float32")


def test_named_dimension_validation():
    with pytest.raises(TripyException, match="NamedDimension 'b': bounds must satisfy min <= opt <= max"):
        NamedDimension("b", 3, 2, 1)
    with pytest.raises(TripyException, match="name must be a non-empty string"):
        NamedDimension("", 1, 2, 3)


def test_dimension_input_info():
    info = DimensionInputInfo(value_bounds=(0, 2, 3))
    assert info.value_bounds == Bounds(min=(0,), opt=(2,), max=(3,))
    assert repr(info) == "DimensionInputInfo(min=0, opt=2, max=3)"
    with pytest.raises(TripyException, match="DimensionInputInfo's value_bounds: bounds must satisfy"):
        DimensionInputInfo(value_bounds=(3, 2, 1))


def test_nvtripy_documented_examples():
    # nvtripy's InputInfo, NamedDimension and DimensionInputInfo examples, as a porting user runs them.
    import tripy as tp

    inp = tp.InputInfo((2, 4), dtype=tp.float32)
    assert inp.shape_bounds.min == (2, 4) and inp.shape_bounds.opt == (2, 4) and inp.shape_bounds.max == (2, 4)
    inp = tp.InputInfo(((1, 2, 3), 4), dtype=tp.float32)
    assert (inp.shape_bounds.min, inp.shape_bounds.opt, inp.shape_bounds.max) == ((1, 4), (2, 4), (3, 4))
    window_size = tp.NamedDimension("window_size", 3, 5, 7)
    inp = tp.InputInfo((1, window_size, window_size), dtype=tp.float32)
    assert inp.shape_bounds.min == (1, 3, 3) and inp.shape_bounds.max == (1, 7, 7)
    assert inp.dimension_names == {1: "window_size", 2: "window_size"}
    dim_inp = tp.DimensionInputInfo((1, 2, 3))
    assert (dim_inp.value_bounds.min, dim_inp.value_bounds.opt, dim_inp.value_bounds.max) == ((1,), (2,), (3,))
    assert tp.NamedDimension("batch", 1, 2, 3).bounds == (1, 2, 3)


def test_dimension_sizes_are_accepted_as_bounds():
    import tripy as tp

    n = tp.ones((3, 5)).shape[1]
    inp = tp.InputInfo(((1, n, 8),), dtype=tp.float32)
    assert inp.shape_bounds.opt == (5,) and type(inp.shape_bounds.opt[0]) is int


def test_bounds_of_unequal_lengths_are_rejected():
    with pytest.raises(TripyException, match="Bounds need min, opt and max of one length"):
        Bounds(min=(1, 2), opt=(1,), max=(1, 2))

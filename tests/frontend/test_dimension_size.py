"""tp.DimensionSize as nvtripy has it: a scalar int32 tensor made from an int (with an optional
name), evaluated with .eval(), printed as its number; arithmetic keeps it a size, symbolic inside
tp.compile (arange and reshape follow the input)."""

import numpy as np
import pytest

import tripy as tp


def test_construction_eval_and_printing():
    size = tp.DimensionSize(6, name="rows")
    assert size.name == "rows" and size.dtype == tp.int32 and size.shape == ()
    assert size.eval() is size
    assert int(size) == 6 and str(size) == "6" and repr(size) == "6"
    assert np.asarray(size).item() == 6
    assert tp.DimensionSize(np.int64(3)).tolist() == 3


@pytest.mark.parametrize("bad", [2.5, True, "3", None])
def test_non_ints_are_rejected(bad):
    with pytest.raises(tp.TripyException, match="A DimensionSize must be an int"):
        tp.DimensionSize(bad)


@pytest.mark.parametrize(
    "expr, want",
    [
        (lambda d: d + 1, 8),
        (lambda d: 3 * d, 21),
        (lambda d: d - d // 2, 4),
        (lambda d: tp.maximum(d, 9), 9),
        (lambda d: tp.minimum(d * d, 10), 10),
    ],
)
def test_arithmetic_stays_a_dimension_size(expr, want):
    out = expr(tp.DimensionSize(7))
    assert isinstance(out, tp.DimensionSize) and int(out) == want


def test_sizes_are_symbolic_inside_compile():
    seen = []

    def f(x):
        rows = x.shape[0]
        seen.append(type(rows * 2 + 1))
        return tp.reshape(x, (rows * 2, -1)) + tp.reshape(tp.arange(rows * 2), (-1, 1))

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 5), 4), dtype=tp.float32)])
    assert seen == [tp.DimensionSize]
    for rows in (1, 3, 5):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        want = x.reshape(rows * 2, -1) + np.arange(rows * 2)[:, None]
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), want)


@pytest.mark.parametrize("start, stop, step", [(0, 5, 1), (2, 9, 3), (8, 1, -2), (4, 4, 1)])
def test_arange_with_size_bounds_matches_numpy(start, stop, step):
    out = tp.arange(tp.DimensionSize(start), tp.DimensionSize(stop), step, dtype=tp.int32)
    assert out.tolist() == np.arange(start, stop, step).tolist()


def test_arange_of_a_size_input():
    exe = tp.compile(
        lambda x, n: x[:n] + tp.arange(n),
        args=[tp.InputInfo((6,), dtype=tp.float32), tp.DimensionInputInfo((1, 3, 6))],
    )
    assert exe(tp.zeros((6,)), 4).tolist() == [0.0, 1.0, 2.0, 3.0]

"""split and flip against numpy: eager, and compiled with a dynamic dim (tp.InputInfo bounds) at
several run-time sizes including the minimum; bad sizes are errors naming the user's line, at the
call when static and at run time when the dim is dynamic."""

import os
import sys

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(12)
HERE = os.path.basename(__file__)


def _line():
    return sys._getframe(1).f_lineno + 2  # two lines below the call: the body of the `with`


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_eager_split_equal_and_by_sizes():
    x = _x(6, 4)
    parts = tp.split(tp.Tensor(x), 3)
    for got, want in zip(parts, np.split(x, 3)):
        np.testing.assert_array_equal(np.asarray(got), want)
    parts = tp.split(tp.Tensor(x), [1, 0, 3], dim=-1)
    for got, want in zip(parts, np.split(x, [1, 1], axis=1)):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_eager_flip():
    x = _x(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(tp.flip(tp.Tensor(x))), x[::-1, ::-1, ::-1])
    np.testing.assert_array_equal(np.asarray(tp.flip(tp.Tensor(x), dim=[-1, 0])), x[::-1, :, ::-1])


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int32, np.int64, np.bool_])
def test_eager_split_and_flip_keep_any_dtype(dtype):
    x = (RNG.standard_normal((4, 3)) * 50).astype(dtype)
    a, b = tp.split(tp.Tensor(x), [3, 1])
    assert a.dtype.name == np.dtype(dtype).name
    np.testing.assert_array_equal(np.asarray(a), x[:3])
    np.testing.assert_array_equal(np.asarray(b), x[3:])
    np.testing.assert_array_equal(np.asarray(tp.flip(tp.Tensor(x), 1)), x[:, ::-1])


@pytest.mark.parametrize("n", [1, 2, 3])
def test_compiled_split_into_equal_parts_of_a_dynamic_dim(n):
    T = tp.NamedDimension("T", n, 2 * n, 5 * n)

    def f(x):
        return tuple(p * float(i + 1) for i, p in enumerate(tp.split(x, n, dim=1)))

    exe = tp.compile(f, args=[tp.InputInfo((2, T, 3), dtype=tp.float32)])
    for t in (n, 2 * n, 5 * n):  # the minimum, the optimum and the maximum
        x = _x(2, t, 3)
        got = exe(tp.Tensor(x))
        got = got if isinstance(got, (tuple, list)) else [got]
        assert len(got) == n
        for i, (g, want) in enumerate(zip(got, np.split(x, n, axis=1))):
            np.testing.assert_array_equal(np.asarray(g), want * (i + 1))


def test_compiled_split_by_sizes_of_a_dynamic_dim():
    T = tp.NamedDimension("T", 2, 5, 9)

    def f(x):
        head, body, tail = tp.split(x, [1, x.shape[0] - 2, 1])
        return head + tail, tp.flip(body, 0)

    exe = tp.compile(f, args=[tp.InputInfo((T, 2), dtype=tp.float32)])
    for t in (2, 3, 9):
        x = _x(t, 2)
        a, b = exe(tp.Tensor(x))
        np.testing.assert_array_equal(np.asarray(a), x[:1] + x[-1:])
        np.testing.assert_array_equal(np.asarray(b), x[1:-1][::-1])


def test_compiled_flip_of_dynamic_dims():
    B, T = tp.NamedDimension("B", 1, 2, 4), tp.NamedDimension("T", 1, 3, 7)
    exe = tp.compile(lambda x: tp.flip(x) * 2.0, args=[tp.InputInfo((B, T), dtype=tp.float32)])
    for b, t in ((1, 1), (2, 3), (4, 7), (3, 1)):
        x = _x(b, t)
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), x[::-1, ::-1] * 2.0)


def test_dynamic_dim_that_does_not_divide_is_an_error_of_the_call_naming_the_split():
    T = tp.NamedDimension("T", 2, 4, 9)

    def f(x):
        a, b = tp.split(x, 2)
        return a - b

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo((T,), dtype=tp.float32)])
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(np.arange(4, dtype=np.float32)))), [-2.0, -2.0])
    with pytest.raises(tp.TripyException, match="cannot be split into 2 equal parts") as e:
        exe(tp.Tensor(np.arange(5, dtype=np.float32)))
    assert f"{HERE}:{line}" in str(e.value)


def test_sizes_that_do_not_add_up_at_run_time_are_an_error_naming_the_split():
    T = tp.NamedDimension("T", 1, 4, 9)

    def f(x, n):
        a, b = tp.split(x, [n, 2])
        return a * 2.0, b

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(
        f, args=[tp.InputInfo((T,), dtype=tp.float32), tp.DimensionInputInfo(value_bounds=(0, 2, 7))]
    )
    x = np.arange(5, dtype=np.float32)
    a, b = exe(tp.Tensor(x), tp.DimensionSize(3))
    np.testing.assert_array_equal(np.asarray(a), x[:3] * 2.0)
    np.testing.assert_array_equal(np.asarray(b), x[3:])
    with pytest.raises(tp.TripyException, match="do not add up") as e:
        exe(tp.Tensor(x), tp.DimensionSize(2))
    assert f"{HERE}:{line}" in str(e.value)


def test_static_bad_input_names_the_line():
    x = tp.ones((5, 2))
    line = _line()
    with pytest.raises(tp.TripyException, match="cannot be split into 2 equal parts") as e:
        tp.split(x, 2)
    assert f"{HERE}:{line}" in str(e.value)
    for call, match in (
        (lambda: tp.split(x, [2, 2]), "do not add up"),
        (lambda: tp.split(x, [6, -1]), "must not be negative"),
        (lambda: tp.split(x, 0), "must be positive"),
        (lambda: tp.split(x, 1, dim=2), "out of range"),
        (lambda: tp.split(x, 2.0), "sequence of ints"),
        (lambda: tp.flip(x, dim=-3), "out of range"),
        (lambda: tp.flip(tp.Tensor(1.0), dim=0), "rank 0"),
    ):
        with pytest.raises(tp.TripyException, match=match) as e:
            call()
        assert f"{HERE}:{call.__code__.co_firstlineno}" in str(e.value)

"""pad and repeat against numpy: eager, compiled static and compiled dynamic, on every device."""

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(1)


def _dev(data, **kwargs):
    """``data`` on the default device: numpy arrays would otherwise stay, zero-copy, on the CPU."""
    return tp.Tensor(data, device=default_device(), **kwargs)


def _check(out, ref):
    np.testing.assert_allclose(np.array(out.tolist()), ref, rtol=1e-6, atol=1e-6)
    assert np.array(out.tolist()).shape == ref.shape


CASES = {
    "constant": (lambda x: tp.pad(x, [(0, 0), (1, 2)], value=1.5), lambda x: np.pad(x, [(0, 0), (1, 2)], constant_values=1.5)),
    "constant_batch": (lambda x: tp.pad(x, [(2, 1), (0, 1)]), lambda x: np.pad(x, [(2, 1), (0, 1)])),
    "reflect": (lambda x: tp.pad(x, [(0, 0), (3, 2)], mode="reflect"), lambda x: np.pad(x, [(0, 0), (3, 2)], mode="reflect")),
    "repeat_last": (lambda x: tp.repeat(x, 3, dim=-1), lambda x: np.repeat(x, 3, axis=-1)),
    "repeat_batch": (lambda x: tp.repeat(x, 2, dim=0), lambda x: np.repeat(x, 2, axis=0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_pad_and_repeat_match_numpy(name, mode, device):
    fn, ref = CASES[name]
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    if mode == "eager":
        _check(fn(_dev(x)), ref(x))
        return
    dims = (3, 4) if mode == "static" else ((1, 3, 5), 4)
    exe = tp.compile(fn, args=[tp.InputInfo(dims, dtype=tp.float32)])
    _check(exe(_dev(x)), ref(x))
    if mode == "dynamic":
        x5 = RNG.standard_normal((5, 4)).astype(np.float32)
        _check(exe(_dev(x5)), ref(x5))


def test_pad_integers_and_reflect_in_every_dim(device):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    _check(tp.pad(_dev(x), [(1, 1), (2, 0)], value=-7), np.pad(x, [(1, 1), (2, 0)], constant_values=-7))
    _check(tp.pad(_dev(x), [(2, 1), (1, 3)], mode="reflect"), np.pad(x, [(2, 1), (1, 3)], mode="reflect"))


def test_repeat_zero_times_gives_an_empty_dim(device):
    assert tp.repeat(tp.ones((2, 3)), 0, dim=1).shape == (2, 0)


def test_pad_rejects_a_wrong_number_of_pairs():
    with pytest.raises(tp.TripyException, match=r"got 1 \(before, after\) pairs for a tensor of rank 2") as e:
        tp.pad(tp.ones((2, 2)), [(1, 1)])
    assert "test_pad.py" in str(e.value)


def test_pad_rejects_reflect_wider_than_the_dim():
    with pytest.raises(tp.TripyException, match="smaller than its size 3") as e:
        tp.pad(tp.ones((3,)), [(3, 0)], mode="reflect")
    assert "test_pad.py" in str(e.value)


def test_pad_rejects_unknown_modes_and_negative_sizes():
    with pytest.raises(tp.TripyException, match="unsupported mode 'edge'"):
        tp.pad(tp.ones((3,)), [(1, 0)], mode="edge")
    with pytest.raises(tp.TripyException, match="non-negative"):
        tp.pad(tp.ones((3,)), [(-1, 0)])


def test_repeat_rejects_bad_arguments():
    with pytest.raises(tp.TripyException, match="repeats must be a non-negative int"):
        tp.repeat(tp.ones((3,)), -1, dim=0)
    with pytest.raises(tp.TripyException, match="dim 2 is out of range"):
        tp.repeat(tp.ones((3,)), 2, dim=2)


# --- pad as a core op: dynamic dims and widths, every mode, errors naming the user's line ---------

HERE = "test_pad.py"


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_compiled_pad_of_dynamic_dims_at_min_opt_max(mode):
    B, T = tp.NamedDimension("B", 1, 2, 4), tp.NamedDimension("T", 4, 6, 9)
    widths = [(1, 0), (3, 2), (0, 0)]
    kwargs = {"value": -2.5} if mode == "constant" else {}
    exe = tp.compile(lambda x: tp.pad(x, widths, mode=mode, **kwargs) * 2.0,
                     args=[tp.InputInfo((B, T, 3), dtype=tp.float32)])
    np_kwargs = {"constant_values": -2.5} if mode == "constant" else {}
    for b, t in ((1, 4), (2, 6), (4, 9), (3, 5)):
        x = RNG.standard_normal((b, t, 3))
        if mode == "reflect" and b == 1:  # reflecting 1 element before dim 0 needs 2 rows
            with pytest.raises(tp.TripyException, match="smaller than its size"):
                exe(tp.Tensor(x.astype(np.float32)))
            continue
        want = np.pad(x, widths, mode=mode, **np_kwargs) * 2.0
        got = np.asarray(exe(tp.Tensor(x.astype(np.float32))))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_compiled_reflect_at_the_smallest_size_that_fits():
    T = tp.NamedDimension("T", 3, 5, 8)
    exe = tp.compile(lambda x: tp.pad(x, [(2, 2)], mode="reflect"), args=[tp.InputInfo((T,), dtype=tp.float32)])
    for t in (3, 5, 8):
        x = RNG.standard_normal(t)
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x.astype(np.float32)))),
                                   np.pad(x, [(2, 2)], mode="reflect"), rtol=1e-6)


def test_pad_to_a_dynamic_width():
    # Pad a dynamic length up to a fixed 8: the width is a tp.DimensionSize.
    T = tp.NamedDimension("T", 1, 5, 8)
    exe = tp.compile(lambda x: tp.pad(x, [(0, 0), (0, 8 - x.shape[1])], value=7),
                     args=[tp.InputInfo((2, T), dtype=tp.int32)])
    for t in (1, 5, 8):
        x = RNG.integers(-9, 9, (2, t)).astype(np.int32)
        got = exe(tp.Tensor(x))
        assert got.dtype == tp.int32
        np.testing.assert_array_equal(np.asarray(got), np.pad(x, [(0, 0), (0, 8 - t)], constant_values=7))


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int64, np.bool_])
def test_eager_pad_keeps_the_dtype(dtype):
    x = (RNG.standard_normal((3, 4)) * 20).astype(dtype)
    value = True if dtype == np.bool_ else 3
    got = tp.pad(tp.Tensor(x), [(1, 2), (0, 1)], value=value)
    assert got.dtype.name == np.dtype(dtype).name
    np.testing.assert_array_equal(np.asarray(got), np.pad(x, [(1, 2), (0, 1)], constant_values=value))
    np.testing.assert_array_equal(np.asarray(tp.pad(tp.Tensor(x), [(2, 0), (3, 3)], mode="reflect")),
                                  np.pad(x, [(2, 0), (3, 3)], mode="reflect"))


def test_eager_pad_of_empty_and_rank_0_tensors():
    np.testing.assert_array_equal(np.asarray(tp.pad(tp.Tensor(np.zeros((0, 2), np.float32)), [(1, 1), (0, 0)])),
                                  np.zeros((2, 2)))
    assert tp.pad(tp.Tensor(2.0), []).tolist() == 2.0


def test_reflect_that_does_not_fit_a_dynamic_dim_is_an_error_of_the_call_naming_the_pad():
    T = tp.NamedDimension("T", 1, 4, 8)

    def f(x):
        return tp.pad(x, [(2, 1)], mode="reflect")

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo((T,), dtype=tp.float32)])
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(np.arange(3, dtype=np.float32)))),
                                  [2.0, 1.0, 0.0, 1.0, 2.0, 1.0])
    with pytest.raises(tp.TripyException, match="smaller than its size") as e:
        exe(tp.Tensor(np.arange(2, dtype=np.float32)))
    assert f"{HERE}:{line}" in str(e.value)


def test_negative_dynamic_width_is_an_error_of_the_call_naming_the_pad():
    def f(x, n):
        return tp.pad(x, [(n - 2, 0)])

    line = f.__code__.co_firstlineno + 1
    exe = tp.compile(f, args=[tp.InputInfo((3,), dtype=tp.float32), tp.DimensionInputInfo(value_bounds=(0, 3, 5))])
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(np.ones(3, np.float32)), tp.DimensionSize(3))),
                                  [0.0, 1.0, 1.0, 1.0])
    with pytest.raises(tp.TripyException, match="negative at run time") as e:
        exe(tp.Tensor(np.ones(3, np.float32)), tp.DimensionSize(1))
    assert f"{HERE}:{line}" in str(e.value)


def test_static_bad_pad_names_the_line():
    x = tp.ones((3, 2))
    for call, match in (
        (lambda: tp.pad(x, [(1, 1)]), r"got 1 \(before, after\) pairs for a tensor of rank 2"),
        (lambda: tp.pad(x, [(3, 0), (0, 0)], mode="reflect"), "smaller than its size 3"),
        (lambda: tp.pad(x, [(0, 0), (0, 2)], mode="reflect"), "smaller than its size 2"),
        (lambda: tp.pad(x, [(1, 0), (0, 0)], mode="edge"), "unsupported mode 'edge'"),
        (lambda: tp.pad(x, [(0, -1), (0, 0)]), "non-negative"),
        (lambda: tp.pad(x, [(0, 1.5), (0, 0)]), "ints or tp.DimensionSizes"),
        (lambda: tp.pad(x, [1, 2]), r"\(before, after\) pairs"),
        (lambda: tp.pad(x, [(1, 1), (0, 0)], value="a"), "Python number"),
        (lambda: tp.pad(tp.ones((2,), dtype=tp.int32), [(1, 1)], value=0.5), "float value"),
    ):
        with pytest.raises(tp.TripyException, match=match) as e:
            call()
        assert f"{HERE}:{call.__code__.co_firstlineno}" in str(e.value)

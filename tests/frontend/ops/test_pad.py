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

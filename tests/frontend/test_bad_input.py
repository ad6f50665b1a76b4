"""Bad input anywhere in the public API gets a clear exception: never a crash, never a raw
internal error (pybind's RuntimeError, say)."""

import pytest

import tripy as tp

ALLOWED = (tp.TripyException, TypeError, ValueError, AttributeError, IndexError)


def _public_functions():
    for name in sorted(dir(tp)):
        fn = getattr(tp, name)
        if not name.startswith("_") and callable(fn) and not isinstance(fn, type):
            yield name, fn


@pytest.mark.parametrize("name,fn", list(_public_functions()), ids=[n for n, _ in _public_functions()])
def test_every_function_rejects_bad_arguments_cleanly(name, fn):
    x = tp.ones((2, 3))
    for args in [(), (None,), ("abc",), (x, "abc"), (x, -5), (x, 10**20), (x, None), (x, 1.5), (x, (-3, 2)),
                 (tp.ones((2,), dtype=tp.int32),), (x, x, x, x)]:
        try:
            out = fn(*args)
            if isinstance(out, tp.Tensor):
                out.eval()
        except ALLOWED:
            pass


def test_sizes_beyond_64_bits_point_at_the_call():
    with pytest.raises(tp.TripyException) as e:
        tp.ones((2**40, 2**40))
    assert "more elements than fit in 64 bits" in str(e.value) and "test_bad_input.py" in str(e.value)
    with pytest.raises(tp.TripyException, match="fit in 64 bits"):
        tp.reshape(tp.ones((2,)), (10**20,))


def test_tensors_too_large_to_allocate_are_an_error():
    with pytest.raises(tp.TripyException, match="too large to allocate"):
        tp.ones((10**6, 10**6)).eval()

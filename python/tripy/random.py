"""Seeded random tensors, for tests and for initializing weights: ``tp.random.normal`` and
``tp.random.uniform``.

The values come from a counter-based generator (Philox4x32-10): a seed names a stream, and
element ``i`` of a tensor (in row-major order) is value ``i`` of its seed's stream, whatever the
shape, the device or the machine. So the same call gives the same tensor everywhere, and a
different seed an unrelated one. The values are made on the host when the call runs and become
the tensor's data (inside ``tp.compile``, a constant of the executable).
"""

import math
import numbers
import operator

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.device import default_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor
from tripy.utils.stack_info import capture_user_frames

__all__ = ["normal", "uniform"]


def _shape(shape, fn):
    if isinstance(shape, (numbers.Integral, Tensor)):
        shape = (shape,)
    # Ints only: a tp.DimensionSize has an int's __index__, but no value until a compiled call runs.
    sizes = None
    if isinstance(shape, (list, tuple)) and not any(isinstance(d, Tensor) for d in shape):
        try:
            sizes = [operator.index(d) for d in shape]
        except TypeError:
            pass
    if sizes is None:
        _raise_here(
            f"tp.random.{fn}: the shape must be a sequence of ints (sizes known now, not tp.DimensionSizes: the "
            f"values are made when the call runs), but got: {shape!r}."
        )
    if any(d < 0 for d in sizes):
        _raise_here(f"tp.random.{fn}: a shape cannot have negative sizes, but got: {tuple(sizes)}.")
    return sizes


def _number(value, what, fn):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        _raise_here(f"tp.random.{fn}: {what} must be a finite number, but got: {value!r}.")
    return float(value)


def _make(kind, shape, a, b, dtype, seed):
    dtypes.check_dtype(dtype)
    if dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        _raise_here(f"tp.random.{kind}: dtype must be float32, float16 or bfloat16, but got: {dtype.name}.")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        _raise_here(f"tp.random.{kind}: the seed must be an int in [0, 2**64), but got: {seed!r}.")
    sizes = _shape(shape, kind)
    return Tensor._wrap(_C.random(kind, sizes, dtype.name, int(seed), a, b, str(default_device()), capture_user_frames()))


def normal(shape, mean=0.0, std=1.0, dtype=dtypes.float32, seed=0):
    """
    A tensor of values drawn from the normal distribution of ``mean`` and ``std``, the same for the
    same arguments on every device and machine.

    Args:
        shape (int | Sequence[int]): The shape (sizes known when the call runs).
        mean (float): The distribution's mean.
        std (float): Its standard deviation (0 or more).
        dtype (tp.dtype): ``tp.float32``, ``tp.float16`` or ``tp.bfloat16``.
        seed (int): The stream, in ``[0, 2**64)``: another seed gives unrelated values.

    Returns:
        tp.Tensor: ``mean + std * z`` for standard normal values ``z`` (made in double, rounded to
        ``dtype`` once), on the default device.

    Raises:
        tp.TripyException: if a size is negative or not an int, ``std`` is negative, a number is
            not finite, ``dtype`` is not a floating-point dtype, or ``seed`` is out of range.

    Example::

        import tripy as tp

        w = tp.random.normal((256, 128), std=0.02, seed=1)
        assert w.shape == (256, 128)
        assert abs(float(tp.mean(w))) < 0.001 and abs(float(tp.var(w)) ** 0.5 - 0.02) < 0.001
        assert tp.equal(w, tp.random.normal((256, 128), std=0.02, seed=1))
    """
    mean, std = _number(mean, "mean", "normal"), _number(std, "std", "normal")
    if std < 0:
        _raise_here(f"tp.random.normal: std must be 0 or more, but got: {std!r}.")
    return _make("normal", shape, mean, std, dtype, seed)


def uniform(shape, low=0.0, high=1.0, dtype=dtypes.float32, seed=0):
    """
    A tensor of values drawn uniformly from ``[low, high)``, the same for the same arguments on
    every device and machine.

    Args:
        shape (int | Sequence[int]): The shape (sizes known when the call runs).
        low (float): The smallest value the tensor may hold.
        high (float): The bound every value stays below (``low`` itself where they are equal).
        dtype (tp.dtype): ``tp.float32``, ``tp.float16`` or ``tp.bfloat16``.
        seed (int): The stream, in ``[0, 2**64)``: another seed gives unrelated values.

    Returns:
        tp.Tensor: ``low + (high - low) * u`` for ``u`` of 24 random bits in ``[0, 1)``, rounded to
        ``dtype`` (a value that would round up to ``high`` takes the dtype's next value below it),
        on the default device.

    Raises:
        tp.TripyException: if a size is negative or not an int, ``low`` is above ``high``, a number
            is not finite, ``dtype`` is not a floating-point dtype, or ``seed`` is out of range.

    Example::

        import tripy as tp

        u = tp.random.uniform((2, 3), low=-1.0, high=1.0, seed=7)
        assert float(tp.min(u)) >= -1.0 and float(tp.max(u)) < 1.0
        assert not tp.equal(u, tp.random.uniform((2, 3), low=-1.0, high=1.0, seed=8))
    """
    low, high = _number(low, "low", "uniform"), _number(high, "high", "uniform")
    if low > high:
        _raise_here(f"tp.random.uniform: low ({low!r}) must not be above high ({high!r}).")
    return _make("uniform", shape, low, high, dtype, seed)

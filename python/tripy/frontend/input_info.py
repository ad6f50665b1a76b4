"""Declarations of ``tp.compile``'s runtime inputs: their shape ranges and dtypes.

These classes only describe and validate; the compiler reads ``shape_bounds``, ``dimension_names``
and ``dtype`` from them and turns each dynamic dimension into a symbol. Bounds follow nvtripy's
layout: ``shape_bounds.min`` is the whole minimum shape, not the first dimension's range.
"""

import operator

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here


def _as_int(value, what):
    # Accept anything integral (Python ints, numpy ints) but not bools, which are ints by accident.
    if isinstance(value, bool):
        _raise_here(f"{what} must be an integer, but got: {value!r}.")
    try:
        value = operator.index(value)
    except TypeError:
        _raise_here(
            f"{what} must be an integer, but got: {value!r} of type '{type(value).__name__}'."
        )
    if not -(2**63) <= value < 2**63:
        _raise_here(f"{what} must fit in 64 bits, but got: {value}.")
    return value


def _checked_bounds(bounds, what, minimum):
    """Validates a (min, opt, max) triple and returns it as a tuple of ints."""
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 3:
        _raise_here(f"{what} must be an int or a (min, opt, max) tuple, but got: {bounds!r}.")
    lo, opt, hi = (_as_int(value, what) for value in bounds)
    if lo < minimum:
        _raise_here(f"{what}: min must be at least {minimum}, but got: ({lo}, {opt}, {hi}).")
    if not lo <= opt <= hi:
        _raise_here(f"{what}: bounds must satisfy min <= opt <= max, but got: ({lo}, {opt}, {hi}).")
    return (lo, opt, hi)


class Bounds:
    """
    Minimum, optimum and maximum values, each a tuple with one entry per dimension (a
    ``tp.DimensionInputInfo``'s value bounds have one entry). ``opt`` is what the compiler tunes for.

    Args:
        min (Sequence[int]): The smallest value of each dimension.
        opt (Sequence[int]): The value to tune for, per dimension.
        max (Sequence[int]): The largest value of each dimension.

    Raises:
        tp.TripyException: never itself; ``tp.InputInfo`` checks the bounds it builds.

    Example::

        import tripy as tp

        bounds = tp.InputInfo(((1, 2, 4), 3), dtype=tp.float32).shape_bounds
        assert (bounds.min, bounds.opt, bounds.max) == ((1, 3), (2, 3), (4, 3))
        assert not bounds.is_static()
        assert tp.Bounds(min=(2,), opt=(2,), max=(2,)).is_static()
    """

    __slots__ = ("min", "opt", "max")

    def __init__(self, min, opt, max):
        self.min, self.opt, self.max = tuple(min), tuple(opt), tuple(max)
        if not len(self.min) == len(self.opt) == len(self.max):
            _raise_here(
                f"Bounds need min, opt and max of one length, but got: {self.min}, {self.opt}, {self.max}."
            )

    def is_static(self):
        """True when min, opt and max agree: nothing about the value is left to run time.

        Returns:
            bool: whether ``min``, ``opt`` and ``max`` are equal.
        """
        return self.min == self.opt == self.max

    def _per_dim(self):
        # (min, opt, max) of each dimension: the form the compiler turns into symbols.
        return list(zip(self.min, self.opt, self.max))

    def __eq__(self, other):
        if not isinstance(other, Bounds):
            return NotImplemented
        return (self.min, self.opt, self.max) == (other.min, other.opt, other.max)

    __hash__ = None

    def __repr__(self):
        return f"Bounds(min={self.min}, opt={self.opt}, max={self.max})"


class NamedDimension:
    """
    A dynamic dimension with a name: every dimension sharing the name, across all inputs of a
    compiled function, has the same size at run time.

    Args:
        name (str): The name; dimensions with the same name are equal at run time.
        min (int): The smallest size.
        opt (int): The size to tune for.
        max (int): The largest size.

    Raises:
        tp.TripyException: if the bounds are not ints with ``0 <= min <= opt <= max``.

    Example::

        import tripy as tp

        batch = tp.NamedDimension("batch", 1, 2, 4)
        a = tp.InputInfo(shape=(batch, 8), dtype=tp.float32)
        b = tp.InputInfo(shape=(batch, 8), dtype=tp.float32)
        assert batch.bounds == (1, 2, 4)
        assert a.dimension_names == {0: "batch"}
        assert a.shape_bounds.min == (1, 8) and a.shape_bounds.max == (4, 8)
    """

    def __init__(self, name, min, opt, max):
        if not isinstance(name, str) or not name:
            _raise_here(f"A NamedDimension's name must be a non-empty string, but got: {name!r}.")
        self.name = name
        self.min, self.opt, self.max = _checked_bounds((min, opt, max), f"NamedDimension '{name}'", 1)

    @property
    def bounds(self):
        """``(min, opt, max)``."""
        return (self.min, self.opt, self.max)

    def __repr__(self):
        return f"NamedDimension({self.name!r}, min={self.min}, opt={self.opt}, max={self.max})"

    def __eq__(self, other):
        if not isinstance(other, NamedDimension):
            return NotImplemented
        return (self.name, self.min, self.opt, self.max) == (other.name, other.min, other.opt, other.max)

    def __hash__(self):
        return hash((self.name, self.min, self.opt, self.max))


class InputInfo:
    """
    Declares a runtime input of ``tp.compile``: its shape, with a (min, opt, max) range for each
    dynamic dimension, and its dtype. A shape entry is an int (a static size), a
    ``(min, opt, max)`` tuple (a dynamic size, tuned for ``opt``) or a ``tp.NamedDimension``.

    ``donate=True`` lends the argument's memory to the executable: a ``tp.update_slice`` of this
    input that nothing else reads is written in place (only the new rows), and when it is returned
    the executable returns the argument itself, so a KV cache is never copied. After a call, the
    argument holds the updated values; it must not share memory with the call's other arguments.

    Args:
        shape (Sequence[int | tuple[int, int, int] | tp.NamedDimension]): One entry per dimension: a
            static size, a ``(min, opt, max)`` range, or a named dimension.
        dtype (tp.dtype): The input's dtype.
        donate (bool): Whether the executable may update the argument in place (see above).

    Raises:
        tp.TripyException: if an entry is not an int, a range with ``0 <= min <= opt <= max`` or a
            ``tp.NamedDimension``, ``dtype`` is not a Tripy dtype, or ``donate`` is not a bool.

    Example::

        import tripy as tp

        info = tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)
        assert repr(info) == "InputInfo(min=[1, 2], opt=[2, 2], max=[4, 2], dtype=float32)"
        assert info.shape_bounds.min == (1, 2)
        assert info.shape_bounds.opt == (2, 2)
        assert info.shape_bounds.max == (4, 2)

        cache = tp.InputInfo((1, 12, 1024, 64), dtype=tp.float16, donate=True)  # updated in place
        assert cache.donate
    """

    def __init__(self, shape, dtype, donate=False):
        if not isinstance(donate, bool):
            _raise_here(f"InputInfo's donate must be True or False, but got: {donate!r}.")
        self.donate = donate
        if not isinstance(shape, (tuple, list)):
            _raise_here(f"InputInfo's shape must be a tuple or list, but got: {shape!r}.")
        self.dtype = dtypes.check_dtype(dtype, "InputInfo's dtype")
        per_dim = []
        self.dimension_names = {}
        """Dimension index -> name, for the dimensions given as ``tp.NamedDimension``."""
        for index, entry in enumerate(shape):
            what = f"Dimension {index} of InputInfo's shape"
            if isinstance(entry, NamedDimension):
                per_dim.append(entry.bounds)
                self.dimension_names[index] = entry.name
            elif isinstance(entry, (tuple, list)):
                per_dim.append(_checked_bounds(entry, what, 1))
            else:
                size = _as_int(entry, what)
                if size < 1:
                    _raise_here(f"{what} must be positive, but got: {size}.")
                per_dim.append((size, size, size))
        self._check_names_agree(per_dim)
        self.shape_bounds = Bounds(*zip(*per_dim)) if per_dim else Bounds((), (), ())
        """The shape's ``tp.Bounds`` (``shape_bounds.min`` is the smallest shape, and so on)."""

    def _check_names_agree(self, per_dim):
        seen = {}
        for index, name in self.dimension_names.items():
            if seen.setdefault(name, per_dim[index]) != per_dim[index]:
                _raise_here(
                    f"NamedDimension '{name}' appears with different bounds: {seen[name]} and {per_dim[index]}."
                )

    @property
    def rank(self):
        """
        The number of dimensions.
        """
        return len(self.shape_bounds.min)

    def __repr__(self):
        # Lists, as the docstring example above shows.
        bounds = self.shape_bounds
        text = f"InputInfo(min={list(bounds.min)}, opt={list(bounds.opt)}, max={list(bounds.max)}, dtype={self.dtype.name}"
        if self.dimension_names:
            text += f", dimension_names={self.dimension_names}"
        if self.donate:
            text += ", donate=True"
        return text + ")"


class DimensionInputInfo:
    """
    Declares a runtime input of ``tp.compile`` that is a scalar shape value (a ``tp.DimensionSize``),
    with the range of values it may take.

    Args:
        value_bounds (tuple[int, int, int]): ``(min, opt, max)`` of the value.

    Raises:
        tp.TripyException: if the bounds are not ints with ``min <= opt <= max``.

    Example::

        import tripy as tp

        info = tp.DimensionInputInfo(value_bounds=(1, 2, 3))
        assert info.value_bounds.min == (1,) and info.value_bounds.max == (3,)
        assert repr(info) == "DimensionInputInfo(min=1, opt=2, max=3)"
    """

    def __init__(self, value_bounds):
        # Shape values may legitimately be 0 (an empty dimension), unlike input dimensions.
        lo, opt, hi = _checked_bounds(value_bounds, "DimensionInputInfo's value_bounds", 0)
        self.value_bounds = Bounds(min=(lo,), opt=(opt,), max=(hi,))
        """The value's ``tp.Bounds``, with one entry each as in nvtripy (``value_bounds.min == (lo,)``)."""

    def __repr__(self):
        (lo, opt, hi), = self.value_bounds._per_dim()
        return f"DimensionInputInfo(min={lo}, opt={opt}, max={hi})"

"""Declarations of ``tp.compile``'s runtime inputs: their shape ranges and dtypes.

These classes only describe and validate; the compiler reads ``shape_bounds``, ``dim_names`` and
``dtype`` from them and turns each dynamic dimension into a symbol.
"""

import operator

from tripy.frontend import dtypes
from tripy.frontend.trace_call import _raise_here


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


class NamedDimension:
    """
    A dynamic dimension with a name: every dimension sharing the name, across all inputs of a
    compiled function, has the same size at run time.

    Example::

        import tripy as tp

        batch = tp.NamedDimension("batch", 1, 2, 4)
        a = tp.InputInfo(shape=(batch, 8), dtype=tp.float32)
        b = tp.InputInfo(shape=(batch, 8), dtype=tp.float32)
        assert a.dim_names == ["batch", None]
        assert a.shape_bounds == [(1, 2, 4), (8, 8, 8)]
    """

    def __init__(self, name, min, opt, max):
        if not isinstance(name, str) or not name:
            _raise_here(f"A NamedDimension's name must be a non-empty string, but got: {name!r}.")
        self.name = name
        self.min, self.opt, self.max = _checked_bounds((min, opt, max), f"NamedDimension '{name}'", 1)

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

    Example::

        import tripy as tp

        info = tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)
        assert repr(info) == "InputInfo(min=[1, 2], opt=[2, 2], max=[4, 2], dtype=float32)"
        assert info.shape_bounds == [(1, 2, 4), (2, 2, 2)]
    """

    def __init__(self, shape, dtype):
        if not isinstance(shape, (tuple, list)):
            _raise_here(f"InputInfo's shape must be a tuple or list, but got: {shape!r}.")
        self.dtype = dtypes.check_dtype(dtype, "InputInfo's dtype")
        self.shape_bounds = []
        self.dim_names = []
        for index, entry in enumerate(shape):
            what = f"Dimension {index} of InputInfo's shape"
            if isinstance(entry, NamedDimension):
                self.shape_bounds.append((entry.min, entry.opt, entry.max))
                self.dim_names.append(entry.name)
                continue
            if isinstance(entry, (tuple, list)):
                self.shape_bounds.append(_checked_bounds(entry, what, 1))
            else:
                size = _as_int(entry, what)
                if size < 1:
                    _raise_here(f"{what} must be positive, but got: {size}.")
                self.shape_bounds.append((size, size, size))
            self.dim_names.append(None)
        self._check_names_agree()

    def _check_names_agree(self):
        seen = {}
        for bounds, name in zip(self.shape_bounds, self.dim_names):
            if name is not None and seen.setdefault(name, bounds) != bounds:
                _raise_here(
                    f"NamedDimension '{name}' appears with different bounds: {seen[name]} and {bounds}."
                )

    @property
    def rank(self):
        return len(self.shape_bounds)

    @property
    def min(self):
        return [lo for lo, _, _ in self.shape_bounds]

    @property
    def opt(self):
        return [opt for _, opt, _ in self.shape_bounds]

    @property
    def max(self):
        return [hi for _, _, hi in self.shape_bounds]

    def __repr__(self):
        text = f"InputInfo(min={self.min}, opt={self.opt}, max={self.max}, dtype={self.dtype.name}"
        names = {index: name for index, name in enumerate(self.dim_names) if name is not None}
        if names:
            text += f", dim_names={names}"
        return text + ")"


class DimensionInputInfo:
    """
    Declares a runtime input of ``tp.compile`` that is a scalar shape value (a ``tp.DimensionSize``),
    with the range of values it may take.

    Example::

        import tripy as tp

        info = tp.DimensionInputInfo(value_bounds=(1, 2, 3))
        assert info.value_bounds == (1, 2, 3)
        assert repr(info) == "DimensionInputInfo(min=1, opt=2, max=3)"
    """

    def __init__(self, value_bounds):
        # Shape values may legitimately be 0 (an empty dimension), unlike input dimensions.
        self.value_bounds = _checked_bounds(value_bounds, "DimensionInputInfo's value_bounds", 0)

    def __repr__(self):
        lo, opt, hi = self.value_bounds
        return f"DimensionInputInfo(min={lo}, opt={opt}, max={hi})"

"""Creation ops: ones, zeros, full, iota, arange and their ``*_like`` forms, tril/triu."""

import math
import operator
import numbers

from tripy.frontend import dtypes
from tripy.frontend.device import default_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.elementwise import maximum, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import _sizes, expand, reshape
from tripy.frontend.tensor import DimensionSize, Tensor
from tripy.frontend.trace_call import literal, make


def _shape(shape):
    return _sizes(shape, "a shape")


def full(shape, value, dtype=dtypes.float32):
    """
    A tensor of ``shape`` filled with ``value``: a number, or a scalar tensor (whose value may be
    known only at run time, inside ``tp.compile``).

    Args:
        shape (Sequence[int | tp.DimensionSize]): The shape; entries may be ``tp.DimensionSize``
        values (sizes known at run time inside ``tp.compile``).
        value (number | tp.Tensor): The value of every element: a number, or a scalar tensor.
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: a tensor of ``shape`` and ``dtype``.

    Raises:
        tp.TripyException: if a size is negative, ``dtype`` is not a Tripy dtype, or ``value``
            does not fit ``dtype`` (a float for an integer dtype).

    Example::

        import tripy as tp

        assert tp.full((2, 2), 3.0).tolist() == [[3.0, 3.0], [3.0, 3.0]]
        assert tp.full((2,), value=tp.Tensor(4.0)).tolist() == [4.0, 4.0]
    """
    dtypes.check_dtype(dtype)
    if isinstance(value, Tensor):
        return _full_from_tensor(shape, value, dtype)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _raise_here(f"full: the value must be a number or a tensor, but got: {value!r}.")
    if issubclass(dtype, dtypes.integer) and not float(value).is_integer():
        _raise_here(f"full: the value {value!r} is not an integer, so a tensor of dtype {dtype.name} cannot hold it.")
    return literal(value, dtype, _shape(shape), str(default_device()))


def _full_from_tensor(shape, value, dtype):
    if value.rank != 0 and tuple(value.shape) != (1,):
        _raise_here(f"full's value must be a number or a scalar tensor, but got a tensor of shape {value.shape}.")
    sizes = _shape(shape)
    # A scalar broadcast to the shape: the fill value is an operand, not a constant attribute.
    value = reshape(cast(value, dtype), (1,) * len(sizes))
    return expand(value, sizes) if sizes else reshape(value, ())


def ones(shape, dtype=dtypes.float32):
    """
    A tensor of ones.

    Args:
        shape (Sequence[int | tp.DimensionSize]): The shape; entries may be ``tp.DimensionSize``
        values (sizes known at run time inside ``tp.compile``).
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: ones of ``shape`` and ``dtype``.

    Raises:
        tp.TripyException: if a size is negative or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.ones((1, 2)).tolist() == [[1.0, 1.0]]
    """
    return full(shape, 1, dtype)


def zeros(shape, dtype=dtypes.float32):
    """
    A tensor of zeros.

    Args:
        shape (Sequence[int | tp.DimensionSize]): The shape; entries may be ``tp.DimensionSize``
        values (sizes known at run time inside ``tp.compile``).
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: zeros of ``shape`` and ``dtype``.

    Raises:
        tp.TripyException: if a size is negative or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.zeros((2,), dtype=tp.int32).tolist() == [0, 0]
    """
    return full(shape, 0, dtype)


def full_like(input, value, dtype=None):
    """
    A tensor shaped like ``input``, filled with ``value``.

    Args:
        input (tp.Tensor): The tensor whose shape (and, by default, dtype and device) to use.
        value (number | tp.Tensor): The value of every element.
        dtype (tp.dtype | None): The dtype of the result; ``input``'s when None.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype, or ``value`` does not fit it.

    Example::

        import tripy as tp

        assert tp.full_like(tp.ones((2,)), 5.0).tolist() == [5.0, 5.0]
    """
    return full(input.shape, value, dtype or input.dtype)


def ones_like(input, dtype=None):
    """
    Ones shaped like ``input``.

    Args:
        input (tp.Tensor): The tensor whose shape (and, by default, dtype) to use.
        dtype (tp.dtype | None): The dtype of the result; ``input``'s when None.

    Returns:
        tp.Tensor: ones of ``input``'s shape.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.ones_like(tp.zeros((1, 2))).tolist() == [[1.0, 1.0]]
    """
    return full_like(input, 1, dtype)


def zeros_like(input, dtype=None):
    """
    Zeros shaped like ``input``.

    Args:
        input (tp.Tensor): The tensor whose shape (and, by default, dtype) to use.
        dtype (tp.dtype | None): The dtype of the result; ``input``'s when None.

    Returns:
        tp.Tensor: zeros of ``input``'s shape.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.zeros_like(tp.ones((2,))).tolist() == [0.0, 0.0]
    """
    return full_like(input, 0, dtype)


def iota(shape, dim=0, dtype=dtypes.float32):
    """
    A tensor whose values count up along ``dim``.

    Args:
        shape (Sequence[int | tp.DimensionSize]): The shape; entries may be ``tp.DimensionSize``
        values (sizes known at run time inside ``tp.compile``).
        dim (int): The dim along which values count up (negative counts from the end).
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: a tensor of ``shape`` whose element at index ``i`` along ``dim`` is ``i``.

    Raises:
        tp.TripyException: if ``dim`` is out of range or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.iota((2, 3), dim=1).tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
    """
    dtypes.check_dtype(dtype)
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        _raise_here(f"iota: dim must be an int, but got: {dim!r}.")
    return make("iota", [], shape=_shape(shape), axis=operator.index(dim), dtype=dtype.name, device=str(default_device()))


def iota_like(input, dim=0, dtype=None):
    """
    ``iota`` shaped like ``input``.

    Args:
        input (tp.Tensor): The tensor whose shape (and, by default, dtype) to use.
        dim (int): The dim along which values count up.
        dtype (tp.dtype | None): The dtype of the result; ``input``'s when None.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape counting up along ``dim``.

    Raises:
        tp.TripyException: if ``dim`` is out of range or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        assert tp.iota_like(tp.ones((3,))).tolist() == [0.0, 1.0, 2.0]
    """
    return iota(input.shape, dim, dtype or input.dtype)


def arange(start, stop=None, step=1, dtype=dtypes.float32):
    """
    Values from ``start`` (inclusive) to ``stop`` (exclusive) in steps of ``step``;
    ``arange(stop)`` and ``arange(stop, dtype)`` start at 0.

    Args:
        start (number): The first value; with ``stop`` omitted, the end instead (starting at 0).
        stop (number | None): The end (exclusive).
        step (number): The difference between consecutive values (not 0; negative counts down).
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: a 1-D tensor of ``ceil((stop - start) / step)`` values (none if that is negative).

    Raises:
        tp.TripyException: if ``step`` is 0, or a value does not fit ``dtype``.

    Example::

        import tripy as tp

        assert tp.arange(4).tolist() == [0.0, 1.0, 2.0, 3.0]
        assert tp.arange(3, tp.int32).tolist() == [0, 1, 2]
        assert tp.arange(1, 7, 2, dtype=tp.int32).tolist() == [1, 3, 5]
    """
    if isinstance(stop, type) and issubclass(stop, dtypes.dtype):
        # nvtripy's overload arange(stop, dtype): a dtype in the second place is never a bound.
        if step != 1:
            _raise_here("arange(stop, dtype) takes no step; use arange(start, stop, step, dtype).")
        start, stop, dtype = 0, start, stop
    elif stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if not isinstance(v, DimensionSize) and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)):
            _raise_here(f"arange: {name} must be a finite number, but got: {v!r}.")
    if isinstance(step, DimensionSize) or step == 0:
        _raise_here(f"arange: step must be a nonzero number, but got: {step!r}.")
    if isinstance(start, DimensionSize) or isinstance(stop, DimensionSize):
        return _arange_of_sizes(start, stop, step, dtype)
    n = _arange_length(start, stop, step)
    if issubclass(dtype, dtypes.integer) and n > 0:
        # Checked here, where the bounds are known: the iota and its arithmetic would wrap.
        lo, hi = _int_range(dtype)
        last = start + (n - 1) * step
        if not (lo <= start <= hi and lo <= last <= hi):
            _raise_here(f"arange: the values {start} to {last} are out of range for {dtype.name} ({lo} to {hi}).")
    values = iota((n,), 0, dtype)
    if step != 1 and n > 1:
        values = values * step
    if start != 0:
        values = values + start
    return values


def _arange_length(start, stop, step):
    """ceil((stop - start) / step), exact for ints of any size (a float quotient rounds past 2**53)."""
    if all(isinstance(v, numbers.Integral) for v in (start, stop, step)):
        start, stop, step = operator.index(start), operator.index(stop), operator.index(step)
        return max(0, -((start - stop) // step))
    return max(0, math.ceil((stop - start) / step))


def _int_range(dtype):
    """The values an integer dtype holds."""
    if dtype is dtypes.int4:
        return -8, 7
    bits = 8 * dtype.itemsize
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _arange_of_sizes(start, stop, step, dtype):
    """arange whose bounds are DimensionSizes: the length is a size expression, so under
    ``tp.compile`` it follows the inputs (``arange(x.shape[0])``)."""
    if not isinstance(step, int):
        _raise_here(f"arange: with DimensionSize bounds the step must be an int, but got: {step!r}.")
    # ceil((stop - start) / step), written with floor division so it stays a size expression.
    n = maximum(0 - ((start - stop) // step), 0)
    values = iota((n,), 0, dtype)
    if step != 1:
        values = values * step
    if isinstance(start, int):
        return values + start if start != 0 else values
    return values + cast(start, dtype)


def _triangle(input, diagonal, lower):
    if input.rank < 2:
        _raise_here(f"{'tril' if lower else 'triu'} needs a tensor of rank >= 2, got rank {input.rank}.")
    rows = iota(input.shape[-2:], 0, dtypes.int32)
    cols = iota(input.shape[-2:], 1, dtypes.int32)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return where(keep, input, zeros_like(input))


def tril(tensor, diagonal=0):
    """
    Keeps the lower triangle (``col - row <= diagonal``) of the last two dims; zeros elsewhere.

    Args:
        tensor (tp.Tensor): A tensor of rank >= 2.
        diagonal (int): Which diagonal bounds the triangle: 0 the main one, positive above it,
            negative below.

    Returns:
        tp.Tensor: ``tensor`` with the elements above the triangle zeroed.

    Raises:
        tp.TripyException: if ``tensor`` has rank < 2.

    Example::

        import tripy as tp

        assert tp.tril(tp.ones((2, 2))).tolist() == [[1.0, 0.0], [1.0, 1.0]]
    """
    return _triangle(tensor, diagonal, True)


def triu(tensor, diagonal=0):
    """
    Keeps the upper triangle (``col - row >= diagonal``) of the last two dims; zeros elsewhere.

    Args:
        tensor (tp.Tensor): A tensor of rank >= 2.
        diagonal (int): Which diagonal bounds the triangle: 0 the main one, positive above it,
            negative below.

    Returns:
        tp.Tensor: ``tensor`` with the elements below the triangle zeroed.

    Raises:
        tp.TripyException: if ``tensor`` has rank < 2.

    Example::

        import tripy as tp

        assert tp.triu(tp.ones((2, 2))).tolist() == [[1.0, 1.0], [0.0, 1.0]]
    """
    return _triangle(tensor, diagonal, False)

"""Type and device conversions, and comparisons that answer with a Python bool."""

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.device import device as _device
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.reduce import all as all_
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make
from tripy.utils.stack_info import capture_user_frames


def cast(input, dtype):
    """
    Converts to ``dtype`` (float to int truncates; to bool tests != 0).

    Args:
        input (tp.Tensor): The tensor to convert.
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: ``input``'s values in ``dtype`` (``input`` itself when it already has it).

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype or the conversion is not supported.

    Example::

        import tripy as tp

        assert tp.cast(tp.Tensor([1.7, -1.7]), tp.int32).tolist() == [1, -1]
    """
    dtypes.check_dtype(dtype)
    return make("cast", [input], dtype=dtype.name)


def copy(input, device):
    """
    A copy of ``input`` on ``device`` (``"cpu"`` or ``"gpu"``).

    Args:
        input (tp.Tensor): The tensor to copy.
        device (tp.device | str): Where the copy goes (``tp.device("gpu")``, ``"cpu"``, ...).

    Returns:
        tp.Tensor: a tensor with ``input``'s values on ``device``.

    Raises:
        tp.TripyException: if ``device`` is not a device this machine has.

    Example::

        import tripy as tp

        assert tp.copy(tp.Tensor([1.0]), tp.device("cpu")).device == tp.device("cpu")
    """
    return Tensor._wrap(_C.copy(input._node, str(_device(device)), capture_user_frames()))


def equal(input, other):
    """
    True when ``input`` and ``other`` have the same shape and the same values.

    Args:
        input (tp.Tensor): The first tensor.
        other (tp.Tensor): The second tensor, of ``input``'s dtype.

    Returns:
        bool: whether shapes and values agree (evaluates both tensors).

    Raises:
        tp.TripyException: if the dtypes differ.

    Example::

        import tripy as tp

        assert tp.equal(tp.ones((2,)), tp.Tensor([1.0, 1.0]))
    """
    if input.shape != other.shape:
        return False
    return bool(all_(input == other))


def allclose(input, other, rtol=1e-5, atol=1e-8):
    """
    True when ``|input - other| <= atol + rtol * |other|`` everywhere, as ``numpy.allclose``
    decides it: infinities are close only to the same infinity, NaN to nothing. Integer tensors are
    compared as float32.

    Args:
        input (tp.Tensor): The tensor to check.
        other (tp.Tensor): The reference, of ``input``'s dtype and a shape that broadcasts with it.
        rtol (float): The tolerance relative to ``|other|``.
        atol (float): The absolute tolerance.

    Returns:
        bool: whether every element is within tolerance (evaluates both tensors).

    Raises:
        tp.TripyException: if the dtypes differ or the shapes do not broadcast.

    Example::

        import tripy as tp

        assert tp.allclose(tp.Tensor([1.0]), tp.Tensor([1.0 + 1e-7]))
        assert not tp.allclose(tp.Tensor([float("inf")]), tp.Tensor([float("-inf")]))
    """
    if not issubclass(input.dtype, dtypes.floating):
        input = cast(input, dtypes.float32)
    if not issubclass(other.dtype, dtypes.floating):
        other = cast(other, dtypes.float32)
    # x - x is 0 exactly for finite x, NaN for inf and NaN: where either side is not finite, the
    # tolerance (inf <= inf) would say yes, so equality decides.
    finite = ((input - input) == 0) & ((other - other) == 0)
    close = abs(input - other) <= atol + rtol * abs(other)
    return bool(all_(where(finite, close, input == other)))

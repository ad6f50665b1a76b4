"""The one path from Python ops to a Trace op: the C++ core captures the user's frames, checks and builds.

It sits just above the tensor module: every op builds through ``make`` and gets a tensor back.
"""

import builtins
import numbers
import operator

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor


def make(op, inputs, **attrs):
    """Builds the Trace op ``op`` on tensors ``inputs``; rules and errors come from the C++ core,
    which also captures the user's frames and makes the result tensor (one call per op)."""
    return _C.tensor_op(op, inputs, attrs)


def fill_attrs(value, dtype):
    """The attribute a literal of ``dtype`` travels in: ``fill_int`` for integer dtypes (exact: a
    double would round int64s past 2**53; the core rejects one the dtype cannot hold), ``fill``
    for the rest. A float for an integer dtype must already be integral."""
    if issubclass(dtype, dtypes.integer):
        value = int(value) if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) else operator.index(value)
        if not -(2**63) <= value < 2**63:
            # Beyond what the binding carries; within it, the core checks the dtype's own range.
            _raise_here(f"The integer {value} is out of range for {dtype.name}.")
        return {"fill_int": value}
    try:
        return {"fill": float(value)}
    except OverflowError:
        _raise_here(f"The integer {value} is too large to convert to {dtype.name}.")


def literal(value, dtype, shape, device):
    """A ``full`` node of ``value`` (a number) with ``shape`` on ``device``."""
    return make("full", [], shape=shape, dtype=dtype.name, device=device, **fill_attrs(value, dtype))


def scalar_like(value, like):
    """A Python (or numpy) number as a rank-0 tensor of ``like``'s dtype, refusing lossy
    conversions: a float for an integer tensor, an integer outside the tensor's dtype."""
    if isinstance(value, Tensor):
        return value
    if not isinstance(value, numbers.Real) and (hasattr(value, "__array__") or hasattr(value, "__dlpack__")):
        # numpy defers to Tensor (its __array_priority__), so `array + t` and `t + array` both land here.
        _raise_here(
            f"Cannot combine a tripy.Tensor with an object of type '{type(value).__name__}': Tripy does not convert "
            "arrays implicitly. Make it a tensor first with tp.Tensor(array) (Tripy has no float64: convert such an "
            "array with array.astype(np.float32) first), or read the tensor into numpy with np.asarray(t)."
        )
    if not isinstance(value, numbers.Real):
        _raise_here(
            f"Expected a tripy.Tensor or a Python number, but got an object of type '{type(value).__name__}'."
        )
    dt = like.dtype
    if not isinstance(value, (builtins.bool, numbers.Integral)) and not issubclass(dt, dtypes.floating):
        _raise_here(
            f"Cannot use the float literal {value} with a tensor of dtype {dt.name}: "
            f"the conversion would lose information. Use an integer literal or tp.cast the tensor."
        )
    return literal(value, dt, [], like._node.device)

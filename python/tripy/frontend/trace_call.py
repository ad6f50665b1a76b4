"""The one path from Python ops to a Trace op: capture the user's frames, let C++ check and build.

It sits just above the tensor module: every op builds through ``make`` and gets a tensor back.
"""

import builtins

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.tensor import Tensor
from tripy.utils.stack_info import capture_user_frames


def make(op, inputs, **attrs):
    """Builds the Trace op ``op`` on tensors ``inputs``; rules and errors come from the C++ core."""
    try:
        nodes = [t._node for t in inputs]
    except AttributeError:
        wrong = next(t for t in inputs if not isinstance(t, Tensor))
        _raise_here(f"Expected a tripy.Tensor as an input of {op}, but got an object of type '{type(wrong).__name__}'.")
    return Tensor._wrap(_C.make(op, nodes, attrs, capture_user_frames()))


def scalar_like(value, like):
    """A Python number as a rank-0 tensor of ``like``'s dtype, refusing lossy conversions."""
    if isinstance(value, Tensor):
        return value
    if not isinstance(value, (builtins.bool, int, float)):
        _raise_here(
            f"Expected a tripy.Tensor or a Python number, but got an object of type '{type(value).__name__}'."
        )
    dt = like.dtype
    if isinstance(value, float) and not issubclass(dt, dtypes.floating):
        _raise_here(
            f"Cannot use the float literal {value} with a tensor of dtype {dt.name}: "
            f"the conversion would lose information. Use an integer literal or tp.cast the tensor."
        )
    return make("full", [], shape=[], fill=float(value), dtype=dt.name, device=like._node.device)

"""The methods of ``tp.Tensor`` that are ops: ``x + y``, ``x[i]``, ``x.reshape(...)`` and the rest.

The ops build on the tensor module (they take and return tensors), so it cannot import them;
instead this module binds these methods to the class when the ops package is imported. Each is a
thin call into the op that does the work, as the function form (``tp.reshape(x, ...)``) is.
"""

from tripy import _C
from tripy.frontend.ops import indexing, misc, shape_ops
from tripy.frontend.printing import summary_slices
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make, scalar_like


def cast(self, dtype):
    """
    ``t.cast(dtype)`` is ``tp.cast(t, dtype)``.

    Args:
        dtype (tp.dtype): The dtype of the result.

    Returns:
        tp.Tensor: the values in ``dtype``.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype or the conversion is not supported.
    """
    return misc.cast(self, dtype)


def copy(self, device):
    """
    ``t.copy(device)`` is ``tp.copy(t, device)``.

    Args:
        device (tp.device | str): Where the copy goes.

    Returns:
        tp.Tensor: a copy on ``device``.

    Raises:
        tp.TripyException: if ``device`` is not a device this machine has.
    """
    return misc.copy(self, device)


def reshape(self, shape):
    """
    ``t.reshape(shape)`` is ``tp.reshape(t, shape)``.

    Args:
        shape (Sequence[int | tp.DimensionSize]): The new shape; one entry may be -1.

    Returns:
        tp.Tensor: the same elements in ``shape``.

    Raises:
        tp.TripyException: if the element counts differ.
    """
    return shape_ops.reshape(self, shape)


def transpose(self, dim0, dim1):
    """
    ``t.transpose(dim0, dim1)`` is ``tp.transpose(t, dim0, dim1)``.

    Args:
        dim0 (int): One dim.
        dim1 (int): The other dim.

    Returns:
        tp.Tensor: the tensor with the two dims swapped.

    Raises:
        tp.TripyException: if a dim is out of range.
    """
    return shape_ops.transpose(self, dim0, dim1)


def permute(self, perm):
    """
    ``t.permute(perm)`` is ``tp.permute(t, perm)``.

    Args:
        perm (Sequence[int]): A permutation of the dims.

    Returns:
        tp.Tensor: the permuted tensor.

    Raises:
        tp.TripyException: if ``perm`` is not a permutation of the dims.
    """
    return shape_ops.permute(self, perm)


def flatten(self, start_dim=0, end_dim=-1):
    """
    ``t.flatten(start_dim=0, end_dim=-1)`` is ``tp.flatten(t, start_dim=0, end_dim=-1)``.

    Args:
        start_dim (int): The first dim to merge.
        end_dim (int): The last dim to merge.

    Returns:
        tp.Tensor: the tensor with those dims merged.

    Raises:
        tp.TripyException: if a dim is out of range.
    """
    return shape_ops.flatten(self, start_dim, end_dim)


def squeeze(self, dims):
    """
    ``t.squeeze(dims)`` is ``tp.squeeze(t, dims)``.

    Args:
        dims (int | Sequence[int]): The dims of size 1 to remove.

    Returns:
        tp.Tensor: the tensor without those dims.

    Raises:
        tp.TripyException: if a dim is out of range or its size is not 1.
    """
    return shape_ops.squeeze(self, dims)


def unsqueeze(self, dim):
    """
    ``t.unsqueeze(dim)`` is ``tp.unsqueeze(t, dim)``.

    Args:
        dim (int): Where the new dim of size 1 goes.

    Returns:
        tp.Tensor: the tensor with one more dim.

    Raises:
        tp.TripyException: if ``dim`` is out of range.
    """
    return shape_ops.unsqueeze(self, dim)


def __getitem__(self, index):
    return indexing.getitem(self, index)


def _printed_values(self):
    """The values a print shows: for long axes only the edges, sliced before leaving the device
    (printing a large tensor must not convert all of it to Python lists)."""
    edges = self
    for axis, ranges in enumerate(summary_slices(self.shape)):
        if len(ranges) > 1:
            edges = shape_ops.concatenate([shape_ops.slice_dim(edges, axis, lo, hi) for lo, hi in ranges], axis)
    return edges.tolist()


def _binary(name, op, reflected=False):
    """The operator method ``name`` for the binary Trace op ``op``; a Python number operand takes
    the tensor's dtype (``scalar_like``). ``reflected`` is for ``__radd__`` and friends: the tensor
    is on the right. A method of the core: the operators are eager mode's hottest path."""
    return _C._binary_method(Tensor, name, op, reflected, scalar_like)


def __matmul__(self, o):
    return make("matmul", [self, o])


def __rmatmul__(self, o):
    return make("matmul", [o, self])


def __neg__(self):
    return make("neg", [self])


def __abs__(self):
    return make("abs", [self])


def __invert__(self):
    return make("logical_not", [self])


# Python's operator -> the Trace op it builds; each has a reflected form (__radd__).
_BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "div",
    "floordiv": "floor_div",
    "mod": "mod",
    "pow": "pow",
    "and": "logical_and",
    "or": "logical_or",
}
# Comparisons build the op of their own name and have no reflected form: Python swaps them.
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")

METHODS = {
    "cast": cast,
    "copy": copy,
    "reshape": reshape,
    "transpose": transpose,
    "permute": permute,
    "flatten": flatten,
    "squeeze": squeeze,
    "unsqueeze": unsqueeze,
    "__getitem__": __getitem__,
    "_printed_values": _printed_values,
    "__matmul__": __matmul__,
    "__rmatmul__": __rmatmul__,
    "__neg__": __neg__,
    "__abs__": __abs__,
    "__invert__": __invert__,
}
# The core's methods, made under their names.
CORE_METHODS = {
    **{f"__{name}__": _binary(f"__{name}__", op) for name, op in _BINARY.items()},
    **{f"__r{name}__": _binary(f"__r{name}__", op, reflected=True) for name, op in _BINARY.items()},
    **{f"__{op}__": _binary(f"__{op}__", op) for op in _COMPARISONS},
}


def _bind():
    for name, method in METHODS.items():
        # Named as if defined in the class, as tracebacks and help() show them.
        method.__name__, method.__qualname__ = name, f"Tensor.{name}"
        setattr(Tensor, name, method)
    for name, method in CORE_METHODS.items():
        setattr(Tensor, name, method)


_bind()

"""``tp.Tensor``: a lazy handle on a Trace node. Operators build ops; using a value evaluates it."""

import builtins

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.device import device as _device, resolve as _resolve_device
from tripy.frontend.printing import format_tensor
from tripy.frontend.trace_call import _raise_here, make, scalar_like
from tripy.utils.stack_info import capture_user_frames
from tripy.utils.suggest import missing_attribute

_METHODS = ("eval", "tolist", "cast", "copy", "reshape", "transpose", "permute", "flatten", "squeeze", "unsqueeze")


class Tensor:
    """
    A tensor: data, or the lazily evaluated result of ops.

    Args:
        data: A number, a nested list/tuple of numbers, or an object with ``__dlpack__``
            (numpy, torch, cupy, ...). Its values are copied (on its device), so writing to
            ``data`` afterwards never changes the tensor or the lazy ops built on it.
        dtype: The data type; inferred from ``data`` when omitted.
        device: Where the data lives; the default device when omitted.
        name: An optional name.

    Example::

        import tripy as tp

        t = tp.Tensor([[1.0, 2.0], [3.0, 4.0]])
        assert t.shape == (2, 2) and t.dtype == tp.float32
        assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    """

    __slots__ = ("_node", "name", "__weakref__")

    def __init__(self, data, dtype=None, device=None, name=None):
        frames = capture_user_frames()
        if dtype is not None:
            dtypes.check_dtype(dtype)
        target = _resolve_device(device)
        if type(data).__module__ == "numpy" and not hasattr(data, "__dlpack__"):
            # numpy scalars (np.float32(0.5), an array's .squeeze() of one element) as 0-d arrays.
            import numpy as np

            data = np.asarray(data)
        if isinstance(data, Tensor):
            node = data._node
        elif hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
            try:
                node = _C.from_dlpack(data, frames)
            except BufferError:
                # Older exporters (numpy < 1.25) cannot export bool through DLPack.
                if not hasattr(data, "tolist"):
                    raise
                node = _C.from_list(data.tolist(), None if dtype is None else dtype.name, str(target), frames)
                if data.size == 0 and tuple(node.shape) != tuple(data.shape):
                    # An empty list keeps no trailing dims: (0, 3) would come back as (0,).
                    from tripy.frontend.ops.shape_ops import reshape

                    node = reshape(Tensor._wrap(node), tuple(data.shape))._node
        else:
            node = _C.from_list(data, None if dtype is None else dtype.name, str(target), frames)
        self._node = node
        self.name = name
        if dtype is not None and self._node.dtype != dtype.name:
            self._node = make("cast", [self], dtype=dtype.name)._node
        # Data lands on the requested (or default) device: zero-copy when it is already there.
        if self._node.device != str(target):
            self._node = _C.copy(self._node, str(target), frames)

    @classmethod
    def _wrap(cls, node):
        t = object.__new__(DimensionSize if node.is_size and cls is Tensor else cls)
        t._node = node
        t.name = None
        return t

    # --- metadata ------------------------------------------------------------------------------
    @property
    def shape(self):
        """The shape: ints for static dims; inside ``tp.compile``, a ``tp.DimensionSize`` for each
        dynamic dim (arithmetic on it stays symbolic)."""
        dims = self._node.shape
        if all(isinstance(d, int) for d in dims):
            return tuple(dims)
        return tuple(d if isinstance(d, int) else make("shape_dim", [self], axis=i) for i, d in enumerate(dims))

    @property
    def dtype(self):
        return dtypes.from_name(self._node.dtype)

    @property
    def rank(self):
        return self._node.rank

    ndim = rank

    @property
    def device(self):
        return _device(self._node.device)

    # --- evaluation ----------------------------------------------------------------------------
    def eval(self):
        """Evaluates the tensor now (compiling what it needs) and returns it."""
        _C.evaluate(self._node)
        return self

    def tolist(self):
        """The values as (nested) Python lists; a number for a rank-0 tensor."""
        return _C.tolist(self._node)

    def __dlpack__(self, stream=None, **kwargs):
        return _C.to_dlpack(self._node)

    def __dlpack_device__(self):
        return _C.dlpack_device(self._node)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(t)``: the values as a numpy array (copied to the host first when they live
        on the GPU), so numpy functions accept Tripy tensors directly."""
        import numpy as np

        host = self if self._node.device == "cpu" else Tensor._wrap(_C.copy(self._node, "cpu", capture_user_frames()))
        try:
            array = np.from_dlpack(host)
        except (BufferError, TypeError, RuntimeError):  # numpy < 1.25 exports no bool through DLPack
            array = np.array(host.tolist(), dtype=np.bool_ if self.dtype.name == "bool" else None)
        return array.astype(dtype, copy=False) if dtype is not None else array

    def __bool__(self):
        values = self.tolist()
        while isinstance(values, list):
            if len(values) != 1:
                _raise_here(
                    f"The truth value of a tensor with shape {self.shape} is ambiguous: only single-element tensors convert to bool."
                )
            values = values[0]
        return builtins.bool(values)

    def __repr__(self):
        if self._node.is_input:
            return f"tensor(<runtime input>, dtype={self.dtype.name}, shape={self.shape})"
        return format_tensor(self._printed_values(), self.dtype.name, self.shape, str(self.device))

    def _printed_values(self):
        """The values a print shows: for long axes only the edges, sliced before leaving the device
        (printing a large tensor must not convert all of it to Python lists)."""
        from tripy.frontend.ops.shape_ops import concatenate, slice_dim
        from tripy.frontend.printing import summary_slices

        edges = self
        for axis, ranges in enumerate(summary_slices(self.shape)):
            if len(ranges) > 1:
                edges = concatenate([slice_dim(edges, axis, lo, hi) for lo, hi in ranges], axis)
        return edges.tolist()

    __str__ = __repr__

    def __iter__(self):
        raise TypeError("tripy.Tensor is not iterable; use tp.split or indexing.")

    __hash__ = object.__hash__

    def __getattr__(self, attr):
        import tripy

        raise missing_attribute("tripy.Tensor", attr, dir(tripy), own_names=dir(type(self)))

    # --- methods (the short list API.md allows) -------------------------------------------------
    def cast(self, dtype):
        from tripy.frontend.ops import misc

        return misc.cast(self, dtype)

    def copy(self, device):
        from tripy.frontend.ops import misc

        return misc.copy(self, device)

    def reshape(self, shape):
        from tripy.frontend.ops import shape_ops

        return shape_ops.reshape(self, shape)

    def transpose(self, dim0, dim1):
        from tripy.frontend.ops import shape_ops

        return shape_ops.transpose(self, dim0, dim1)

    def permute(self, perm):
        from tripy.frontend.ops import shape_ops

        return shape_ops.permute(self, perm)

    def flatten(self, start_dim=0, end_dim=-1):
        from tripy.frontend.ops import shape_ops

        return shape_ops.flatten(self, start_dim, end_dim)

    def squeeze(self, dims):
        from tripy.frontend.ops import shape_ops

        return shape_ops.squeeze(self, dims)

    def unsqueeze(self, dim):
        from tripy.frontend.ops import shape_ops

        return shape_ops.unsqueeze(self, dim)

    def __getitem__(self, index):
        from tripy.frontend.ops import indexing

        return indexing.getitem(self, index)

    # --- operators -----------------------------------------------------------------------------
    def _binary(self, op, other, reflected=False):
        other = scalar_like(other, self)
        return make(op, [other, self] if reflected else [self, other])

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, True)
    def __floordiv__(self, o): return self._binary("floor_div", o)
    def __rfloordiv__(self, o): return self._binary("floor_div", o, True)
    def __mod__(self, o): return self._binary("mod", o)
    def __rmod__(self, o): return self._binary("mod", o, True)
    def __pow__(self, o): return self._binary("pow", o)
    def __rpow__(self, o): return self._binary("pow", o, True)
    def __lt__(self, o): return self._binary("lt", o)
    def __le__(self, o): return self._binary("le", o)
    def __gt__(self, o): return self._binary("gt", o)
    def __ge__(self, o): return self._binary("ge", o)
    def __eq__(self, o): return self._binary("eq", o)
    def __ne__(self, o): return self._binary("ne", o)
    def __and__(self, o): return self._binary("logical_and", o)
    def __rand__(self, o): return self._binary("logical_and", o, True)
    def __or__(self, o): return self._binary("logical_or", o)
    def __ror__(self, o): return self._binary("logical_or", o, True)

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


class DimensionSize(Tensor):
    """
    A scalar int32 tensor that stands for a size. Inside ``tp.compile`` the sizes of dynamic dims
    are DimensionSizes; arithmetic on them (``+ - * //``, ``tp.maximum``/``tp.minimum``, with ints
    too) gives DimensionSizes whose values stay symbolic, so shapes built from them follow the input
    at run time. Outside ``compile`` a DimensionSize is an ordinary value: ``int(d)`` reads it and
    printing shows the number. Static sizes (``tp.ones((2, 3)).shape``) are plain ints.

    Args:
        data: The size, an int.
        name: An optional name.

    Example::

        import tripy as tp

        def flatten_rows(x):
            return tp.reshape(x, (x.shape[0] * 2, -1))

        f = tp.compile(flatten_rows, args=[tp.InputInfo(((1, 2, 4), 2, 3), dtype=tp.float32)])
        assert f(tp.ones((3, 2, 3))).shape == (6, 3)

        size = tp.DimensionSize(4, name="rows")
        doubled = (size * 2 - 1).eval()
        assert isinstance(doubled, tp.DimensionSize) and int(doubled) == 7 and str(doubled) == "7"
    """

    __slots__ = ()

    def __init__(self, data, name=None):
        import operator

        if isinstance(data, builtins.bool):
            _raise_here(f"A DimensionSize must be an int, but got: {data!r}.")
        try:
            value = operator.index(data)
        except TypeError:
            _raise_here(
                f"A DimensionSize must be an int, but got: {data!r} of type '{type(data).__name__}'."
            )
        # A 'full' literal carries its value as a size, so arithmetic on it stays size arithmetic.
        self._node = make("full", [], shape=[], value=float(value), dtype="int32", device=str(_resolve_device(None)))._node
        self.name = name

    def __int__(self):
        return int(self.tolist())

    __index__ = __int__

    def __repr__(self):
        if self._node.is_input:
            return super().__repr__()
        return str(int(self))

    __str__ = __repr__

"""``tp.Tensor``: a lazy handle on a Trace node. Operators build ops; using a value evaluates it.

The ops build on this module (they take and return tensors), so it imports none of them: the
methods that are ops (``x + y``, ``x[i]``, ``x.reshape(...)``) are bound to the class by
``tripy.frontend.ops.tensor_methods`` when the ops package is imported. The few nodes a tensor
makes for itself (a cast or reshape of its data, the size of a dynamic dim) it asks the core for
directly.
"""

import builtins
import operator
import os

from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.device import device as _device, resolve as _resolve_device
from tripy.frontend.errors import _raise_here
from tripy.frontend.printing import format_tensor
from tripy.utils import stack_info, suggest
from tripy.utils.stack_info import capture_user_frames


def _is_read_only_numpy(data):
    """A read-only numpy array (not bool, which older numpy exports through lists instead)."""
    return type(data).__module__ == "numpy" and not data.flags.writeable and data.dtype.kind != "b"


def _check_host_memory(data, bytes_per_element, frames):
    """Refuses, naming the user's line, an array whose copy could not fit in this machine's memory
    (a broadcast view of 10**12 elements holds one; copying it would exhaust memory)."""
    need = int(data.size) * bytes_per_element
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return
    if need > total:
        _C.raise_error(
            f"Cannot create a tensor from an array of shape {tuple(data.shape)} and dtype {data.dtype}: copying it "
            f"needs {need} bytes, more than this machine's memory ({total} bytes).",
            frames,
        )


def _writable_copy(data, frames):
    """A C-contiguous copy of a read-only numpy array, for DLPack."""
    import numpy as np  # numpy is optional: only numpy data reaches here

    _check_host_memory(data, data.dtype.itemsize, frames)
    try:
        return np.array(data, order="C", copy=True)
    except MemoryError:
        _C.raise_error(
            f"Cannot create a tensor from an array of shape {tuple(data.shape)} and dtype {data.dtype}: "
            f"there is not enough memory to copy its {int(data.size) * data.dtype.itemsize} bytes.",
            frames,
        )


class Tensor:
    """
    A tensor: data, or the lazily evaluated result of ops. Ops only build a graph; using a value
    (printing it, ``tolist()``, ``float(t)``, ``np.asarray(t)``, ``eval()``) compiles what it needs
    and runs it.

    Its properties are ``shape``, ``dtype``, ``rank`` (also ``ndim``), ``device`` and ``name``.
    Python's operators build ops (``+ - * / // % **`` with numbers on either side, ``@``,
    comparisons, ``& | ~`` on bool, unary ``-``, ``abs()``, and ``t[...]``: ints, slices,
    ``...``, ``None`` and integer tensors), and a few ops have method forms: ``t.cast(dtype)``,
    ``t.copy(device)``, ``t.reshape(shape)``, ``t.transpose(dim0, dim1)``, ``t.permute(perm)``,
    ``t.flatten(start_dim, end_dim)``, ``t.squeeze(dims)`` and ``t.unsqueeze(dim)``; every other op
    is a function of ``tp``. ``bool(t)``, ``float(t)`` and ``int(t)`` read a one-element tensor.

    Args:
        data (number | Sequence | tp.Tensor | Any): A number, a nested list/tuple of numbers,
            or an object with ``__dlpack__`` (numpy, torch, cupy, ...). Its values are copied
            (on its device), so writing to ``data`` afterwards never changes the tensor or the
            lazy ops built on it.
        dtype (tp.dtype | None): The data type; inferred from ``data`` when omitted (bool, int32,
            or int64 beyond int32's range, float32).
        device (tp.device | str | None): Where the data lives; the default device when omitted.
        name (str | None): An optional name.

    Raises:
        tp.TripyException: if ``data`` is ragged, holds values of no Tripy dtype, or does not
            fit ``dtype``; or if ``dtype`` or ``device`` is invalid.

    Example::

        import tripy as tp

        t = tp.Tensor([[1.0, 2.0], [3.0, 4.0]])
        assert t.shape == (2, 2) and t.dtype == tp.float32 and t.rank == 2
        assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
        assert (t * 2.0).reshape((4,)).tolist() == [2.0, 4.0, 6.0, 8.0]
        assert float(t[1, 0]) == 3.0
    """

    # _twins: where a sharded call returned this tensor (its first rank's), the other local ranks'
    # outputs in its place, by device: a later sharded call passes each rank its own, not a copy.
    __slots__ = ("_node", "name", "_twins", "__weakref__")

    def __init__(self, data, dtype=None, device=None, name=None):
        frames = capture_user_frames()
        if dtype is not None:
            dtypes.check_dtype(dtype)
        target = _resolve_device(device)
        if type(data).__module__ == "numpy" and not hasattr(data, "__dlpack__"):
            # numpy scalars (np.float32(0.5), an array's .squeeze() of one element) as 0-d arrays.
            # Imported here: numpy is optional, and only numpy data needs it.
            import numpy as np

            data = np.asarray(data)
        if isinstance(data, Tensor):
            node = data._node
        elif hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
            if getattr(data, "requires_grad", False) and hasattr(data, "detach"):
                # torch exports no tensor that requires grad; the values are copied either way.
                data = data.detach()
            try:
                node = _C.from_dlpack(data, frames)
            except BufferError:
                if _is_read_only_numpy(data):
                    # numpy exports no read-only array (a broadcast view, np.frombuffer): copy it,
                    # refusing at once what this machine cannot hold (a zero-stride view may be TBs).
                    data = _writable_copy(data, frames)
                    node = _C.from_dlpack(data, frames)
                # Older exporters (numpy < 1.25) cannot export bool through DLPack.
                elif not hasattr(data, "tolist"):
                    raise
                else:
                    _check_host_memory(data, 16, frames)  # a Python object per element, briefly
                    node = _C.from_list(data.tolist(), None if dtype is None else dtype.name, str(target), frames)
                if data.size == 0 and tuple(node.shape) != tuple(data.shape):
                    # An empty list keeps no trailing dims: (0, 3) would come back as (0,).
                    node = _C.make("reshape", [node], {"shape": [operator.index(d) for d in data.shape]}, frames)
        else:
            node = _C.from_list(data, None if dtype is None else dtype.name, str(target), frames)
        self._node = node
        self.name = name
        if dtype is not None and self._node.dtype != dtype.name:
            self._node = _C.make("cast", [self._node], {"dtype": dtype.name}, frames)
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
        frames = capture_user_frames()
        return tuple(
            d if isinstance(d, int) else Tensor._wrap(_C.make("shape_dim", [self._node], {"axis": i}, frames))
            for i, d in enumerate(dims)
        )

    @property
    def dtype(self):
        """The data type (``tp.float32``, ``tp.int32``, ...)."""
        return dtypes.from_name(self._node.dtype)

    @property
    def rank(self):
        """The number of dimensions."""
        return self._node.rank

    @property
    def ndim(self):
        """The number of dimensions (``rank``, by numpy's name)."""
        return self._node.rank

    @property
    def device(self):
        """The ``tp.device`` the tensor lives on."""
        return _device(self._node.device)

    # --- evaluation ----------------------------------------------------------------------------
    def _check_value_known(self, use):
        """Inside ``tp.compile`` a tensor computed from a runtime input has no value until the
        executable runs: reading one (``use``) is refused at the user's line, with what to do."""
        if _C.value_known(self._node):
            return
        if isinstance(self, DimensionSize):
            hint = (
                f"{use} needs the size's value, which inside tp.compile is only known when the executable runs. "
                "Use the tp.DimensionSize itself where a size goes (shapes, slice bounds): arithmetic on it stays "
                "symbolic."
            )
        elif use == "bool":
            hint = (
                "A Python `if`, `while`, `and`, `or` or `not` on a tensor needs its value, which inside tp.compile "
                "is only known when the executable runs. Compute both outcomes and choose between them with "
                "tp.where(condition, x, y) (or tp.masked_fill(x, mask, value))."
            )
        else:
            hint = (
                f"{use} needs the tensor's value, which inside tp.compile is only known when the executable runs. "
                "Return the tensor from the compiled function and read it from the executable's result instead."
            )
        _raise_here(f"Cannot read the value of a tensor that depends on a runtime input of tp.compile. {hint}")

    def eval(self):
        """
        Evaluates the tensor now (compiling, or finding in the cache, what it needs) and returns it.
        On the GPU it returns once the values exist, so an error a kernel meets is raised here.

        Returns:
            tp.Tensor: this tensor, now holding its values.

        Raises:
            tp.TripyException: if computing it fails, or inside ``tp.compile`` if it is computed
                from a runtime input (whose value is only known when the executable runs).
        """
        # One call on the usual path; False only where the value cannot be known yet.
        if not _C.evaluate_eager(self._node):
            self._check_value_known("eval()")
        return self

    def tolist(self):
        """
        The values as Python numbers (evaluating the tensor first).

        Returns:
            list | float | int | bool: nested lists of numbers, one level per dimension; a number
            for a rank-0 tensor.

        Raises:
            tp.TripyException: as ``eval()`` does.
        """
        self._check_value_known("tolist()")
        return _C.tolist(self._node)

    def __dlpack__(self, stream=None, **kwargs):
        self._check_value_known("Exporting it (DLPack, numpy)")
        return _C.to_dlpack(self._node)

    def __dlpack_device__(self):
        return _C.dlpack_device(self._node)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(t)``: the values as a numpy array (copied to the host first when they live
        on the GPU), so numpy functions accept Tripy tensors directly."""
        import numpy as np  # here, not at the top: numpy is optional, and only this call needs it

        self._check_value_known("np.asarray(t)")
        if self.dtype.name == "bfloat16":
            # numpy has no bfloat16: float32 holds every bfloat16 value exactly.
            return Tensor._wrap(_C.make("cast", [self._node], {"dtype": "float32"}, capture_user_frames())).__array__(dtype, copy)
        host = self if self._node.device == "cpu" else Tensor._wrap(_C.copy(self._node, "cpu", capture_user_frames()))
        try:
            array = np.from_dlpack(host)
        except (BufferError, TypeError, RuntimeError):  # numpy < 1.25 exports no bool through DLPack
            # (reshaped: a list of no elements has lost the shape's dims past the first zero)
            array = np.array(host.tolist(), dtype=np.bool_ if self.dtype.name == "bool" else None).reshape(host.shape)
        if copy:  # numpy 2's np.array(t) asks for a copy and trusts the answer: a view of a mapped file is read-only
            return array.astype(dtype if dtype is not None else array.dtype, copy=True)
        return array.astype(dtype, copy=False) if dtype is not None else array

    def _single_value(self, kind):
        """The one value of a single-element tensor (any rank), for ``bool(t)``, ``float(t)``, ``int(t)``."""
        self._check_value_known(kind)
        values = self.tolist()
        while isinstance(values, list):
            if len(values) != 1:
                if kind == "bool":
                    _raise_here(
                        f"The truth value of a tensor with shape {self.shape} is ambiguous: only single-element "
                        "tensors convert to bool. Use tp.any(t) or tp.all(t) to reduce it, or tp.where to select."
                    )
                _raise_here(
                    f"Only single-element tensors convert to a Python {kind}, but this one has shape {self.shape}. "
                    "Use t.tolist() for all of its values."
                )
            values = values[0]
        return values

    def __bool__(self):
        return builtins.bool(self._single_value("bool"))

    def __float__(self):
        return builtins.float(self._single_value("float"))

    def __int__(self):
        return builtins.int(self._single_value("int"))

    def __repr__(self):
        if self._node.is_input:
            return f"tensor(<runtime input>, dtype={self.dtype.name}, shape={self.shape})"
        self._check_value_known("Printing it")
        # _printed_values (bound by ops.tensor_methods) fetches only the edges of long axes.
        return format_tensor(self._printed_values(), self.dtype.name, self.shape, str(self.device))

    __str__ = __repr__

    def __iter__(self):
        raise TypeError("tripy.Tensor is not iterable; use tp.split or indexing.")

    __hash__ = object.__hash__

    # numpy defers to Tripy in mixed arithmetic (`array + t` calls `t.__radd__`), so a tensor and an
    # array combine the same way in either order. numpy functions (np.exp(t)) still read the tensor
    # through __array__.
    __array_priority__ = 1000

    def __getattr__(self, attr):
        raise suggest.missing_attribute("tripy.Tensor", attr, suggest.api_names(), own_names=dir(type(self)))

    # The methods that are ops are bound here by tripy.frontend.ops.tensor_methods: cast, copy,
    # reshape, transpose, permute, flatten, squeeze, unsqueeze, indexing, and the arithmetic,
    # comparison, logical and matmul operators.


class DimensionSize(Tensor):
    """
    A scalar int32 tensor that stands for a size. Inside ``tp.compile`` the sizes of dynamic dims
    are DimensionSizes; arithmetic on them (``+ - * //``, ``tp.maximum``/``tp.minimum``, with ints
    too) gives DimensionSizes whose values stay symbolic, so shapes built from them follow the input
    at run time. Outside ``compile`` a DimensionSize is an ordinary value: ``int(d)`` reads it and
    printing shows the number. Static sizes (``tp.ones((2, 3)).shape``) are plain ints.

    Args:
        data (int): The size.
        name (str | None): An optional name.

    Raises:
        tp.TripyException: if ``data`` is not an int (a bool is not) or is outside int64's range.

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
        if isinstance(data, builtins.bool):
            _raise_here(f"A DimensionSize must be an int, but got: {data!r}.")
        try:
            value = operator.index(data)
        except TypeError:
            _raise_here(
                f"A DimensionSize must be an int, but got: {data!r} of type '{type(data).__name__}'."
            )
        # A 'full' literal carries its value as a size, so arithmetic on it stays size arithmetic.
        if not -(2**63) <= value < 2**63:
            _raise_here(f"The integer {value} is out of range for int32.")
        attrs = {"shape": [], "fill_int": value, "dtype": "int32", "device": str(_resolve_device(None))}
        self._node = _C.make("full", [], attrs, capture_user_frames())
        self.name = name

    def __int__(self):
        self._check_value_known("int(size)")
        return int(self.tolist())

    __index__ = __int__

    def __repr__(self):
        if self._node.is_input:
            return super().__repr__()
        return str(int(self))

    __str__ = __repr__


# The core makes op results as these classes itself, and finds the user's frames by stack_info's
# rules (which files are Tripy's, where in a line a call is).
_C._register_eager(Tensor, DimensionSize, stack_info._internal, stack_info._position)

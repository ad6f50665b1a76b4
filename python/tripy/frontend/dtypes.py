"""Data types. Each dtype is a class, so abstract families work with ``issubclass``."""

from tripy.frontend.errors import _raise_here


class _DTypeMeta(type):
    def __repr__(cls):
        return cls.name

    __str__ = __repr__


class dtype(metaclass=_DTypeMeta):
    """
    Base of all Tripy data types. Each has a ``name`` and an ``itemsize`` in bytes.

    Example::

        import tripy as tp

        assert tp.float32.name == "float32" and tp.float32.itemsize == 4
        assert issubclass(tp.float16, tp.floating) and issubclass(tp.int8, tp.integer)
    """

    name = "dtype"
    itemsize = 0


class floating(dtype):
    """Abstract family of floating-point dtypes."""

    name = "floating"


class integer(dtype):
    """Abstract family of integer dtypes."""

    name = "integer"


def _make(name, base, itemsize):
    return _DTypeMeta(name, (base,), {"name": name, "itemsize": itemsize, "__module__": __name__})


float32 = _make("float32", floating, 4)
float16 = _make("float16", floating, 2)
bfloat16 = _make("bfloat16", floating, 2)
float8 = _make("float8", floating, 1)
int4 = _make("int4", integer, 1)
int8 = _make("int8", integer, 1)
int32 = _make("int32", integer, 4)
int64 = _make("int64", integer, 8)
bool = _make("bool", dtype, 1)

_BY_NAME = {d.name: d for d in (float32, float16, bfloat16, float8, int4, int8, int32, int64, bool)}


def from_name(name):
    return _BY_NAME[name]


def check_dtype(value, what="dtype"):
    """Returns ``value`` if it is a concrete tripy dtype, else raises TripyException."""
    if isinstance(value, type) and issubclass(value, dtype) and value.name in _BY_NAME:
        return value
    _raise_here(f"Expected {what} to be a tripy data type (like tp.float32), but got: {value!r}.")

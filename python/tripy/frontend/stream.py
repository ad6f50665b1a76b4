"""CUDA streams for compiled executables: ``tp.Stream()``, ``tp.default_stream()``."""

import inspect

from tripy import _C
from tripy.exception import TripyException
from tripy.frontend.device import device as _device


class Stream:
    """
    A CUDA stream. Executables run on ``executable.stream`` (the default stream unless set);
    ``synchronize()`` waits for the work queued on it. Needs a GPU.

    Example::

        import tripy as tp

        stream = tp.default_stream()
        stream.synchronize()
    """

    # tp.Stream() takes no argument; the handle is internal (tp.default_stream's).
    __signature__ = inspect.Signature()

    def __init__(self, _handle=None):
        self._impl = _handle if _handle is not None else _C.create_stream()

    @property
    def ptr(self):
        """The ``cudaStream_t`` as an int, for libraries that take a raw stream (0 without a GPU).

        Example::

            import tripy as tp

            assert isinstance(tp.default_stream().ptr, int)
        """
        return self._impl.handle

    def synchronize(self):
        """Waits until every operation queued on this stream has finished."""
        self._impl.synchronize()

    def __eq__(self, other):
        return isinstance(other, Stream) and self._impl.handle == other._impl.handle

    def __hash__(self):
        return hash(self._impl.handle)

    def __repr__(self):
        return f"<Stream(id={self._impl.handle:#x})>"


def default_stream(device=None):
    """
    The stream executables use when none is set, for ``device`` (a GPU; ``gpu:0`` by default).

    Args:
        device (tp.device | str | None): A GPU; ``gpu:0`` when None.

    Returns:
        tp.Stream: the device's default stream.

    Raises:
        tp.TripyException: if ``device`` is not ``gpu:0`` (the one device with streams).

    Example::

        import tripy as tp

        assert tp.default_stream() == tp.default_stream(tp.device("gpu"))
    """
    if device is not None and _device(device) != _device("gpu:0"):
        raise TripyException(f"default_stream: streams exist for gpu:0 only, but got: {device}.")
    return Stream(_C.default_stream())

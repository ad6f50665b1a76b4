"""CUDA streams for compiled executables: ``tp.Stream()``, ``tp.default_stream()``."""

from tripy import _C


class Stream:
    """
    A CUDA stream. Executables run on ``executable.stream`` (the default stream unless set);
    ``synchronize()`` waits for the work queued on it. Needs a GPU.

    Example::

        import tripy as tp

        stream = tp.default_stream()
        stream.synchronize()
    """

    def __init__(self, _handle=None):
        self._impl = _handle if _handle is not None else _C.create_stream()

    def synchronize(self):
        """Waits until every operation queued on this stream has finished."""
        self._impl.synchronize()

    def __eq__(self, other):
        return isinstance(other, Stream) and self._impl.handle == other._impl.handle

    def __hash__(self):
        return hash(self._impl.handle)

    def __repr__(self):
        return f"<Stream(id={self._impl.handle:#x})>"


def default_stream():
    """
    The stream executables use when none is set.

    Example::

        import tripy as tp

        assert tp.default_stream() == tp.default_stream()
    """
    return Stream(_C.default_stream())

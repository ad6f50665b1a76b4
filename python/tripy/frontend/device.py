"""Devices: ``tp.device("cpu" | "gpu" | "gpu:0")`` and the default-device rule."""

import os
import threading

from tripy import _C, config
from tripy.frontend.errors import _raise_here


class device:
    """
    A device on which tensors live and executables run.

    Args:
        device (str | tp.device): ``"cpu"``, ``"gpu"`` (the first GPU) or ``"gpu:N"``.

    Raises:
        tp.TripyException: if the name is not a device name.

    Example::

        import tripy as tp

        d = tp.device("gpu")
        assert (d.kind, d.index, str(d)) == ("gpu", 0, "gpu:0")
        assert str(tp.device("cpu")) == "cpu"
    """

    def __init__(self, device):
        name = str(device)  # also a tp.device
        try:
            self.kind, self.index = _C.parse_device(name)  # the core's one parser of device names
        except ValueError as e:
            _raise_here(str(e))

    def __str__(self):
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"

    def __repr__(self):
        return f"device({str(self)!r})"

    def __eq__(self, other):
        return isinstance(other, device) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


_default = None
# The device tensors made without one go to on this thread, while set (see placing_on).
_target = threading.local()


class placing_on:
    """While the ``with`` block runs on this thread, tensors made without a device (``tp.Tensor``,
    ``tp.ones``, ``tp.iota``, ...) are placed on ``device``: tp.compile traces a function for the
    device its program runs on (a mesh rank's, which need not be the default device), and what
    the function makes is the program's own."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        self.previous = getattr(_target, "device", None)
        _target.device = self.device

    def __exit__(self, *exc):
        _target.device = self.previous


def placing_device():
    """The device an enclosing ``placing_on`` set on this thread, or None outside one."""
    return getattr(_target, "device", None)


def default_device():
    """``gpu:0`` where a CUDA GPU is present, else ``cpu``; ``TRIPY_DEVICE`` or ``tp.config.default_device`` override.
    While tp.compile traces a function, the device it compiles for (see placing_on)."""
    global _default
    traced = placing_device()
    if traced is not None:
        return traced
    if config.default_device is not None:
        return device(config.default_device)
    if _default is None:
        env = os.environ.get("TRIPY_DEVICE")
        _default = device(env) if env else device("gpu:0" if _C.gpu_available() else "cpu")
    return _default


def resolve(value):
    return default_device() if value is None else device(value)

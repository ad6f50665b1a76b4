"""The one exception type users see: every user error in Tripy is a ``TripyException``."""

import os
import sys

from tripy import config


class TripyException(Exception):
    """
    Raised for every user error: bad arguments, shape or dtype mismatches, invalid compile inputs,
    out-of-range runtime inputs and backend failures. Its message shows the user's source lines.

    Example::

        import tripy as tp

        try:
            tp.InputInfo(shape=((4, 2, 1),), dtype=tp.float32)
        except tp.TripyException as err:
            assert "min <= opt <= max" in str(err)
    """


def _hide_tripy_frames(tb):
    """The traceback without the frames of Tripy's own files: the message already points at the
    user's line, and the frames between it and the raise are implementation detail."""
    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    kept = []
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(root):
            kept.append(tb)
        tb = tb.tb_next
    for a, b in zip(kept, kept[1:] + [None]):
        a.tb_next = b
    return kept[0] if kept else None


def _install_excepthook():
    """Uncaught TripyExceptions print without Tripy's frames; every other exception, and any
    hook installed before, is left as it was. ``tp.config.extra_error_information = ["all"]``
    (``TRIPY_EXTRA_ERROR_INFORMATION=all``) keeps every frame."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, TripyException) and "all" not in config.extra_error_information:
            tb = _hide_tripy_frames(tb)
        previous(kind, value, tb)

    sys.excepthook = hook


_install_excepthook()

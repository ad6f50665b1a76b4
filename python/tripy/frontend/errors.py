"""Raising a user error at the user's line: the lowest frontend module, so that every other one
(dtypes and devices included) can report a bad argument where the user wrote it."""

from tripy import _C
from tripy.utils.stack_info import capture_user_frames


def _raise_here(message):
    """Raises TripyException for ``message`` at the user's current line, formatted by the core."""
    _C.raise_error(message, capture_user_frames())

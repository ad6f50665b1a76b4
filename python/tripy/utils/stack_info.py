"""Captures the user's source frames at each op call, so errors can point at the line that made a tensor.

Python code that reports an error calls ``capture_user_frames``: it walks raw frames with
``sys._getframe`` (no ``inspect``, no ``traceback``) and memoises every answer that depends only
on the code object. Ops capture their frames in the core instead (memoised per call site), which
asks ``_internal`` and ``_position`` here, so both captures draw the same line.
"""

import os
import sys
from itertools import islice

# The package root: python/tripy. Frames whose file lies under it are Tripy's own and are hidden.
_TRIPY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# filename -> True when the file is inside Tripy. Filenames repeat endlessly, so one dict lookup
# replaces a path normalisation per frame.
_is_internal_file = {}

# (id(code), f_lasti) -> (code, frame tuple). The code object is kept in the value so it stays
# alive, which keeps its id from being reused by another code object while cached.
_positions = {}
# Call sites are finite in a program, but code made by exec() (notebook cells) is not: past this
# many entries the cache starts over rather than keeping dead code objects alive forever.
_MAX_POSITIONS = 1 << 16


def _internal(filename):
    internal = os.path.abspath(filename).startswith(_TRIPY_DIR)
    _is_internal_file[filename] = internal
    return internal


def _position(code, lasti, fallback_lineno):
    """(lineno, col, end_col) of the instruction at byte offset ``lasti``."""
    # co_positions() yields one entry per 2-byte code unit; f_lasti is a byte offset.
    entry = next(islice(code.co_positions(), lasti // 2, None), None)
    if entry is None:
        return fallback_lineno, -1, -1
    lineno, end_lineno, col, end_col = entry
    if lineno is None:
        lineno = fallback_lineno
    if col is None:
        return lineno, -1, -1
    if end_col is None or end_lineno != lineno:
        # A multi-line expression: underline from its start to the end of its first line.
        end_col = -1
    return lineno, col, end_col


def _remember_frame(code, lasti, fallback_lineno):
    if len(_positions) >= _MAX_POSITIONS:
        _positions.clear()
    lineno, col, end_col = _position(code, lasti, fallback_lineno)
    entry = _positions[(id(code), lasti)] = (code, (code.co_filename, lineno, code.co_name, col, end_col))
    return entry


def capture_user_frames(limit=8):
    """
    Returns the innermost ``limit`` frames of the caller's stack that lie outside the Tripy package.

    Each frame is a tuple ``(filename, lineno, function_name, col, end_col)``, innermost first.
    ``col`` and ``end_col`` are 0-based columns of the expression being executed on ``lineno``
    (``end_col`` exclusive). ``col`` is -1 when unknown; ``end_col`` is -1 when unknown or when the
    expression continues past the end of that line (underline to the end of the line then).

    Example::

        from tripy.utils.stack_info import capture_user_frames

        frames = capture_user_frames()
        filename, lineno, function_name, col, end_col = frames[0]
        assert col <= end_col or end_col == -1
    """
    frames = []
    # Bound to locals: attribute and global lookups dominate a loop this short.
    internal_get = _is_internal_file.get
    positions_get = _positions.get
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        internal = internal_get(filename)
        if internal is None:
            internal = _internal(filename)
        if not internal:
            lasti = frame.f_lasti
            cached = positions_get((id(code), lasti))
            if cached is None:
                cached = _remember_frame(code, lasti, frame.f_lineno)
            frames.append(cached[1])
            if len(frames) == limit:
                break
        frame = frame.f_back
    return tuple(frames)

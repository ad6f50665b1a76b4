"""File paths as the frontend passes them to the core: the file name's bytes, checked first."""

import os

from tripy.frontend.errors import _raise_here


def path_argument(path, function):
    """``path`` as the bytes of its file name (a name need not be valid UTF-8 to reach the file it
    names); a NUL byte, which the C library would take as the name's end (``'a\\0b.tpy'`` would open
    ``a``), is refused. Anything that is not a path is os.fsencode's TypeError."""
    name = os.fsencode(path)
    if b"\0" in name:
        _raise_here(f"{function}: the path {os.fspath(path)!r} contains a NUL byte, which no file name can hold.")
    return name


def quoted_path(path):
    """A path as error messages quote it."""
    return repr(os.fsdecode(path))

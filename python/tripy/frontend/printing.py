"""Formats an evaluated tensor's values into the printed form users see (``tensor(...)``).

The layout follows numpy's: nested rows aligned under their opening bracket, elements right-aligned
to one width. Floats show four decimals; integers and bools print plainly.

Summarising, as numpy does: a tensor of more than ``THRESHOLD`` elements shows each axis longer
than ``2 * EDGE_ITEMS`` as its first and last ``EDGE_ITEMS`` entries around ``...``; a smaller tensor
is shown whole, its rows wrapped to ``LINE_WIDTH`` columns. ``values`` may be the full nested list
or one that is already summarised (each summarised axis holding just its ``2 * EDGE_ITEMS`` edge
entries): an axis whose list is shorter than its dimension is taken as already summarised. That
lets a caller fetch only the edges of a huge tensor (see ``summary_slices``) instead of converting
all of it to Python.
"""

import math

EDGE_ITEMS = 3
# Tensors with more elements than this are summarised (numpy's default threshold).
THRESHOLD = 1000
# Printed rows are wrapped to this many columns.
LINE_WIDTH = 80


def summarize_needed(shape):
    """
    True when printing a tensor of this shape elides entries: it has more than ``THRESHOLD``
    elements and some dimension exceeds ``2 * EDGE_ITEMS``.

    Example::

        from tripy.frontend.printing import summarize_needed

        assert not summarize_needed((2, 12))
        assert summarize_needed((2, 1000))
    """
    return math.prod(shape) > THRESHOLD and any(dim > 2 * EDGE_ITEMS for dim in shape)


def summary_slices(shape):
    """
    For each axis, the index ranges that printing shows: ``[(0, dim)]`` for a short axis or a
    tensor that is not summarised, ``[(0, EDGE_ITEMS), (dim - EDGE_ITEMS, dim)]`` for a long axis
    of one that is. Concatenating a tensor's slices along each axis gives the already-summarised
    values that ``format_tensor`` accepts.

    Example::

        from tripy.frontend.printing import summary_slices

        assert summary_slices((2, 10)) == [[(0, 2)], [(0, 10)]]
        assert summary_slices((2, 1000)) == [[(0, 2)], [(0, 3), (997, 1000)]]
    """
    summarize = summarize_needed(shape)
    return [
        [(0, EDGE_ITEMS), (dim - EDGE_ITEMS, dim)] if summarize and dim > 2 * EDGE_ITEMS else [(0, dim)]
        for dim in shape
    ]


def _format_float(value):
    if math.isfinite(value) and abs(value) >= 1e8:
        # Fixed point would print dozens of digits; scientific keeps the column readable.
        return f"{value:.4e}"
    return f"{value:.4f}"


def _element_formatter(dtype_name):
    if dtype_name.startswith(("float", "bfloat")):
        return lambda value: _format_float(float(value))
    return str


def _summarized(values, shape, axis, summarize):
    """Keeps the edge entries of each long axis (when ``summarize``); passes through axes already
    summarised."""
    if axis == len(shape):
        return values
    dim = shape[axis]
    items = list(values)
    if summarize and dim > 2 * EDGE_ITEMS:
        if len(items) == dim:
            items = items[:EDGE_ITEMS] + items[-EDGE_ITEMS:]
        elif len(items) != 2 * EDGE_ITEMS:
            raise ValueError(
                f"Axis {axis} has {len(items)} entries; expected {dim} or {2 * EDGE_ITEMS} for shape {shape}."
            )
        items = [_summarized(item, shape, axis + 1, summarize) for item in items]
        return items[:EDGE_ITEMS] + [...] + items[EDGE_ITEMS:]
    if len(items) != dim:
        raise ValueError(f"Axis {axis} has {len(items)} entries; expected {dim} for shape {shape}.")
    return [_summarized(item, shape, axis + 1, summarize) for item in items]


def _leaves(nested, depth):
    if depth == 0:
        yield nested
        return
    for item in nested:
        if item is not ...:
            yield from _leaves(item, depth - 1)


def _row(cells, indent, line_width):
    """One innermost row, ``[a, b, c]``, wrapped where it would pass ``line_width`` columns;
    continuation lines start under its first entry."""
    out, column = "[", indent + 1
    for index, cell in enumerate(cells):
        text = cell + ("]" if index == len(cells) - 1 else ",")
        if index > 0 and column + 1 + len(text) > line_width:
            out += "\n" + " " * (indent + 1)
            column = indent + 1
        elif index > 0:
            out += " "
            column += 1
        out += text
        column += len(text)
    return out


def _layout(nested, depth, width, indent, line_width):
    """Lays out ``nested`` (``depth`` levels of lists) with its first bracket at column ``indent``."""
    if depth == 0:
        return nested.rjust(width)
    if not nested:
        return "[]"
    if depth == 1:
        return _row(["..." if item is ... else item.rjust(width) for item in nested], indent, line_width)
    # Rows of a 2-D block are separated by a newline; blocks of higher rank by blank lines too.
    separator = "," + "\n" * (depth - 1) + " " * (indent + 1)
    parts = ["..." if item is ... else _layout(item, depth - 1, width, indent + 1, line_width) for item in nested]
    return "[" + separator.join(parts) + "]"


def _stringify(nested, depth, fmt):
    if depth == 0:
        return fmt(nested)
    return [... if item is ... else _stringify(item, depth - 1, fmt) for item in nested]


def format_data(values, dtype_name, shape, line_width=LINE_WIDTH):
    """
    The data part of a printed tensor: ``values`` (as ``tolist()`` gives them, full or already
    summarised) laid out like numpy with the first bracket at column 0, rows wrapped to
    ``line_width`` columns.

    Example::

        from tripy.frontend.printing import format_data

        assert format_data([[1.0, 2.0], [2.0, 3.0]], "float32", (2, 2)) == (
            "[[1.0000, 2.0000],\\n [2.0000, 3.0000]]"
        )
    """
    shape = tuple(int(dim) for dim in shape)
    rank = len(shape)
    fmt = _element_formatter(dtype_name)
    strings = _stringify(_summarized(values, shape, 0, summarize_needed(shape)), rank, fmt)
    width = max((len(leaf) for leaf in _leaves(strings, rank)), default=0)
    return _layout(strings, rank, width, 0, line_width)


def format_tensor(values, dtype_name, shape, device_str):
    """
    The printed form of a tensor: one line when its rank is at most 1 or every dimension is 1 and
    its values fit on the line, otherwise the data and the metadata each on their own lines,
    indented 4.

    Example::

        from tripy.frontend.printing import format_tensor

        assert format_tensor([[6.0]], "float32", (1, 1), "gpu:0") == (
            "tensor([[6.0000]], dtype=float32, loc=gpu:0, shape=(1, 1))"
        )
        assert format_tensor([[1.0, 1.0]], "float32", (1, 2), "cpu") == (
            "tensor(\\n"
            "    [[1.0000, 1.0000]],\\n"
            "    dtype=float32, loc=cpu, shape=(1, 2))"
        )
    """
    shape = tuple(int(dim) for dim in shape)
    metadata = f"dtype={dtype_name}, loc={device_str}, shape={shape}"
    if len(shape) <= 1 or all(dim == 1 for dim in shape):
        data = format_data(values, dtype_name, shape, LINE_WIDTH - len("tensor("))
        if "\n" not in data:
            return f"tensor({data}, {metadata})"
        # A row too long for one line is wrapped, and laid out like a tensor of higher rank.
    indent = " " * 4
    data = format_data(values, dtype_name, shape, LINE_WIDTH - len(indent))
    # Blank lines between blocks of rank > 2 stay empty rather than carrying trailing spaces.
    data = "\n".join(indent + line if line else line for line in data.split("\n"))
    return f"tensor(\n{data},\n{indent}{metadata})"

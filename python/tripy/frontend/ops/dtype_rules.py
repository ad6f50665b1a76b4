"""The dtypes each op accepts, read from the core's op table: the one source for the API
reference's dtype lists (docs/_ext/api_pages.py) and for the op x dtype conformance matrix
(tests/frontend/ops/test_op_matrix.py). The rules themselves live in C++ beside each op; this
module only reads them, so when the core grows a richer primitive table, only this file changes."""

from tripy import _C
from tripy.frontend import dtypes

# Public Python composites whose main input goes straight into one core op's input, so they
# accept what it accepts: public name -> (core op, that input's position).
COMPOSITES = {
    "clamp": ("maximum", 0),
    "masked_fill": ("where", 1),
}


def op_dtype_names():
    """Core op name -> (display name, [comma-separated dtype names, per input]); an empty list
    means the op checks its inputs itself (shape ops take any dtype)."""
    return {name: (display, list(rows)) for name, display, _, _, rows, *_ in _C.op_table()}


def op_dtypes():
    """Core op name -> [tuple of tp dtypes, per input] (the last entry repeats for more inputs)."""
    return {
        name: [tuple(dtypes.from_name(d.strip()) for d in row.split(",")) for row in rows]
        for name, (_, rows) in op_dtype_names().items()
    }


def accepted(op, input=0):
    """The tp dtypes input ``input`` of ``op`` (a core op, or a name in COMPOSITES) accepts."""
    if op in COMPOSITES:
        op, input = COMPOSITES[op]
    rows = op_dtypes()[op]
    return rows[min(input, len(rows) - 1)] if rows else ()

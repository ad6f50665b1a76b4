"""ONNX's Det (the determinant of the last two dims, [..., n, n] -> [...]) as Tripy ops: a
cofactor expansion of the static n x n matrix, n <= 4, each minor built once. LU without pivoting
divides by whatever lands on the diagonal (a zero there gives NaN for a regular matrix), and
pivoting needs a data-dependent row order. The expansion needs no division; its size grows as
n * 2^(n-1) products (28 at n = 4), so larger matrices are refused with that reason. Its row joins the
converter table in ``converters.py``."""

from tripy.frontend.errors import _raise_here
from tripy.onnx.rows import Row

MAX_SIZE = 4


def _det(ctx, n):
    x = ctx.tensor(n.inputs[0])
    if x.rank < 2 or x.shape[-1] != x.shape[-2] or not isinstance(x.shape[-1], int):
        _raise_here(f"ONNX {n.describe()}: Det needs static square matrices in the last two dims, not "
                    f"{list(x.shape)}.")
    size = x.shape[-1]
    if size > MAX_SIZE:
        _raise_here(f"ONNX {n.describe()}: Det of {size} x {size} matrices is not supported: Tripy expands the "
                    f"determinant by cofactors up to {MAX_SIZE} x {MAX_SIZE} (its size grows as n * 2^(n-1)), and an "
                    "elimination needs pivots chosen from the values, which a static graph does not hold.")
    minors = {}

    def minor(row, cols):  # det of rows row.. and the columns cols (a tuple), expanded along its first row
        if len(cols) == 1:
            return x[..., row, cols[0]]
        if cols not in minors:
            total = None
            for i, c in enumerate(cols):
                term = x[..., row, c] * minor(row + 1, cols[:i] + cols[i + 1:])
                total = term if total is None else total - term if i % 2 else total + term
            minors[cols] = total
        return minors[cols]

    return minor(0, tuple(range(size)))


ROWS = {"Det": Row(_det, first=11)}

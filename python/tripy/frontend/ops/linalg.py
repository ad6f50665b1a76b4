"""Matrix products."""

from tripy.frontend.trace_call import make


def matmul(a, b):
    """
    The matrix product with numpy rules (1-D operands, broadcast batch dims); float dtypes.

    Args:
        a (tp.Tensor): The left operand, a float tensor of rank >= 1.
        b (tp.Tensor): The right operand, of ``a``'s dtype.

    Returns:
        tp.Tensor: the product, with numpy's shape rules (``x @ y`` is the same op).

    Raises:
        tp.TripyException: if the dtypes differ or are not supported, or the contracted dims or
            batch dims do not match.

    Example::

        import tripy as tp

        out = tp.matmul(tp.Tensor([[1.0, 2.0]]), tp.Tensor([[3.0], [4.0]]))
        assert out.tolist() == [[11.0]]
    """
    return make("matmul", [a, b])

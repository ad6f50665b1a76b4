"""Matrix products."""

from tripy.frontend.trace_call import make


def matmul(a, b):
    """
    The matrix product with numpy rules (1-D operands, broadcast batch dims); float dtypes.

    Example::

        import tripy as tp

        out = tp.matmul(tp.Tensor([[1.0, 2.0]]), tp.Tensor([[3.0], [4.0]]))
        assert out.tolist() == [[11.0]]
    """
    return make("matmul", [a, b])

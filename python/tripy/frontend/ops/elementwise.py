"""Elementwise ops: unary math, activations, maximum/minimum, where and friends."""

from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make, scalar_like


def _unary(name, formula, example_in, example_out):
    def op(input):
        return make(name, [input])

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"""
    Applies {formula} elementwise.

    Args:
        input (tp.Tensor): The input.

    Returns:
        tp.Tensor: ``{name}(input)``, of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not among the supported dtypes below.

    Example::

        import tripy as tp

        out = tp.{name}(tp.Tensor({example_in}))
        assert tp.allclose(out, tp.Tensor({example_out}), atol=1e-4)
    """
    return op


exp = _unary("exp", "exp(x)", "[0.0, 1.0]", "[1.0, 2.718282]")
def expm1(input):
    """
    Applies exp(x) - 1 elementwise, accurately where x is near 0 (where exp(x) - 1 loses digits).

    Args:
        input (tp.Tensor): The input.

    Returns:
        tp.Tensor: ``exp(input) - 1``, of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not among the supported dtypes below.

    Example::

        import tripy as tp

        out = tp.expm1(tp.Tensor([1e-7, 1.0]))
        assert tp.allclose(out, tp.Tensor([1e-7, 1.718282]), rtol=1e-6, atol=0.0)
    """
    return make("expm1", [input])


log = _unary("log", "the natural logarithm", "[1.0, 2.718282]", "[0.0, 1.0]")
sin = _unary("sin", "sin(x)", "[0.0, 1.5707964]", "[0.0, 1.0]")
cos = _unary("cos", "cos(x)", "[0.0, 3.1415927]", "[1.0, -1.0]")
sqrt = _unary("sqrt", "the square root", "[4.0, 9.0]", "[2.0, 3.0]")
rsqrt = _unary("rsqrt", "1 / sqrt(x)", "[4.0, 0.25]", "[0.5, 2.0]")
tanh = _unary("tanh", "tanh(x)", "[0.0, 1.0]", "[0.0, 0.761594]")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x))", "[0.0, 2.0]", "[0.5, 0.880797]")
erf = _unary("erf", "the error function", "[0.0, 1.0]", "[0.0, 0.842701]")
floor = _unary("floor", "floor(x)", "[1.5, -1.5]", "[1.0, -2.0]")
ceil = _unary("ceil", "ceil(x)", "[1.5, -1.5]", "[2.0, -1.0]")
round = _unary("round", "rounding half to even", "[0.5, 1.5, 2.6]", "[0.0, 2.0, 3.0]")
sign = _unary("sign", "the sign (-1, 0 or 1)", "[-2.0, 0.0, 3.0]", "[-1.0, 0.0, 1.0]")
relu = _unary("relu", "max(x, 0)", "[-1.0, 2.0]", "[0.0, 2.0]")
gelu = _unary("gelu", "the exact (erf) GELU, x * 0.5 * (1 + erf(x / sqrt(2)))", "[0.0, 1.0]", "[0.0, 0.841345]")
silu = _unary("silu", "x * sigmoid(x)", "[0.0, 1.0]", "[0.0, 0.731059]")


def _binary(name, doc_op):
    def op(lhs, rhs):
        if not isinstance(lhs, Tensor):
            lhs = scalar_like(lhs, rhs)
        return make(name, [lhs, scalar_like(rhs, lhs)])

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"""
    The elementwise {doc_op} of two tensors (broadcast numpy-style).

    Args:
        lhs (tp.Tensor | number): The first operand (a number takes the other operand's dtype).
        rhs (tp.Tensor | number): The second operand.

    Returns:
        tp.Tensor: the {doc_op}, of the broadcast shape and the operands' dtype.

    Raises:
        tp.TripyException: if the dtypes differ or are not supported, or the shapes do not
            broadcast.

    Example::

        import tripy as tp

        out = tp.{name}(tp.Tensor([1.0, 5.0]), tp.Tensor([3.0, 2.0]))
        assert out.tolist() == {[3.0, 5.0] if name == "maximum" else [1.0, 2.0]}
    """
    return op


maximum = _binary("maximum", "maximum")
minimum = _binary("minimum", "minimum")


def where(condition, input, other):
    """
    Picks ``input`` where ``condition`` is true, else ``other`` (all broadcast).

    Args:
        condition (tp.Tensor): A bool tensor choosing, per element, between ``input`` and ``other``.
        input (tp.Tensor | number): The values where ``condition`` is true.
        other (tp.Tensor | number): The values where it is false (a number takes the other operand's
            dtype).

    Returns:
        tp.Tensor: a tensor of the broadcast shape and the operands' dtype.

    Raises:
        tp.TripyException: if ``condition`` is not bool, ``input`` and ``other`` differ in dtype, or
            the shapes do not broadcast.

    Example::

        import tripy as tp

        out = tp.where(tp.Tensor([True, False]), tp.Tensor([1.0, 2.0]), tp.Tensor([9.0, 9.0]))
        assert out.tolist() == [1.0, 9.0]
    """
    if not isinstance(input, Tensor):
        input = scalar_like(input, other)
    other = scalar_like(other, input)
    return make("where", [condition, input, other])


def masked_fill(input, mask, value):
    """
    Replaces the elements of ``input`` where ``mask`` is true with ``value``.

    Args:
        input (tp.Tensor): The tensor to fill.
        mask (tp.Tensor): A bool tensor that broadcasts to ``input``'s shape.
        value (number | tp.Tensor): The value written where ``mask`` is true.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``mask`` is not bool, the shapes do not broadcast, or ``value`` does not
            fit ``input``'s dtype.

    Example::

        import tripy as tp

        out = tp.masked_fill(tp.Tensor([1.0, 2.0]), tp.Tensor([False, True]), -1.0)
        assert out.tolist() == [1.0, -1.0]
    """
    return where(mask, scalar_like(value, input), input)


def clamp(input, min=None, max=None):
    """
    Limits values to ``[min, max]`` (either bound may be omitted).

    Args:
        input (tp.Tensor): The tensor to clamp.
        min (number | tp.Tensor | None): The lower bound; none when None.
        max (number | tp.Tensor | None): The upper bound; none when None.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if a bound's dtype differs from ``input``'s or does not fit it.

    Example::

        import tripy as tp

        assert tp.clamp(tp.Tensor([-2.0, 0.5, 3.0]), 0.0, 1.0).tolist() == [0.0, 0.5, 1.0]
    """
    out = input
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return out


def leaky_relu(input, negative_slope=0.01):
    """
    ``x`` where positive, ``negative_slope * x`` elsewhere.

    Args:
        input (tp.Tensor): A float tensor.
        negative_slope (float): The factor applied to negative values.

    Returns:
        tp.Tensor: a tensor of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not supported.

    Example::

        import tripy as tp

        assert tp.allclose(tp.leaky_relu(tp.Tensor([-1.0, 2.0]), 0.1), tp.Tensor([-0.1, 2.0]))
    """
    return where(input > 0, input, input * negative_slope)

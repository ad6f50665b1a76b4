"""Reductions (sum, mean, max, ...), argmax/argmin, var and softmax."""

import operator

from tripy.frontend.errors import _raise_here
from tripy.frontend.trace_call import make


def _dims(dim):
    if dim is None:
        return []
    try:
        return [operator.index(dim)] if not isinstance(dim, (list, tuple)) else [operator.index(d) for d in dim]
    except TypeError:
        _raise_here(f"Expected dim to be an int, a sequence of ints or None, but got: {dim!r}.")


_INTEGER_RULE = """
    Integers accumulate in int64, so the result is exact whenever it fits the returned dtype:
    int32 and int64 keep their dtype (a result beyond it wraps; cast to int64 first for wide
    sums), int8 returns int64 as in numpy and torch.
"""
_EMPTY_RULE = """
    Over a dimension of size 0 it raises ``TripyException``: the {doc} of no elements is undefined.
"""


def _reduction(name, doc, example_out, note=""):
    def op(input, dim=None, keepdim=False):
        return make(name, [input], dims=_dims(dim), keepdim=bool(keepdim))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"""
    The {doc} over ``dim`` (an int, a sequence of ints, or None for all dims).
    ``keepdim`` keeps reduced dims with size 1.
    {note.format(doc=doc)}
    Args:
        input (tp.Tensor): The tensor to reduce.
        dim (int | Sequence[int] | None): The dims to reduce (negative counts from the end);
            None reduces every dim.
        keepdim (bool): Whether reduced dims stay, with size 1.

    Returns:
        tp.Tensor: {"the int32 indices" if name.startswith("arg") else "the " + doc + "s"}, of
        ``input``'s shape without (or, with ``keepdim``, with size 1 at) the reduced dims.

    Raises:
        tp.TripyException: if ``input``'s dtype is not among the supported dtypes below, or a
            dim is out of range or repeated.

    Example::

        import tripy as tp

        x = tp.Tensor([[1.0, 2.0], [3.0, 4.0]])
        assert tp.{name}(x, dim=1).tolist() == {example_out}
    """
    return op


sum = _reduction("sum", "sum", [3.0, 7.0], _INTEGER_RULE)
prod = _reduction("prod", "product", [2.0, 12.0], _INTEGER_RULE)
max = _reduction("max", "maximum", [2.0, 4.0], _EMPTY_RULE + "    NaN propagates, as in numpy.\n")
min = _reduction("min", "minimum", [1.0, 3.0], _EMPTY_RULE + "    NaN propagates, as in numpy.\n")
mean = _reduction("mean", "mean", [1.5, 3.5])
argmax = _reduction(
    "argmax", "index (int32) of the maximum", [1, 1], _EMPTY_RULE + "    A NaN counts as the maximum (the first NaN wins), as in numpy.\n"
)
argmin = _reduction(
    "argmin", "index (int32) of the minimum", [0, 0], _EMPTY_RULE + "    A NaN counts as the minimum (the first NaN wins), as in numpy.\n"
)


def all(input, dim=None, keepdim=False):
    """
    Whether all elements of a bool tensor are true, over ``dim``.

    Args:
        input (tp.Tensor): A bool tensor.
        dim (int | Sequence[int] | None): The dims to reduce (negative counts from the end);
            None reduces every dim.
        keepdim (bool): Whether reduced dims stay, with size 1.

    Returns:
        tp.Tensor: a bool tensor, True where every reduced element is true.

    Raises:
        tp.TripyException: if ``input`` is not bool, or a dim is out of range or repeated.

    Example::

        import tripy as tp

        assert tp.all(tp.Tensor([True, False])).tolist() is False
    """
    return make("all", [input], dims=_dims(dim), keepdim=bool(keepdim))


def any(input, dim=None, keepdim=False):
    """
    Whether any element of a bool tensor is true, over ``dim``.

    Args:
        input (tp.Tensor): A bool tensor.
        dim (int | Sequence[int] | None): The dims to reduce (negative counts from the end);
            None reduces every dim.
        keepdim (bool): Whether reduced dims stay, with size 1.

    Returns:
        tp.Tensor: a bool tensor, True where some reduced element is true.

    Raises:
        tp.TripyException: if ``input`` is not bool, or a dim is out of range or repeated.

    Example::

        import tripy as tp

        assert tp.any(tp.Tensor([True, False])).tolist() is True
    """
    return make("any", [input], dims=_dims(dim), keepdim=bool(keepdim))


def var(input, dim=None, keepdim=False, correction=1):
    """
    The variance over ``dim``, dividing by ``N - correction``.

    Args:
        input (tp.Tensor): A float tensor.
        dim (int | Sequence[int] | None): The dims to reduce (negative counts from the end);
            None reduces every dim.
        keepdim (bool): Whether reduced dims stay, with size 1.
        correction (number): Subtracted from the element count ``N`` in the divisor (1: the
            unbiased sample variance; 0: the population variance).

    Returns:
        tp.Tensor: the variance, of ``input``'s dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not supported, or a dim is out of range.

    Example::

        import tripy as tp

        assert tp.var(tp.Tensor([1.0, 2.0, 3.0, 4.0])).tolist() == 1.6666666269302368
    """
    return make("var", [input], dims=_dims(dim), keepdim=bool(keepdim), correction=float(correction))


def softmax(input, dim=None):
    """
    ``exp(x) / sum(exp(x))`` along ``dim``, computed stably. With ``dim=None`` the sum runs over
    every element: softmax of the flattened input, reshaped back (as in nvtripy).

    Args:
        input (tp.Tensor): A float tensor.
        dim (int | None): The dim to normalize along; None normalizes over every element.

    Returns:
        tp.Tensor: values in ``[0, 1]`` summing to 1 along ``dim``, of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not supported or ``dim`` is out of range.

    Example::

        import tripy as tp

        out = tp.softmax(tp.Tensor([[0.0, 0.0]]), dim=1)
        assert out.tolist() == [[0.5, 0.5]]
        assert tp.softmax(tp.Tensor([[0.0, 0.0], [0.0, 0.0]])).tolist() == [[0.25, 0.25], [0.25, 0.25]]
    """
    return make("softmax", [input], dims=_dims(dim))


def log_softmax(input, dim=None):
    """
    ``log(softmax(x))`` along ``dim`` (over every element when None, as softmax), computed as
    ``(x - max) - log(sum(exp(x - max)))``: finite wherever the input is, even where the
    probability itself rounds to 0.

    Args:
        input (tp.Tensor): A float tensor.
        dim (int | None): The dim to normalize along; None normalizes over every element.

    Returns:
        tp.Tensor: ``log(softmax(input, dim))``, of ``input``'s shape and dtype.

    Raises:
        tp.TripyException: if ``input``'s dtype is not supported or ``dim`` is out of range.

    Example::

        import tripy as tp

        out = tp.log_softmax(tp.Tensor([0.0, 0.0]), dim=0)
        assert tp.allclose(out, tp.Tensor([-0.693147, -0.693147]))
        assert tp.log_softmax(tp.Tensor([1000.0, 0.0])).tolist() == [0.0, -1000.0]
    """
    return make("log_softmax", [input], dims=_dims(dim))

"""Pooling over N-d windows of (N, C, spatial...) tensors: one pooling op (a kernel of its own on
every backend), whose rule in the core checks the arguments and names the caller's line. Spatial
dims may be dynamic."""

from tripy.frontend.errors import _raise_here
from tripy.frontend.trace_call import make


def _pool(input, kernel_dims, stride, padding, kind, count_include_pad=True):
    try:
        window = [int(k) for k in kernel_dims]
        nd = len(window)
        stride = [1] * nd if stride is None else [int(s) for s in stride]
        padding = [(0, 0)] * nd if padding is None else [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        _raise_here(f"{kind}pool: kernel_dims and stride must be sequences of ints and padding a sequence of "
                    f"(before, after) pairs, but got kernel_dims={kernel_dims!r}, stride={stride!r}, "
                    f"padding={padding!r}.")
    attrs = {"kind": kind, "window": window, "stride": stride, "padding": padding,
             "count_include_pad": bool(count_include_pad)}
    return make("pooling", [input], pooling=attrs)


def maxpool(input, kernel_dims, stride=None, padding=None):
    """
    The maximum over each window of ``kernel_dims`` (1-D to 3-D) on an (N, C, spatial...) tensor.
    ``stride`` defaults to 1 per dim; ``padding`` is one ``(before, after)`` pair per spatial dim
    (default none), and padded elements never win.

    Args:
        input (tp.Tensor): An ``(N, C, spatial...)`` tensor.
        kernel_dims (Sequence[int]): The window's size per spatial dim (1 to 3 of them).
        stride (Sequence[int] | None): The step between windows per spatial dim; 1 when None.
        padding (Sequence[tuple[int, int]] | None): ``(before, after)`` per spatial dim; none when None.

    Returns:
        tp.Tensor: ``(N, C, out...)`` of ``input``'s dtype, ``out = (size + before + after - kernel) // stride + 1``.

    Raises:
        tp.TripyException: if the rank does not match ``kernel_dims``, a size is not positive, or the
            dtype is not supported.

    Example::

        import tripy as tp

        x = tp.reshape(tp.arange(16), (1, 1, 4, 4))
        out = tp.maxpool(x, (2, 2), stride=(2, 2))
        assert out.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _pool(input, kernel_dims, stride, padding, "max")


def avgpool(input, kernel_dims, stride=None, padding=None, count_include_pad=True):
    """
    The mean over each window of ``kernel_dims`` (1-D to 3-D) on an (N, C, spatial...) float
    tensor. ``stride`` defaults to 1 per dim; ``padding`` is one ``(before, after)`` pair per
    spatial dim (default none), padding with zeros. With ``count_include_pad=False`` each window
    divides by its count of unpadded elements.

    Args:
        input (tp.Tensor): An ``(N, C, spatial...)`` float tensor.
        kernel_dims (Sequence[int]): The window's size per spatial dim (1 to 3 of them).
        stride (Sequence[int] | None): The step between windows per spatial dim; 1 when None.
        padding (Sequence[tuple[int, int]] | None): ``(before, after)`` per spatial dim; none when None.
        count_include_pad (bool): Whether padded elements count in each window's divisor.

    Returns:
        tp.Tensor: ``(N, C, out...)`` of ``input``'s dtype, ``out = (size + before + after - kernel) // stride + 1``.

    Raises:
        tp.TripyException: if the rank does not match ``kernel_dims``, a size is not positive, or the
            dtype is not supported.

    Example::

        import tripy as tp

        x = tp.reshape(tp.arange(16), (1, 1, 4, 4))
        out = tp.avgpool(x, (2, 2), stride=(2, 2))
        assert out.tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return _pool(input, kernel_dims, stride, padding, "avg", count_include_pad)

"""Resizing by interpolation: the core op ``resize`` (core/src/trace/ops_resize.cc) holds its rules
(sizes, modes, dynamic dims) and builds it from gathers and a weighted sum; this wrapper only hands
the arguments over."""

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import _sizes
from tripy.frontend.trace_call import make


def resize(input, output_shape=None, scales=None, mode="linear", align_corners=False):
    """
    Resizes ``input`` to ``output_shape`` (one size per dim), or by ``scales`` (one factor per dim;
    a size n becomes ``floor(n * scale)``), interpolating each dim whose size changes. Inside
    ``tp.compile`` a dynamic dim can be resized to an int size of ``output_shape`` (not by a
    scale), or kept at its own size (``x.shape[d]``). ``mode`` is ``"nearest"`` (the source ``floor(i * in / out)``), ``"linear"`` or
    ``"cubic"`` (Keys, a = -0.75), both sampling at pixel centres unless ``align_corners``.
    The results match ``torch.nn.functional.interpolate``.

    Args:
        input (tp.Tensor): The tensor to resize.
        output_shape (Sequence[int | tp.DimensionSize] | None): The size of every dim of the result.
        scales (Sequence[float] | None): The factor of every dim (instead of ``output_shape``).
        mode (str): ``"nearest"``, ``"linear"`` or ``"cubic"``.
        align_corners (bool): Whether ``"linear"`` and ``"cubic"`` map the corner pixels onto each
            other instead of sampling at pixel centres.

    Returns:
        tp.Tensor: the resized tensor, of ``input``'s dtype.

    Raises:
        tp.TripyException: if both or neither of ``output_shape`` and ``scales`` are given, their
            length is not ``input``'s rank, or ``mode`` is unknown.

    Example::

        import tripy as tp

        x = tp.Tensor([[[[1.0, 2.0]]]])
        assert tp.resize(x, output_shape=(1, 1, 1, 4), mode="nearest").tolist() == [[[[1.0, 1.0, 2.0, 2.0]]]]
        assert tp.resize(x, scales=(1, 1, 1, 2), mode="linear").tolist() == [[[[1.0, 1.25, 1.75, 2.0]]]]
    """
    if (output_shape is None) == (scales is None):
        _raise_here("resize: give exactly one of output_shape and scales.")
    if not isinstance(mode, str):
        _raise_here(f"resize: expected mode to be a string, but got: {mode!r}.")
    if output_shape is not None:
        return make("resize", [input], shape=_sizes(output_shape, "output_shape"), mode=mode,
                    align_corners=bool(align_corners))
    try:
        factors = [float(s) for s in scales]
    except (TypeError, ValueError):
        _raise_here(f"resize: expected scales to be a sequence of numbers, one per dim, but got: {scales!r}.")
    return make("resize", [input], scales=factors, mode=mode, align_corners=bool(align_corners))

"""``tp.Conv`` and ``tp.ConvTranspose``: N-d convolutions over (N, C, spatial...) tensors, both on
the one ``convolution`` Trace op, whose typed attributes (stride, padding pairs, dilation, groups,
transposed, output_padding) the core checks at the call."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.ops.shape_ops import reshape
from tripy.frontend.trace_call import make


def _per_dim(value, nd, what):
    values = [value] * nd if isinstance(value, int) else [int(v) for v in value]
    if len(values) != nd:
        _raise_here(f"Expected {what} to be an int or {nd} ints (one per spatial dim), but got: {value!r}.")
    return values


def _pad_pairs(padding, nd):
    """An int, one int per dim (both sides), or one (before, after) pair per dim."""
    if isinstance(padding, int):
        return [(padding, padding)] * nd
    items = list(padding)
    if len(items) != nd:
        _raise_here(f"Expected padding to be an int or {nd} entries (one per spatial dim), but got: {padding!r}.")
    return [(int(p), int(p)) if isinstance(p, int) else (int(p[0]), int(p[1])) for p in items]


def _convolution(x, weight, stride, padding, dilation, groups, transposed=False, output_padding=None):
    conv = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "transposed": transposed}
    if output_padding is not None:
        conv["output_padding"] = output_padding
    return make("convolution", [x, weight], convolution=conv)


def _add_bias(out, bias):
    if bias is None:
        return out
    return out + reshape(bias, [bias.shape[0]] + [1] * (out.rank - 2))


class _ConvBase(Module):
    def __init__(self, in_channels, out_channels, kernel_dims, stride, padding, dilation, groups, bias, dtype,
                 weight_channels):
        super().__init__()
        self.kernel_dims = tuple(int(k) for k in kernel_dims)
        nd = len(self.kernel_dims)
        if nd < 1 or min(self.kernel_dims) < 1:
            _raise_here(f"A convolution needs at least one kernel dim, each positive, but got: {kernel_dims!r}.")
        if not isinstance(groups, int) or groups < 1 or in_channels % groups or out_channels % groups:
            _raise_here(f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
                        f"groups ({groups}).")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.stride = _per_dim(stride, nd, "stride")
        if min(self.stride) < 1:
            _raise_here(f"Expected every stride to be positive, but got: {stride!r}.")
        self.padding = _pad_pairs(padding, nd)
        self.dilation = _per_dim(dilation, nd, "dilation")
        self.dtype = dtypes.check_dtype(dtype)
        self.weight = placeholder(weight_channels + self.kernel_dims, self.dtype)
        self.bias = placeholder((out_channels,), self.dtype) if bias else None


class Conv(_ConvBase):
    """
    A convolution over the trailing ``len(kernel_dims)`` dims of an (N, C, spatial...) input with
    ``weight`` of shape ``(out_channels, in_channels // groups, *kernel_dims)`` and ``bias`` of
    shape ``(out_channels,)``. ``stride`` and ``dilation`` are an int or one per spatial dim;
    ``padding`` (zeros) is an int, one int per dim, or one ``(before, after)`` pair per dim.
    ``groups`` splits the channels into independent convolutions.

    Args:
        in_channels (int): The channels of the input.
        out_channels (int): The channels of the output.
        kernel_dims (Sequence[int]): The kernel's size per spatial dim (1 to 3 of them).
        stride (int | Sequence[int]): The step between windows, per spatial dim or one for all.
        padding (int | Sequence[int | tuple[int, int]]): Zero padding per spatial dim: one int for
            both sides, or ``(before, after)``.
        dilation (int | Sequence[int]): The spacing between kernel taps.
        groups (int): The number of groups the channels split into (each divides both channel counts).
        bias (bool): Whether the module has a ``bias`` of shape ``(out_channels,)``.
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).

    Raises:
        tp.TripyException: if a size is not positive, ``groups`` does not divide the channel
            counts, or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        conv = tp.Conv(1, 1, (2, 2), bias=False)
        out = conv(tp.ones((1, 1, 3, 3)))
        assert out.tolist() == [[[[6.0, 6.0], [6.0, 6.0]]]]
    """

    def __init__(self, in_channels, out_channels, kernel_dims, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 dtype=dtypes.float32):
        super().__init__(in_channels, out_channels, kernel_dims, stride, padding, dilation, groups, bias, dtype,
                         (out_channels, in_channels // groups))

    def forward(self, x):
        """
        Convolves ``x`` with ``weight`` and adds ``bias``.

        Args:
            x (tp.Tensor): An ``(N, in_channels, spatial...)`` tensor of the module's dtype.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype, rank or channel count does not match the module's.
        """
        out = _convolution(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        return _add_bias(out, self.bias)


class ConvTranspose(_ConvBase):
    """
    The transposed convolution (the gradient of ``tp.Conv`` with respect to its input), with
    ``weight`` of shape ``(in_channels, out_channels // groups, *kernel_dims)``. Each spatial size
    n becomes ``(n - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + 1 +
    output_padding``; ``output_padding`` (an int or one per spatial dim, smaller than the stride or
    the dilation) picks among the sizes that a strided ``tp.Conv`` maps to the same size.

    Args:
        in_channels (int): The channels of the input.
        out_channels (int): The channels of the output.
        kernel_dims (Sequence[int]): The kernel's size per spatial dim (1 to 3 of them).
        stride (int | Sequence[int]): The step between windows, per spatial dim or one for all.
        padding (int | Sequence[int | tuple[int, int]]): Zero padding per spatial dim: one int for
            both sides, or ``(before, after)``.
        dilation (int | Sequence[int]): The spacing between kernel taps.
        groups (int): The number of groups the channels split into (each divides both channel counts).
        bias (bool): Whether the module has a ``bias`` of shape ``(out_channels,)``.
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        output_padding (int | Sequence[int]): Extra size added to one side of each output spatial dim.

    Raises:
        tp.TripyException: if a size is not positive, ``groups`` does not divide the channel
            counts, or ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        deconv = tp.ConvTranspose(1, 1, (2, 2), stride=2, bias=False)
        out = deconv(tp.ones((1, 1, 1, 1)))
        assert out.tolist() == [[[[0.0, 1.0], [2.0, 3.0]]]]
    """

    def __init__(self, in_channels, out_channels, kernel_dims, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 dtype=dtypes.float32, output_padding=0):
        super().__init__(in_channels, out_channels, kernel_dims, stride, padding, dilation, groups, bias, dtype,
                         (in_channels, out_channels // groups))
        self.output_padding = _per_dim(output_padding, len(self.kernel_dims), "output_padding")

    def forward(self, x):
        """
        Applies the transposed convolution to ``x`` and adds ``bias``.

        Args:
            x (tp.Tensor): An ``(N, in_channels, spatial...)`` tensor of the module's dtype.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype, rank or channel count does not match the module's.
        """
        out = _convolution(x, self.weight, self.stride, self.padding, self.dilation, self.groups, transposed=True,
                           output_padding=self.output_padding)
        return _add_bias(out, self.bias)

"""``tp.Conv`` and ``tp.ConvTranspose``: N-d convolutions over (N, C, spatial...) tensors, both on
the one ``convolution`` Trace op (a transposed convolution is a convolution of the zero-stuffed
input with the flipped kernel)."""

from tripy.frontend import dtypes
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.trace_call import _raise_here, make


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


def _convolution(x, weight, stride, padding, dilation, groups):
    return make("convolution", [x, weight], steps=stride, starts=[lo for lo, _ in padding],
                limits=[hi for _, hi in padding], dims=dilation, axis=groups)


def _add_bias(out, bias):
    from tripy.frontend.ops.shape_ops import reshape

    if bias is None:
        return out
    return out + reshape(bias, [bias.shape[0]] + [1] * (out.rank - 2))


class _ConvBase(Module):
    def __init__(self, in_channels, out_channels, kernel_dims, stride, padding, dilation, groups, bias, dtype,
                 weight_channels):
        super().__init__()
        self.kernel_dims = tuple(int(k) for k in kernel_dims)
        nd = len(self.kernel_dims)
        if nd < 1:
            _raise_here("A convolution needs at least one kernel dim.")
        if not isinstance(groups, int) or groups < 1 or in_channels % groups or out_channels % groups:
            _raise_here(f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
                        f"groups ({groups}).")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.stride = _per_dim(stride, nd, "stride")
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

    def __call__(self, x):
        out = _convolution(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        return _add_bias(out, self.bias)


def _stuff_zeros(x, dim, stride):
    """Inserts ``stride - 1`` zeros between neighbours along ``dim``: size n becomes (n - 1) * stride + 1."""
    from tripy.frontend.ops.pad import full_on
    from tripy.frontend.ops.shape_ops import concatenate, reshape, slice_dim, unsqueeze

    if stride == 1:
        return x
    n = x._node.shape[dim]
    shape = list(x.shape)
    gap = shape[: dim + 1] + [stride - 1] + shape[dim + 1 :]
    spread = concatenate([unsqueeze(x, dim + 1), full_on(x, gap, 0)], dim + 1)
    merged = reshape(spread, shape[:dim] + [n * stride] + shape[dim + 1 :])
    return slice_dim(merged, dim, 0, (n - 1) * stride + 1)


class ConvTranspose(_ConvBase):
    """
    The transposed convolution (the gradient of ``tp.Conv`` with respect to its input), with
    ``weight`` of shape ``(in_channels, out_channels // groups, *kernel_dims)``. Each spatial size
    n becomes ``(n - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + 1``; each
    padding must be at most ``dilation * (kernel - 1)``.

    Example::

        import tripy as tp

        deconv = tp.ConvTranspose(1, 1, (2, 2), stride=2, bias=False)
        out = deconv(tp.ones((1, 1, 1, 1)))
        assert out.tolist() == [[[[0.0, 1.0], [2.0, 3.0]]]]
    """

    def __init__(self, in_channels, out_channels, kernel_dims, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 dtype=dtypes.float32):
        super().__init__(in_channels, out_channels, kernel_dims, stride, padding, dilation, groups, bias, dtype,
                         (in_channels, out_channels // groups))
        for (lo, hi), k, d in zip(self.padding, self.kernel_dims, self.dilation):
            if max(lo, hi) > d * (k - 1):
                _raise_here(f"ConvTranspose: padding {self.padding} exceeds dilation * (kernel - 1) in some dim "
                            f"(kernel {self.kernel_dims}, dilation {tuple(self.dilation)}).")

    def __call__(self, x):
        from tripy.frontend.ops.shape_ops import flip, permute, reshape

        nd = len(self.kernel_dims)
        if x.rank != nd + 2:
            _raise_here(f"ConvTranspose: a {nd}-D kernel needs an input of rank {nd + 2} (N, C, spatial...), but "
                        f"the input has shape {x.shape}.")
        for dim, s in enumerate(self.stride):
            x = _stuff_zeros(x, dim + 2, s)
        # (in, out/g, k...) -> (g, out/g, in/g, k...) -> (out, in/g, k...), kernel flipped.
        g = self.groups
        cin, cout = self.in_channels, self.out_channels
        w = reshape(self.weight, (g, cin // g, cout // g) + self.kernel_dims)
        w = permute(w, [0, 2, 1] + [3 + i for i in range(nd)])
        w = flip(reshape(w, (cout, cin // g) + self.kernel_dims), [2 + i for i in range(nd)])
        padding = [(d * (k - 1) - lo, d * (k - 1) - hi) for (lo, hi), k, d in zip(self.padding, self.kernel_dims,
                                                                                  self.dilation)]
        out = _convolution(x, w, [1] * nd, padding, self.dilation, g)
        return _add_bias(out, self.bias)

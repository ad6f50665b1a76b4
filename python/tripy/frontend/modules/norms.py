"""Channel normalizations of (N, C, spatial...) tensors: ``tp.GroupNorm``, ``tp.InstanceNorm`` (a
GroupNorm with one channel per group; both core ops, core/src/trace/ops_norm.cc) and the inference
form of ``tp.BatchNorm``."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.ops.elementwise import rsqrt
from tripy.frontend.ops.shape_ops import reshape
from tripy.frontend.trace_call import make


def _per_channel(param, x):
    """``param`` of shape (C,) reshaped to broadcast over an (N, C, spatial...) tensor."""
    return reshape(param, [param.shape[0]] + [1] * (x.rank - 2))


def _check_input(x, num_channels, name):
    channels = x._node.shape[1] if x.rank >= 2 else None  # an int, or a string when dynamic
    if channels is None or (isinstance(channels, int) and channels != num_channels):
        _raise_here(f"{name} expects an input of shape (N, {num_channels}, ...), but got shape {x.shape}.")


class GroupNorm(Module):
    """
    Splits the channels of an (N, C, spatial...) input into ``num_groups`` groups, normalizes each
    group of each sample to zero mean and unit variance (biased), then applies the per-channel
    ``weight`` and ``bias`` (each of shape ``(num_channels,)``).

    Args:
        num_groups (int): The number of groups (it divides ``num_channels``).
        num_channels (int): The channels of the input (dim 1).
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        eps (float): Added to the variance before its square root.

    Raises:
        tp.TripyException: if ``num_groups`` does not divide ``num_channels`` or ``dtype`` is not a
            Tripy dtype.

    Example::

        import tripy as tp

        norm = tp.GroupNorm(1, 2)
        norm.load_state_dict({"weight": tp.ones((2,)), "bias": tp.zeros((2,))})
        out = norm(tp.Tensor([[[1.0], [3.0]]]))
        assert tp.allclose(out, tp.Tensor([[[-1.0], [1.0]]]), atol=1e-3)
    """

    def __init__(self, num_groups, num_channels, dtype=dtypes.float32, eps=1e-5):
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            _raise_here(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups}).")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.dtype = dtypes.check_dtype(dtype)
        self.eps = eps
        self.weight = placeholder((num_channels,), self.dtype)
        self.bias = placeholder((num_channels,), self.dtype)

    # The core op (core/src/trace/ops_norm.cc): statistics of float16/bfloat16 inputs in float32.
    _op = "groupnorm"

    def forward(self, x):
        # InstanceNorm's groups are its channels, which the core reads from the weight.
        """
        Normalizes each group of channels of each sample, then applies ``weight`` and ``bias`` per channel.

        Args:
            x (tp.Tensor): An ``(N, C, spatial...)`` tensor.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype or channel count does not match the module's.
        """
        groups = {"groups": self.num_groups} if self._op == "groupnorm" else {}
        return make(self._op, [x, self.weight, self.bias], eps=float(self.eps), **groups)


class InstanceNorm(GroupNorm):
    """
    Normalizes each channel of each sample of an (N, C, spatial...) input over its spatial dims,
    then applies the per-channel ``weight`` and ``bias`` (each of shape ``(num_channels,)``).

    Args:
        num_channels (int): The channels of the input (dim 1).
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        eps (float): Added to the variance before its square root.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        norm = tp.InstanceNorm(1)
        norm.load_state_dict({"weight": tp.ones((1,)), "bias": tp.zeros((1,))})
        out = norm(tp.Tensor([[[1.0, 3.0]]]))
        assert tp.allclose(out, tp.Tensor([[[-1.0, 1.0]]]), atol=1e-3)
    """

    _op = "instancenorm"

    def __init__(self, num_channels, dtype=dtypes.float32, eps=1e-5):
        super().__init__(num_channels, num_channels, dtype, eps)


class BatchNorm(Module):
    """
    Inference batch normalization of an (N, C, spatial...) input with stored statistics:
    ``(x - running_mean) / sqrt(running_var + eps) * weight + bias``, each parameter of shape
    ``(num_features,)``.

    Args:
        num_features (int): The channels of the input (dim 1).
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        eps (float): Added to the variance before its square root.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        norm = tp.BatchNorm(2)
        norm.load_state_dict({"weight": tp.ones((2,)), "bias": tp.zeros((2,)),
                              "running_mean": tp.Tensor([1.0, 2.0]), "running_var": tp.Tensor([4.0, 1.0])})
        out = norm(tp.Tensor([[3.0, 3.0]]))
        assert tp.allclose(out, tp.Tensor([[1.0, 1.0]]), atol=1e-3)
    """

    def __init__(self, num_features, dtype=dtypes.float32, eps=1e-5):
        super().__init__()
        self.num_features = num_features
        self.dtype = dtypes.check_dtype(dtype)
        self.eps = eps
        self.weight = placeholder((num_features,), self.dtype)
        self.bias = placeholder((num_features,), self.dtype)
        self.running_mean = placeholder((num_features,), self.dtype)
        self.running_var = placeholder((num_features,), self.dtype)

    def forward(self, x):
        """
        Normalizes ``x`` with the stored ``running_mean`` and ``running_var``, then applies ``weight`` and ``bias``.

        Args:
            x (tp.Tensor): An ``(N, C, spatial...)`` tensor.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype or channel count does not match the module's.
        """
        _check_input(x, self.num_features, "BatchNorm")
        # The statistics are frozen, so scale and shift fold to one multiply-add per element.
        scale = self.weight * rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * _per_channel(scale, x) + _per_channel(shift, x)

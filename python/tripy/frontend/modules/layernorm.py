"""``tp.LayerNorm`` and ``tp.RMSNorm``: normalize over the trailing dimensions, then scale (and
shift). Both are core ops (core/src/trace/ops_norm.cc) with float16/bfloat16 statistics in float32."""

from tripy.frontend import dtypes
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.ops.layernorm import _layernorm
from tripy.frontend.trace_call import make


class LayerNorm(Module):
    """
    Normalizes the last ``len(normalized_shape)`` dimensions of its input to zero mean and unit
    variance, then applies ``weight`` and ``bias`` (each of shape ``normalized_shape``):
    ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Args:
        normalized_shape (int | Sequence[int]): The trailing dims to normalize (their sizes).
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        eps (float): Added to the variance before its square root.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        norm = tp.LayerNorm(2)
        norm.load_state_dict({"weight": tp.ones((2,)), "bias": tp.zeros((2,))})
        out = norm(tp.Tensor([[1.0, 3.0]]))
        assert tp.allclose(out, tp.Tensor([[-1.0, 1.0]]), atol=1e-3)
    """

    def __init__(self, normalized_shape, dtype=dtypes.float32, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.dtype = dtypes.check_dtype(dtype)
        self.eps = eps
        self.weight = placeholder(self.normalized_shape, self.dtype)
        self.bias = placeholder(self.normalized_shape, self.dtype)

    def forward(self, x):
        # The fused helper lowers to one row-reduction group instead of separate mean/var passes.
        """
        Normalizes ``x``'s trailing dims, then scales by ``weight`` and adds ``bias``.

        Args:
            x (tp.Tensor): A tensor whose trailing dims are ``normalized_shape``.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype or trailing dims do not match the module's.
        """
        return _layernorm(x, self.weight, self.bias, len(self.normalized_shape), self.eps)


class RMSNorm(Module):
    """
    Root-mean-square normalization of the last ``len(normalized_shape)`` dimensions of its input,
    scaled by ``weight`` (of shape ``normalized_shape``): ``x / sqrt(mean(x**2) + eps) * weight``.
    Unlike LayerNorm it neither centers nor shifts.

    Args:
        normalized_shape (int | Sequence[int]): The trailing dims to normalize (their sizes).
        dtype (tp.dtype): The dtype of the parameters (and of the inputs the module takes).
        eps (float): Added to the mean square before its square root.

    Raises:
        tp.TripyException: if ``dtype`` is not a Tripy dtype.

    Example::

        import tripy as tp

        norm = tp.RMSNorm(2)
        norm.load_state_dict({"weight": tp.ones((2,))})
        out = norm(tp.Tensor([[3.0, 4.0]]))
        assert tp.allclose(out, tp.Tensor([[0.8485, 1.1314]]), atol=1e-3)
    """

    def __init__(self, normalized_shape, dtype=dtypes.float32, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.dtype = dtypes.check_dtype(dtype)
        self.eps = eps
        self.weight = placeholder(self.normalized_shape, self.dtype)

    def forward(self, x):
        """
        Divides ``x`` by the root mean square of its trailing dims and scales by ``weight``.

        Args:
            x (tp.Tensor): A tensor whose trailing dims are ``normalized_shape``.

        Returns:
            tp.Tensor: the module's output, of the parameters' dtype.

        Raises:
            tp.TripyException: if ``x``'s dtype or trailing dims do not match the module's.
        """
        return make("rmsnorm", [x, self.weight], dims=list(range(-len(self.normalized_shape), 0)), eps=float(self.eps))

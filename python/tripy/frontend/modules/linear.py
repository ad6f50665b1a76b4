"""``tp.Linear``: ``y = x @ transpose(weight) + bias``, optionally with quantized weights."""

from tripy.frontend import dtypes
from tripy.frontend.module import Module
from tripy.frontend.modules.placeholder import placeholder
from tripy.frontend.trace_call import _raise_here


class Linear(Module):
    """
    Applies ``x @ transpose(weight) + bias`` with ``weight`` of shape ``(out_features, in_features)``
    and ``bias`` of shape ``(out_features,)``.

    With ``quant_dtype`` (``tp.int8``, ``tp.int4`` or ``tp.float8``), ``weight`` is stored quantized
    in that dtype and dequantized with ``weight_scale`` at each call: one scale for the whole weight
    when ``weight_quant_dim`` is None, else one per index of that dimension. Setting
    ``input_scale`` also quantizes and dequantizes the input, as a quantized deployment would.

    Example::

        import tripy as tp

        linear = tp.Linear(2, 3)
        out = linear(tp.ones((1, 2)))
        assert out.shape == (1, 3)
        assert tp.equal(out, tp.Tensor([[1.0, 6.0, 11.0]]))
    """

    def __init__(
        self,
        in_features,
        out_features,
        bias=True,
        dtype=dtypes.float32,
        quant_dtype=None,
        weight_quant_dim=None,
    ):
        import tripy as tp

        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.dtype = dtypes.check_dtype(dtype)
        self.quant_dtype = None if quant_dtype is None else dtypes.check_dtype(quant_dtype, "Linear's quant_dtype")
        self.weight_quant_dim = weight_quant_dim

        weight_shape = (out_features, in_features)
        weight = placeholder(weight_shape, self.dtype)
        if weight_quant_dim not in (None, 0, 1):
            _raise_here(f"Linear's weight_quant_dim must be None, 0 or 1, but got: {weight_quant_dim}.")
        if quant_dtype is not None:
            scale_shape = () if weight_quant_dim is None else (weight_shape[weight_quant_dim],)
            # Scales of one keep the placeholder weight's values (quantization would divide by zero
            # with arange's leading 0).
            self.weight_scale = tp.ones(scale_shape, dtype=self.dtype)
            self.input_scale = None
            weight = tp.quantize(weight, self.weight_scale, quant_dtype, dim=weight_quant_dim)
        self.weight = weight
        self.bias = placeholder((out_features,), self.dtype) if bias else None

    def __call__(self, x):
        import tripy as tp

        weight = self.weight
        if self.quant_dtype is not None:
            if self.input_scale is not None:
                quantized = tp.quantize(x, self.input_scale, self.quant_dtype)
                x = tp.dequantize(quantized, self.input_scale, self.dtype)
            weight = tp.dequantize(weight, self.weight_scale, self.dtype, dim=self.weight_quant_dim)
        out = x @ tp.transpose(weight, 0, 1)
        if self.bias is not None:
            out = out + self.bias
        return out

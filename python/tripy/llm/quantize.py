"""Weight-only quantization of a model's linear layers at load time (``tp.llm.load(path,
quant_mode=...)``), computed with Tripy's own ops on the weights' device:

- ``"int8-weight-only"``: one scale per output feature, ``max |w| / 127``, symmetric;
- ``"int4-weight-only"``: groups of 128 input features (64 or 32 where 128 does not divide them),
  asymmetric: the group's ``[min, max]`` spans the 16 levels, ``w = (q - zero_point) * scale``.

The quantized linears compile to the weight-only product, which reads the weights packed. Embeddings,
norms and the output head stay in the model's dtype.
"""

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import maximum
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.quantize import quantize
from tripy.frontend.ops.reduce import max, min

QUANT_MODES = ("int8-weight-only", "int4-weight-only")
INT4_GROUPS = (128, 64, 32)


def check_quant_mode(quant_mode):
    """``quant_mode`` itself when it is None or one of ``QUANT_MODES``; otherwise a clear error."""
    if quant_mode is not None and quant_mode not in QUANT_MODES:
        raise TripyException(
            f"quant_mode must be one of {', '.join(repr(m) for m in QUANT_MODES)} or None, but got {quant_mode!r}."
        )
    return quant_mode


def quant_dtype(quant_mode):
    """The dtype a mode stores weights in (None for no quantization)."""
    return {None: None, "int8-weight-only": dtypes.int8, "int4-weight-only": dtypes.int4}[quant_mode]


def int4_group(in_features, name):
    """The largest of ``INT4_GROUPS`` dividing ``in_features``; an error naming the weight if none does."""
    for group in INT4_GROUPS:
        if in_features % group == 0:
            return group
    raise TripyException(
        f"{name}: int4 weight-only quantization groups the {in_features} input features by "
        f"{', '.join(map(str, INT4_GROUPS))}, but none of them divides {in_features}."
    )


def quantize_weight(weight, quant_mode, name):
    """The state-dict entries of one quantized linear layer from its float ``weight`` (out, in):
    ``{"weight": q, "weight_scale": s}`` (and ``"weight_zero_point"`` for int4), evaluated once."""
    dtype = weight.dtype
    out_features, in_features = weight.shape
    w = cast(weight, dtypes.float32)
    if quant_mode == "int8-weight-only":
        scale = cast(maximum(max(abs(w), dim=1), 1e-8) / 127.0, dtype)
        entries = {"weight": quantize(weight, scale, dtypes.int8, dim=0), "weight_scale": scale}
    else:
        group = int4_group(in_features, name)
        groups = w.reshape((out_features, in_features // group, group))
        lo, hi = min(groups, dim=2), max(groups, dim=2)
        scale = cast(maximum((hi - lo) / 15.0, 1e-8), dtype)
        # The group's minimum sits at level -8: w = (q - zero) * scale with zero = -8 - lo / scale.
        zero = cast(-8.0 - lo / cast(scale, dtypes.float32), dtype)
        q = quantize(weight, scale, dtypes.int4, zero_point=zero)
        entries = {"weight": q, "weight_scale": scale, "weight_zero_point": zero}
    for t in entries.values():
        t.eval()
    return entries

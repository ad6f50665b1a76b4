"""Quantized projections of a Llama-family model: quantization at load time
(``tp.llm.load(path, quant_mode=...)``), computed with Tripy's own ops on the weights' device, and
the form every quantized weight takes in the model, whether quantized here or read from a
pre-quantized checkpoint (tripy/llm/prequantized.py):

- ``"int8-weight-only"``: one scale per output feature, ``max |w| / 127``, symmetric;
- ``"int4-weight-only"``: groups of 128 input features (64 or 32 where 128 does not divide them),
  asymmetric: the group's ``[min, max]`` spans the 16 levels, ``w = (q - zero_point) * scale``.
  The weights are held two values a byte (``pack_int4``) and the model's int4 weight is
  ``unpack_int4`` of those bytes, which every compiled step reads in place;
- ``"float8"``: float8 e4m3 weights with one scale per output feature (``max |w| / 448`` when
  quantized here), a byte a value. Activations stay in the model's dtype, except where an fp8
  checkpoint gives a projection a per-tensor ``input_scale`` (its activation is quantized too and
  the product is a float8 GEMM).

The quantized linears compile to the weight-only product, which reads the weights as stored. The
output head is quantized too unless the model is told otherwise (``quantize_head``); embeddings and
norms stay in the model's dtype.
"""

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import maximum
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.quantize import pack_int4, quantize, unpack_int4
from tripy.frontend.ops.reduce import max, min

# The modes tp.llm.load quantizes a float checkpoint in (and a pre-quantized checkpoint's modes).
QUANT_MODES = ("int8-weight-only", "int4-weight-only", "float8")
INT4_GROUPS = (128, 64, 32)
FLOAT8_MAX = 448.0


def check_quant_mode(quant_mode, modes=QUANT_MODES):
    """``quant_mode`` itself when it is None or one of ``modes``; otherwise a clear error."""
    if quant_mode is not None and quant_mode not in modes:
        raise TripyException(
            f"quant_mode must be one of {', '.join(repr(m) for m in modes)} or None, but got {quant_mode!r}."
        )
    return quant_mode


def quant_dtype(quant_mode):
    """The dtype a mode stores weights in (None for no quantization)."""
    return {None: None, "int8-weight-only": dtypes.int8, "int4-weight-only": dtypes.int4, "float8": dtypes.float8}[
        quant_mode
    ]


def weight_quant_dim(quant_mode):
    """The weight dim a mode's 1-D scales run along: output features (int8, float8); int4's are 2-D."""
    return None if quant_mode == "int4-weight-only" else 0


def packed_int4_weight(packed, in_features, name):
    """The int4 weight ``(out, in_features)`` that ``packed`` (int8 ``(out, ceil(in_features / 2))``,
    ``pack_int4``'s layout) holds: a view the compiled steps read in place."""
    shape = tuple(packed.shape)
    if packed.dtype != dtypes.int8 or len(shape) != 2 or shape[1] != (in_features + 1) // 2:
        raise TripyException(
            f"{name}: packed int4 weights are int8 of shape (out_features, {(in_features + 1) // 2}) for "
            f"{in_features} input features, two values a byte, but this one has dtype {packed.dtype.name} "
            f"and shape {shape}."
        )
    return unpack_int4(packed, in_features)


def int4_group(in_features, name):
    """The largest of ``INT4_GROUPS`` dividing ``in_features``; an error naming the weight if none does."""
    for group in INT4_GROUPS:
        if in_features % group == 0:
            return group
    raise TripyException(
        f"{name}: int4 weight-only quantization groups the {in_features} input features by "
        f"{', '.join(map(str, INT4_GROUPS))}, but none of them divides {in_features}."
    )


def row_absmax(weight):
    """The largest ``|w|`` of each output feature of ``weight`` (out, in), in float32: the statistic a
    per-output-feature scale comes from (``quantize_weight``'s ``absmax``)."""
    return max(abs(cast(weight, dtypes.float32)), dim=1)


def quantize_weight(weight, quant_mode, name, absmax=None, group=None):
    """The state-dict entries of one quantized linear layer from its float ``weight`` (out, in):
    ``{"weight": q, "weight_scale": s}`` (and ``"weight_zero_point"`` for int4), evaluated once
    (int4: the packed bytes, which the weight views). For ``weight`` a rank's share of some input
    features of a whole weight, ``absmax`` (``row_absmax`` of the whole) and ``group`` (the whole's
    int4 group) give the share the whole's scales, so it quantizes as the whole does."""
    dtype = weight.dtype
    out_features, in_features = weight.shape
    w = cast(weight, dtypes.float32)
    if quant_mode in ("int8-weight-only", "float8"):
        qtype, top = (dtypes.int8, 127.0) if quant_mode == "int8-weight-only" else (dtypes.float8, FLOAT8_MAX)
        scale = cast(maximum(row_absmax(weight) if absmax is None else absmax, 1e-8) / top, dtype)
        entries = {"weight": quantize(weight, scale, qtype, dim=0), "weight_scale": scale}
        evaluated = entries.values()
    else:
        group = group or int4_group(in_features, name)
        groups = w.reshape((out_features, in_features // group, group))
        lo, hi = min(groups, dim=2), max(groups, dim=2)
        scale = cast(maximum((hi - lo) / 15.0, 1e-8), dtype)
        # The group's minimum sits at level -8: w = (q - zero) * scale with zero = -8 - lo / scale.
        zero = cast(-8.0 - lo / cast(scale, dtypes.float32), dtype)
        packed = pack_int4(quantize(weight, scale, dtypes.int4, zero_point=zero))
        entries = {"weight": unpack_int4(packed, in_features), "weight_scale": scale, "weight_zero_point": zero}
        evaluated = (packed, scale, zero)
    for t in evaluated:
        t.eval()
    return entries

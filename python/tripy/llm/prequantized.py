"""Pre-quantized Hugging Face checkpoints, read into the parameters ``LlamaForCausalLM`` holds
(tripy/llm/quantize.py): the ``quantization_config`` of ``config.json`` says which layout the
decoder layers' projections are stored in.

- **GPTQ** (AutoGPTQ, GPTQModel; ``quant_method: "gptq"``, 4 bits): ``qweight`` int32
  ``(in / 8, out)``, eight values a word along the input features, value ``j`` in bits
  ``4j .. 4j + 3``; ``qzeros`` int32 ``(groups, out / 8)``, packed the same way along the output
  features; ``scales`` float16 ``(groups, out)``; ``g_idx`` int32 ``(in,)``, each input feature's
  group. ``w = scales * (q - zero)``, where the stored zero is one less than the zero
  (``checkpoint_format: "gptq"``; ``"gptq_v2"`` stores the zero itself). Only consecutive groups
  are read: a ``g_idx`` other than ``k // group_size`` (act-order, ``desc_act``) is refused.
- **AWQ** (AutoAWQ's GEMM layout; ``quant_method: "awq"``, ``version: "gemm"``, 4 bits):
  ``qweight`` int32 ``(in, out / 8)``, eight output features a word in the order 0, 2, 4, 6, 1,
  3, 5, 7 (word nibble ``i`` holds feature ``8c + (0, 2, 4, 6, 1, 3, 5, 7)[i]``); ``qzeros`` int32
  ``(groups, out / 8)`` in the same order; ``scales`` float16 ``(groups, out)``;
  ``w = scales * (q - zero)``.
- **fp8** (``quant_method`` ``"fp8"``, ``"fbgemm_fp8"``, ``"compressed-tensors"`` or
  ``"modelopt"``): ``weight`` float8 e4m3 ``(out, in)`` with ``weight_scale`` per tensor
  (``()`` or ``(1,)``) or per output feature (``(out,)`` or ``(out, 1)``), and optionally a
  per-tensor ``input_scale`` (static activation scales, applied as the checkpoint intends);
  ``w = weight * weight_scale``. Block-wise scales (``weight_scale_inv``) are refused.

int4 weights become the model's packed int4 form, two values a byte along the input features,
held once and read in place by every compiled step (the weight-only product); their zero points
``z - 8`` and scales, one per output feature and group, are in the model's dtype (float16 scales
of a bfloat16 model round to bfloat16). Each tensor is checked against the shape the model's
configuration gives it, and scales must be finite and positive: a mismatch or a bad scale is a
``TripyException`` naming the tensor.
"""

import numpy as np

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.ops.misc import cast, copy
from tripy.frontend.tensor import Tensor

# The projections of a decoder layer as checkpoints name them.
_PROJECTIONS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
_FP8_METHODS = ("fp8", "fbgemm_fp8", "compressed-tensors", "modelopt")
# AutoAWQ's order of the eight output features in a word: nibble i holds feature AWQ_ORDER[i].
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _error(message):
    raise TripyException(message)


def scheme_of(config_dict, source="config.json"):
    """The checkpoint's quantization as ``{"method": "gptq" | "awq" | "fp8", ...}`` (with
    ``group_size`` and, for GPTQ, ``zero_offset``: 1 where zeros are stored one less), or None for
    a float checkpoint; an error for a layout this reader does not take."""
    q = config_dict.get("quantization_config") if isinstance(config_dict, dict) else None
    if q is None:
        return None
    if not isinstance(q, dict):
        _error(f"{source}: quantization_config must be an object.")
    method = q.get("quant_method")
    if method in ("gptq", "awq"):
        bits = q.get("bits", q.get("w_bit"))
        if bits != 4:
            _error(f"{source}: {method.upper()} checkpoints of {bits} bits are not supported (only 4 bits).")
        group = q.get("group_size", q.get("q_group_size", 128))
        if isinstance(group, bool) or not isinstance(group, int) or (group <= 0 and group != -1):
            _error(f"{source}: quantization_config.group_size must be a positive integer or -1, but is {group!r}.")
        scheme = {"method": method, "group_size": group}
        if method == "gptq":
            fmt = q.get("checkpoint_format", "gptq")
            if fmt not in ("gptq", "gptq_v2"):
                _error(f"{source}: GPTQ checkpoint_format {fmt!r} is not supported (supported: 'gptq', 'gptq_v2').")
            scheme["zero_offset"] = 1 if fmt == "gptq" else 0
        else:
            version = str(q.get("version", "gemm")).lower()
            if version != "gemm":
                _error(f"{source}: AWQ version {version!r} is not supported (only AutoAWQ's 'gemm' layout).")
            if q.get("zero_point", True) is not True:
                _error(f"{source}: AWQ checkpoints without zero points are not supported.")
        return scheme
    if method in _FP8_METHODS:
        return {"method": "fp8"}
    _error(
        f"{source}: quantization_config.quant_method {method!r} is not supported "
        f"(supported: 'gptq', 'awq', {', '.join(repr(m) for m in _FP8_METHODS)})."
    )


def quant_mode_of(scheme):
    """The model quant_mode a checkpoint's weights take."""
    return "float8" if scheme["method"] == "fp8" else "int4-weight-only"


def projection_shapes(config):
    """(out_features, in_features) of each projection of a decoder layer, by its checkpoint name."""
    C, F, D = config.hidden_size, config.intermediate_size, config.head_dim
    H, Hkv = config.num_attention_heads, config.num_key_value_heads
    return {
        "self_attn.q_proj": (H * D, C),
        "self_attn.k_proj": (Hkv * D, C),
        "self_attn.v_proj": (Hkv * D, C),
        "self_attn.o_proj": (C, H * D),
        "mlp.gate_proj": (F, C),
        "mlp.up_proj": (F, C),
        "mlp.down_proj": (C, F),
    }


def _host(t):
    """A host tensor's values as numpy (bfloat16 through float32)."""
    if t.dtype == dtypes.bfloat16:
        t = cast(t, dtypes.float32)
    return np.from_dlpack(t)


def _take(weights, name, dtype, shape, what):
    """``weights[name]`` as numpy after checking its dtype and shape; ``what`` says the layout."""
    if name not in weights:
        _error(f"{name} is missing: {what}.")
    t = weights.pop(name)
    if t.dtype != dtype or tuple(t.shape) != tuple(shape):
        _error(
            f"{name}: {what}, here {dtype.name} of shape {tuple(shape)}, but it is {t.dtype.name} of shape {tuple(t.shape)}."
        )
    return _host(t)


def _check_scales(name, scales):
    """Scales must be finite and positive: the first one that is not is an error naming it."""
    bad = ~(np.isfinite(scales) & (scales > 0))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        _error(f"{name} holds {float(scales[at])} at {at}: scales must be finite and positive.")


def _nibbles(words):
    """The eight 4-bit values of each int32 word, in bit order: ``(..., 8 * n)`` uint8."""
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    return ((words.view(np.uint32)[..., None] >> shifts) & 15).astype(np.uint8).reshape(*words.shape[:-1], -1)


def _pack_rows(values):
    """uint8 values 0..15 ``(rows, K)`` two a byte along K (k even in the low nibble): int8 ``(rows, ceil(K / 2))``."""
    if values.shape[1] % 2:
        values = np.concatenate([values, np.zeros((values.shape[0], 1), np.uint8)], axis=1)
    return (values[:, 0::2] | (values[:, 1::2] << 4)).view(np.int8)


def _groups(scheme, K, name):
    group = K if scheme["group_size"] == -1 else scheme["group_size"]
    if K % group:
        _error(f"{name}: the group size {group} does not divide the {K} input features.")
    return group, K // group


def _int4_projection(weights, prefix, N, K, scheme):
    """(packed (N, ceil(K / 2)) int8, scale (N, groups), zero point (N, groups)) as numpy, from one
    projection's GPTQ or AWQ tensors."""
    method = scheme["method"]
    group, G = _groups(scheme, K, prefix + ".qweight")
    if N % 8 or K % 8:
        _error(f"{prefix}: {method.upper()} packs eight values a word, but the projection is {N} x {K}.")
    scales = _take(weights, prefix + ".scales", dtypes.float16, (G, N), f"{method.upper()} scales are (groups, out_features)")
    _check_scales(prefix + ".scales", scales)
    qzeros = _take(weights, prefix + ".qzeros", dtypes.int32, (G, N // 8), f"{method.upper()} zeros are int32 (groups, out_features / 8)")
    zeros = _nibbles(qzeros).astype(np.float32)  # (G, N) in word order
    if method == "gptq":
        qweight = _take(weights, prefix + ".qweight", dtypes.int32, (K // 8, N), "GPTQ weights are int32 (in_features / 8, out_features)")
        g_idx = weights.pop(prefix + ".g_idx", None)
        if g_idx is not None:
            if tuple(g_idx.shape) != (K,):
                _error(f"{prefix}.g_idx: GPTQ's g_idx has one group per input feature, shape ({K},), but it has shape {tuple(g_idx.shape)}.")
            if not np.array_equal(_host(g_idx), np.arange(K) // group):
                _error(
                    f"{prefix}.g_idx: the input features are not in consecutive groups of {group} (an act-order, "
                    "desc_act, checkpoint), which is not supported."
                )
        # Eight values a word along K, low bits first: each column's words, as bytes in memory order,
        # are already two values a byte along K.
        packed = np.ascontiguousarray(qweight.T).view(np.int8)
        zeros = zeros + scheme["zero_offset"]
    else:
        qweight = _take(weights, prefix + ".qweight", dtypes.int32, (K, N // 8), "AWQ weights are int32 (in_features, out_features / 8)")
        order = np.argsort(AWQ_ORDER)  # feature j of a word sits in nibble order[j]
        zeros = zeros.reshape(G, N // 8, 8)[:, :, order].reshape(G, N)
        packed = np.empty((N, K // 2), np.int8)
        for k0 in range(0, K, 1024):  # in slices of K, to bound the unpacked copy
            q = _nibbles(qweight[k0 : k0 + 1024]).reshape(-1, N // 8, 8)[:, :, order].reshape(-1, N)
            packed[:, k0 // 2 : (k0 + q.shape[0]) // 2] = _pack_rows(np.ascontiguousarray(q.T))
    # Stored values u mean u - 8 in Tripy's int4, so the zero point is z - 8.
    return packed, scales.T.astype(np.float32), zeros.T - 8.0


def _fp8_projection(weights, prefix, N, K):
    """(weight float8 (N, K), per-output-feature scale (N,) numpy, input scale or None)."""
    if prefix + ".weight_scale_inv" in weights:
        _error(f"{prefix}.weight_scale_inv: block-wise fp8 scales are not supported (per tensor or per output feature only).")
    w = weights.pop(prefix + ".weight", None)
    if w is None:
        _error(f"{prefix}.weight is missing: fp8 checkpoints hold each projection's weight.")
    if w.dtype != dtypes.float8 or tuple(w.shape) != (N, K):
        _error(f"{prefix}.weight: fp8 weights are float8 of shape {(N, K)}, but it is {w.dtype.name} of shape {tuple(w.shape)}.")
    name = prefix + ".weight_scale"
    if name not in weights:
        _error(f"{name} is missing: an fp8 weight needs its scale.")
    s = weights.pop(name)
    shape = tuple(s.shape)
    if shape not in ((), (1,), (N,), (N, 1)) or s.dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        _error(
            f"{name}: fp8 weight scales are float per tensor, () or (1,), or per output feature, ({N},) or ({N}, 1), "
            f"but it is {s.dtype.name} of shape {shape}."
        )
    scale = np.broadcast_to(_host(s).astype(np.float32).reshape(-1), (N,))
    _check_scales(name, scale)
    x_scale = weights.pop(prefix + ".input_scale", None)
    if x_scale is not None:
        if tuple(x_scale.shape) not in ((), (1,)):
            _error(f"{prefix}.input_scale: input scales are per tensor, () or (1,), but it has shape {tuple(x_scale.shape)}.")
        x_scale = _host(x_scale).astype(np.float32).reshape(())
        _check_scales(prefix + ".input_scale", x_scale.reshape(1))
    return w, scale, x_scale


def repack(weights, scheme, config):
    """The state dict of a pre-quantized checkpoint on the host: ``weights`` (host tensors, by name;
    consumed) with each decoder projection's quantized tensors turned into the model's parameters
    (``weight_packed``, ``weight_scale``, ``weight_zero_point`` for int4; ``weight``,
    ``weight_scale`` and ``input_scale`` for fp8). What was repacked is numpy (float32 scales and
    zero points, int8 packed bytes), the fp8 weights and the other tensors are the checkpoint's
    host tensors as they are. ``read`` places them on a device; a sharded load
    (tripy/llm/sharded_load.py) takes each rank's share of them (``on_host``)."""
    shapes = projection_shapes(config)
    out = {}
    for i in range(config.num_hidden_layers):
        for proj in _PROJECTIONS:
            prefix = f"model.layers.{i}.{proj}"
            N, K = shapes[proj]
            if scheme["method"] == "fp8":
                w, scale, x_scale = _fp8_projection(weights, prefix, N, K)
                out[prefix + ".weight"] = w
                out[prefix + ".weight_scale"] = scale
                if x_scale is not None:
                    out[prefix + ".input_scale"] = x_scale
            else:
                packed, scale, zero = _int4_projection(weights, prefix, N, K, scheme)
                out[prefix + ".weight_packed"] = packed
                out[prefix + ".weight_scale"] = scale
                out[prefix + ".weight_zero_point"] = zero
    out.update(weights)
    return out


def _tensor(value, device):
    """A numpy array of ``repack``'s as a tensor on ``device``; a tensor as it is."""
    if isinstance(value, Tensor):
        return value
    a = np.asarray(value)  # (ascontiguousarray would make a 0-d input scale 1-d)
    return Tensor(a if a.flags.c_contiguous else np.ascontiguousarray(a), device=device)


def on_host(state):
    """``repack``'s state dict (consumed, each array freed as it is copied) with its numpy arrays as
    host tensors (on the CPU), whose slices a sharded load copies to each rank's device."""
    return {name: _tensor(state.pop(name), "cpu") for name in list(state)}


def read(weights, scheme, config, dtype, device):
    """``repack``'s state dict on ``device``: the repacked scales and zero points (float32 numpy) in
    ``dtype``, everything else in its own dtype."""
    out = {}
    for name, value in repack(weights, scheme, config).items():
        t = _tensor(value, device)
        if t.device != device:
            t = copy(t, device)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and t.dtype != dtype:
            t = cast(t, dtype)
        t.eval()
        out[name] = t
    return out

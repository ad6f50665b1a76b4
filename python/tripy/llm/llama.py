"""Llama-family decoders (Llama 2 and 3, Mistral, Qwen2) as ``tp.Module`` subclasses with Hugging
Face's parameter names, built from a checkpoint's ``config.json``.

One function serves prefill and decode: ``T`` new tokens at positions ``pos .. pos + T - 1`` write
their keys and values into each layer's cache with ``tp.update_slice`` and attend over the cached
positions up to their own, so the caches (donated inputs) are updated in place.
"""

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.mesh import ColumnParallel, RowParallel, world_size
from tripy.frontend.module import Module
from tripy.frontend.modules.embedding import Embedding
from tripy.frontend.modules.layernorm import RMSNorm
from tripy.frontend.modules.linear import Linear
from tripy.frontend.ops.creation import iota, zeros
from tripy.frontend.ops.elementwise import cos, maximum, silu, sin, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.attention import scaled_dot_product_attention
from tripy.frontend.ops.shape_ops import concatenate, split, update_slice
from tripy.frontend.tensor import Tensor
from tripy.llm.quantize import (
    QUANT_MODES,
    check_quant_mode,
    packed_int4_weight,
    quant_dtype,
    quantize_weight,
    weight_quant_dim,
)

_MODEL_TYPES = ("llama", "mistral", "qwen2")


def _config_error(source, message):
    raise TripyException(f"{source}: {message}")


@dataclass
class LlamaConfig:
    """The architecture of a Llama-family decoder, in ``config.json``'s terms."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    max_position_embeddings: int = 4096
    sliding_window: int = None
    model_type: str = "llama"
    torch_dtype: str = None  # the stored weights' dtype name; None when config.json gives none
    bos_token_id: int = None
    eos_token_id: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, d, source="config.json"):
        """Reads a Hugging Face ``config.json`` object; anything this implementation would compute
        differently (another architecture, rope scaling kind, activation) is a clear error."""
        if not isinstance(d, dict):
            _config_error(source, "expected a JSON object.")
        model_type = d.get("model_type", "llama")
        if model_type not in _MODEL_TYPES:
            _config_error(source, f"model_type '{model_type}' is not a Llama-family decoder; supported: {', '.join(_MODEL_TYPES)}.")
        act = d.get("hidden_act", "silu")
        if act != "silu":
            _config_error(source, f"hidden_act '{act}' is not supported (Llama-family models use 'silu').")
        if d.get("mlp_bias"):
            _config_error(source, "mlp_bias is not supported.")

        def positive_int(key, default=None):
            value = d.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                _config_error(source, f"'{key}' must be a positive integer, but is {value!r}.")
            return value

        hidden, heads = positive_int("hidden_size"), positive_int("num_attention_heads")
        kv_heads = positive_int("num_key_value_heads", heads)
        if heads % kv_heads:
            _config_error(source, f"num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads}).")
        head_dim = d.get("head_dim") or hidden // heads
        if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
            _config_error(source, f"head_dim must be a positive even integer, but is {head_dim!r}.")
        eos = d.get("eos_token_id")
        eos = [] if eos is None else (list(eos) if isinstance(eos, list) else [eos])
        # transformers 5 writes the rotary settings as one `rope_parameters` object (theta included);
        # earlier releases as `rope_theta` and `rope_scaling`.
        rope = d.get("rope_parameters")
        if rope is not None and not (isinstance(rope, dict) and "rope_theta" in rope):
            _config_error(source, "rope_parameters must be an object with a rope_theta (per-layer-type parameters are not supported).")
        theta = rope["rope_theta"] if rope is not None else d.get("rope_theta", 10000.0)
        scaling = rope if rope is not None and rope.get("rope_type", "default") != "default" else d.get("rope_scaling")
        if scaling is not None:
            kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
            if kind not in ("llama3", "linear", "default"):
                _config_error(source, f"rope_scaling of type {kind!r} is not supported (supported: llama3, linear).")
        window = d.get("sliding_window") if d.get("use_sliding_window", model_type == "mistral") else None
        return cls(
            vocab_size=positive_int("vocab_size"),
            hidden_size=hidden,
            intermediate_size=positive_int("intermediate_size"),
            num_hidden_layers=positive_int("num_hidden_layers"),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-5)),
            rope_theta=float(theta),
            rope_scaling=scaling,
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            attention_bias=bool(d.get("attention_bias", model_type == "qwen2")),
            max_position_embeddings=positive_int("max_position_embeddings", 4096),
            sliding_window=window,
            model_type=model_type,
            # transformers 5 writes "dtype"; earlier releases "torch_dtype".
            torch_dtype=d.get("dtype") or d.get("torch_dtype"),
            bos_token_id=d.get("bos_token_id"),
            eos_token_id=eos,
        )

    @classmethod
    def from_file(cls, path):
        """``config.json``, or a checkpoint directory holding it."""
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except OSError as e:
            raise TripyException(f"Cannot read the model configuration {path}: {e.strerror}.") from None
        except ValueError as e:
            raise TripyException(f"{path} is not valid JSON: {e}.") from None
        return cls.from_dict(d, path)

    def inverse_frequencies(self):
        """Rotary frequencies ``theta ** (-2i / head_dim)``, rescaled as ``rope_scaling`` says, as
        float32 (computed in float64 first, as the reference implementations do in float32 from
        the same formula; the tables differ by at most one float32 rounding)."""
        d = self.head_dim
        inv = 1.0 / self.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        s = self.rope_scaling or {}
        kind = s.get("rope_type", s.get("type"))
        if kind == "linear":
            inv = inv / float(s["factor"])
        elif kind == "llama3":
            # Llama 3.1's rule: wavelengths longer than the original context divided by
            # low_freq_factor are slowed by `factor`, shorter than it over high_freq_factor kept,
            # and the band between interpolated smoothly.
            factor, low, high = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
            context = float(s["original_max_position_embeddings"])
            wavelen = 2 * math.pi / inv
            smooth = (context / wavelen - low) / (high - low)
            blended = (1 - smooth) * inv / factor + smooth * inv
            inv = np.where(wavelen > context / low, inv / factor, np.where(wavelen < context / high, inv, blended))
        return inv.astype(np.float32)


def _linear(in_features, out_features, bias, dtype, quant_mode):
    """A projection of a decoder layer: a tp.Linear, quantized under ``quant_mode`` (int8 and float8
    per output feature, int4 per group of input features)."""
    return Linear(in_features, out_features, bias=bias, dtype=dtype, quant_dtype=quant_dtype(quant_mode),
                  weight_quant_dim=weight_quant_dim(quant_mode))


def _halves_first():
    """(2, 1) bool: true on the first of the two halves of _rotate's (..., 2, head_dim / 2) view."""
    return iota((2, 1), dim=0, dtype=dtypes.int32) == 0


def _rotate(qkv, heads, cos_t, sin_t):
    """qkv's first ``heads`` heads, each (first half, second half) pair of the last dim rotated by
    its position's angle: (x1 c - x2 s, x2 c + x1 s), which is x * (c, c) + (x2, x1) * (-s, s).

    The halves are the two rows of the head viewed as (..., 2, head_dim / 2). Everything is
    elementwise over that view, with windows and broadcasts of qkv (no concatenation, no copy of
    the q and k heads), so the rotation is one fused kernel. ``cos_t`` and ``sin_t`` are
    (T, 1, 2, head_dim / 2), ``sin_t`` negated on the first row.
    """
    B, T, D = qkv.shape[0], qkv.shape[1], qkv.shape[3]
    rows = qkv.reshape((B, T, qkv.shape[2], 2, D // 2))[:, :, :heads]
    swapped = where(_halves_first(), rows[:, :, :, 1:2], rows[:, :, :, 0:1])
    # (The fusion planner meets the swapped half first: written in this order, the rows' product
    # joins the kernel that computes it.)
    return (sin_t * swapped + cos_t * rows).reshape((B, T, heads, D))


def _shard(linear, parallel):
    """Shards a projection as ``parallel`` says when the model is compiled with a tp.DeviceMesh."""
    linear.parallel = parallel
    return linear


def _heads(config):
    """This rank's attention and KV heads in a sharded compile (all of them outside one)."""
    n = world_size()
    for what, heads in (("attention", config.num_attention_heads), ("KV", config.num_key_value_heads)):
        if heads % n:
            _raise_here(f"The {heads} {what} heads of this model cannot be split over {n} ranks.")
    return config.num_attention_heads // n, config.num_key_value_heads // n


def _check_cache_heads(cache, share, heads):
    """A rank's cache holds its share of the KV heads: caches made for another number of ranks
    (``cache_shape(batch, n)``) are refused here, before the update that could not fit them."""
    held = cache.shape[2] if cache.rank == 4 else None
    if isinstance(held, int) and held != share:
        world = world_size()
        n = heads // held if held and heads % held == 0 else None
        made_for = "" if n is None else f" (made for {n} rank{'s' if n > 1 else ''})"
        wanted = (f"each of the {world} ranks of this compile holds {share} of the model's {heads}" if world > 1
                  else f"the model has {heads}")
        how = f"batch, {world}" if world > 1 else "batch"
        _raise_here(
            f"The KV caches hold {held} KV heads{made_for}, but {wanted}: make them with model.cache_shape({how}) or "
            f"model.empty_caches({how})."
        )


class LlamaAttention(Module):
    """Self-attention over a KV cache. q, k and v come from one projection (``qkv_proj``: the
    checkpoint's ``q_proj``, ``k_proj`` and ``v_proj`` stacked, so a decode step reads the input
    once in one matrix-vector product)."""

    def __init__(self, config, dtype, quant_mode=None):
        super().__init__()
        self.config = config
        H, Hkv, D, C = config.num_attention_heads, config.num_key_value_heads, config.head_dim, config.hidden_size
        # Under a tp.DeviceMesh the heads are split over the ranks: each rank's q, k and v heads
        # (qkv_proj column-parallel in three parts), o_proj row-parallel, each rank's caches its KV heads.
        qkv = ColumnParallel(parts=(H * D, Hkv * D, Hkv * D))
        self.qkv_proj = _shard(_linear(C, (H + 2 * Hkv) * D, config.attention_bias, dtype, quant_mode), qkv)
        self.o_proj = _shard(_linear(H * D, C, False, dtype, quant_mode), RowParallel())

    def forward(self, x, pos, cos_t, sin_t, k_cache, v_cache):
        B, T = x.shape[0], x.shape[1]
        (H, Hkv), D = _heads(self.config), self.config.head_dim
        _check_cache_heads(k_cache, Hkv, self.config.num_key_value_heads)
        qkv = self.qkv_proj(x).reshape((B, T, H + 2 * Hkv, D))
        # Rotary embeddings on (B, T, heads, D), before the heads move to dim 1.
        qk = _rotate(qkv, H + Hkv, cos_t, sin_t)  # q and k rotate together
        q, k = qk[:, :, :H], qk[:, :, H:]
        # The caches are (B, S, heads, D): a step's rows are written without moving its heads,
        # and attention reads the caches through the transposes below in place.
        k_cache = update_slice(k_cache, 1, pos, k)
        v_cache = update_slice(v_cache, 1, pos, qkv[:, :, H + Hkv :])
        # Query t sits at position pos + t and sees the cached positions s <= pos + t.
        S = k_cache.shape[1]
        visible = iota((T, S), dim=1, dtype=dtypes.int32) <= iota((T, S), dim=0, dtype=dtypes.int32) + pos
        y = scaled_dot_product_attention(
            q.transpose(1, 2), k_cache.transpose(1, 2), v_cache.transpose(1, 2), attn_mask=visible.reshape((1, 1, T, S))
        )
        return self.o_proj(y.transpose(1, 2).reshape((B, T, H * D))), k_cache, v_cache


class LlamaMLP(Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``, with gate and up as one projection
    (``gate_up_proj``: the checkpoint's ``gate_proj`` and ``up_proj`` stacked)."""

    def __init__(self, config, dtype, quant_mode=None):
        super().__init__()
        C, F = config.hidden_size, config.intermediate_size
        self.gate_up_proj = _shard(_linear(C, 2 * F, False, dtype, quant_mode), ColumnParallel(parts=(F, F)))
        self.down_proj = _shard(_linear(F, C, False, dtype, quant_mode), RowParallel())

    def forward(self, x):
        gate, up = split(self.gate_up_proj(x), 2, dim=-1)
        return self.down_proj(silu(gate) * up)


# A merged projection -> the checkpoint's projections it stacks along the output features, in order.
_STACKED = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
}
# The parameters stacked with them (per output feature: concatenated), and how (a per-tensor input
# scale: the largest, which every part's inputs fit).
_STACKED_PARAMETERS = {
    "weight": "concatenate",
    "bias": "concatenate",
    "weight_packed": "concatenate",
    "weight_scale": "concatenate",
    "weight_zero_point": "concatenate",
    "input_scale": "maximum",
}
_FLOATS = (dtypes.float32, dtypes.float16, dtypes.bfloat16)


def _stacked(param, values):
    """Parameter ``param`` of stacked projections from each part's ``values``, by its rule in
    ``_STACKED_PARAMETERS``."""
    if _STACKED_PARAMETERS[param] == "maximum":
        stacked = values[0]
        for v in values[1:]:
            stacked = maximum(stacked, v)
        return stacked
    return concatenate(values, dim=0)


# The projections a quant_mode quantizes (each layer's; the output head too unless the model is
# told otherwise: _head_quantized).
_PROJECTIONS = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")


def _head_quantized(quant_mode, quantize_head):
    """Whether the output head is quantized: by default under every quant_mode, as torchao and
    gpt-fast quantize every linear layer (it is a small model's largest weight: a fifth of
    Llama-3.2-1B's bytes); never without one."""
    if quantize_head is None:
        return quant_mode is not None
    if quantize_head and quant_mode is None:
        _raise_here(
            f"quantize_head=True quantizes the output head in the model's quant_mode "
            f"({', '.join(repr(m) for m in QUANT_MODES)}), but this model has no quant_mode."
        )
    return bool(quantize_head)


def _module_at(layer, dotted):
    """The child of ``layer`` at a dotted name ("self_attn.qkv_proj")."""
    for attr in dotted.split("."):
        layer = getattr(layer, attr)
    return layer


class LlamaDecoderLayer(Module):
    def __init__(self, config, dtype, quant_mode=None):
        super().__init__()
        self.self_attn = LlamaAttention(config, dtype, quant_mode)
        self.mlp = LlamaMLP(config, dtype, quant_mode)
        self.input_layernorm = RMSNorm(config.hidden_size, dtype=dtype, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, dtype=dtype, eps=config.rms_norm_eps)

    def forward(self, x, pos, cos_t, sin_t, k_cache, v_cache):
        y, k_cache, v_cache = self.self_attn(self.input_layernorm(x), pos, cos_t, sin_t, k_cache, v_cache)
        h = x + y
        return h + self.mlp(self.post_attention_layernorm(h)), k_cache, v_cache


class LlamaModel(Module):
    def __init__(self, config, dtype, quant_mode=None):
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size, dtype=dtype,
                                      parallel=ColumnParallel(gather_output=True))
        self.layers = [LlamaDecoderLayer(config, dtype, quant_mode) for _ in range(config.num_hidden_layers)]
        self.norm = RMSNorm(config.hidden_size, dtype=dtype, eps=config.rms_norm_eps)


class LlamaForCausalLM(Module):
    """A Llama-family decoder over per-layer KV caches.

    ``model(tokens, pos, caches)``: ``tokens`` int32 ``(B, T)`` at positions ``pos .. pos + T - 1``
    (``pos`` an int32 tensor of shape ``(1,)``), ``caches`` the ``2 * num_hidden_layers`` caches
    ``[k_0, v_0, k_1, v_1, ...]``, each ``(B, max_seq_len, num_key_value_heads, head_dim)``.
    Returns the logits of the last token ``(B, vocab_size)`` and the updated caches.

    ``quant_mode`` (``"int8-weight-only"``, ``"int4-weight-only"`` or ``"float8"``,
    tripy/llm/quantize.py) quantizes the decoder layers' projections as ``load_state_dict`` loads
    their float weights, or takes them already quantized (tripy/llm/prequantized.py).
    ``quantize_head`` quantizes the output head's float weight too (None: under any quant_mode);
    the embeddings and norms keep the model's dtype.
    """

    def __init__(self, config, dtype=dtypes.float32, max_seq_len=None, quant_mode=None, quantize_head=None):
        super().__init__()
        self.config = config
        self.dtype = dtype
        self.quant_mode = check_quant_mode(quant_mode)
        self.max_seq_len = max_seq_len or config.max_position_embeddings
        if config.sliding_window is not None and self.max_seq_len > config.sliding_window:
            raise TripyException(
                f"This {config.model_type} model attends over a sliding window of {config.sliding_window} "
                f"positions, which is not supported; pass max_seq_len <= {config.sliding_window} "
                f"(within the window every position is seen), not {self.max_seq_len}."
            )
        self.quantize_head = _head_quantized(self.quant_mode, quantize_head)
        self.model = LlamaModel(config, dtype, self.quant_mode)
        head_mode = self.quant_mode if self.quantize_head else None
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False, dtype=dtype,
                              quant_dtype=quant_dtype(head_mode), weight_quant_dim=weight_quant_dim(head_mode),
                              parallel=ColumnParallel(gather_output=True))
        self._inverse_frequencies = config.inverse_frequencies()

    def cache_shape(self, batch, world_size=1):
        """One layer's K (or V) cache: ``(batch, max_seq_len, kv heads, head_dim)``, with a rank's
        share of the KV heads under a tp.DeviceMesh of ``world_size`` ranks."""
        c = self.config
        if c.num_key_value_heads % world_size:
            _raise_here(f"The {c.num_key_value_heads} KV heads of this model cannot be split over {world_size} ranks.")
        return (batch, self.max_seq_len, c.num_key_value_heads // world_size, c.head_dim)

    def empty_caches(self, batch, world_size=1):
        """Zeroed caches for ``batch`` sequences (positions not yet written must not hold NaN,
        which a masked score would still turn into NaN); a rank's under a mesh of ``world_size``."""
        shape = self.cache_shape(batch, world_size)
        return [zeros(shape, dtype=self.dtype) for _ in range(2 * self.config.num_hidden_layers)]

    def load_state_dict(self, state_dict, strict=True):
        """Takes Hugging Face's names: a tied checkpoint (no ``lm_head.weight``) reuses the
        embedding, and q/k/v and gate/up are stacked into the merged projections (evaluated once
        here, so every compile reads the stacked weights). Under ``quant_mode`` the projections'
        float weights are quantized here, once; quantized ones are taken as they are: int8 or
        float8 ``weight`` with a ``weight_scale`` per output feature (float8: and an optional
        per-tensor ``input_scale``), or int4 as ``weight_packed`` (int8 ``(out, ceil(in / 2))``, two
        values a byte as ``pack_int4`` writes them) with ``weight_scale`` and ``weight_zero_point``
        per group of input features ``(out, groups)``."""
        state_dict = dict(state_dict)
        if "lm_head.weight" not in state_dict and "model.embed_tokens.weight" in state_dict:
            state_dict["lm_head.weight"] = state_dict["model.embed_tokens.weight"]
        for i, layer in enumerate(self.model.layers):
            prefix = f"model.layers.{i}."
            for merged, parts in _STACKED.items():
                for param in _STACKED_PARAMETERS:
                    names = [f"{prefix}{p}.{param}" for p in parts]
                    if not all(n in state_dict for n in names):
                        continue
                    stacked = _stacked(param, [state_dict.pop(n) for n in names])
                    stacked.eval()
                    state_dict[f"{prefix}{merged}.{param}"] = stacked
            for proj in _PROJECTIONS:
                name = prefix + proj
                packed = state_dict.pop(name + ".weight_packed", None)
                if packed is not None:
                    if self.quant_mode != "int4-weight-only":
                        raise TripyException(
                            f"{name}.weight_packed: packed int4 weights need a model with quant_mode "
                            f"'int4-weight-only', but this one has {self.quant_mode!r}."
                        )
                    linear = _module_at(layer, proj)
                    state_dict[name + ".weight"] = packed_int4_weight(packed, linear.in_features, name + ".weight_packed")
                w = state_dict.get(name + ".weight")
                if self.quant_mode and w is not None and w.dtype in _FLOATS:
                    for suffix, t in quantize_weight(state_dict.pop(name + ".weight"), self.quant_mode, name + ".weight").items():
                        state_dict[name + "." + suffix] = t
        head = state_dict.get("lm_head.weight")
        if self.quantize_head and head is not None and head.dtype in _FLOATS:  # a tied head's copy; the embedding stays
            for suffix, t in quantize_weight(state_dict.pop("lm_head.weight"), self.quant_mode, "lm_head.weight").items():
                state_dict["lm_head." + suffix] = t
        return super().load_state_dict(state_dict, strict=strict)

    def forward(self, tokens, pos, caches):
        T = tokens.shape[1]
        half = self.config.head_dim // 2
        positions = iota((T, 2, half), dim=0, dtype=dtypes.float32) + cast(pos, dtypes.float32)
        angles = positions * Tensor(self._inverse_frequencies)
        # (T, 1, 2, head_dim / 2), broadcast over the batch and the heads of _rotate's view.
        cos_t = cast(cos(angles), self.dtype).reshape((T, 1, 2, half))
        sin_t = cast(where(_halves_first(), -sin(angles), sin(angles)), self.dtype).reshape((T, 1, 2, half))
        x = self.model.embed_tokens(tokens)
        updated = []
        for i, layer in enumerate(self.model.layers):
            x, k, v = layer(x, pos, cos_t, sin_t, caches[2 * i], caches[2 * i + 1])
            updated += [k, v]
        last = self.model.norm(x[:, -1])
        return self.lm_head(last), updated

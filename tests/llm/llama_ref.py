"""An independent float64 numpy Llama-family decoder (Hugging Face parameter names), full recompute
with no cache, and random weights for tiny configurations."""

import math

import numpy as np


def tiny_config(**overrides):
    config = {
        "model_type": "llama",
        "vocab_size": 97,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 64,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    config.update(overrides)
    return config


def random_weights(config, seed=0, sharpen=4.0):
    """float32 weights ~ N(0, sharpen^2 / fan_in) (sharpened so that greedy decoding visits many
    tokens), norms near one, biases small."""
    rng = np.random.default_rng(seed)
    C, F, V = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    H, Hkv = config["num_attention_heads"], config["num_key_value_heads"]
    D = config.get("head_dim") or C // H

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) * sharpen / math.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((V, C)).astype(np.float32), "model.norm.weight": norm(C)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = mat(H * D, C)
        w[p + "self_attn.k_proj.weight"] = mat(Hkv * D, C)
        w[p + "self_attn.v_proj.weight"] = mat(Hkv * D, C)
        w[p + "self_attn.o_proj.weight"] = mat(C, H * D)
        w[p + "mlp.gate_proj.weight"] = mat(F, C)
        w[p + "mlp.up_proj.weight"] = mat(F, C)
        w[p + "mlp.down_proj.weight"] = mat(C, F)
        w[p + "input_layernorm.weight"] = norm(C)
        w[p + "post_attention_layernorm.weight"] = norm(C)
        if config.get("attention_bias", config["model_type"] == "qwen2"):
            for name, n in (("q", H * D), ("k", Hkv * D), ("v", Hkv * D)):
                w[p + f"self_attn.{name}_proj.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
    if not config.get("tie_word_embeddings"):
        w["lm_head.weight"] = mat(V, C)
    return w


def inverse_frequencies(config):
    """Per frequency, written as the rule reads (a loop, not the vectorised form of the module)."""
    D = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    scaling = config.get("rope_parameters") or config.get("rope_scaling") or {}
    theta = scaling.get("rope_theta", config.get("rope_theta"))
    out = []
    for i in range(0, D, 2):
        f = theta ** (-i / D)
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "linear":
            f /= scaling["factor"]
        elif kind == "llama3":
            wavelength = 2 * math.pi / f
            original = scaling["original_max_position_embeddings"]
            if wavelength > original / scaling["low_freq_factor"]:
                f /= scaling["factor"]
            elif wavelength >= original / scaling["high_freq_factor"]:
                t = (original / wavelength - scaling["low_freq_factor"]) / (
                    scaling["high_freq_factor"] - scaling["low_freq_factor"]
                )
                f = (1 - t) * f / scaling["factor"] + t * f
        out.append(f)
    return np.array(out, np.float64)


def _rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def logits(weights, tokens, config):
    """Logits (B, T, vocab) of int tokens (B, T) at positions 0 .. T - 1."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    B, T = tokens.shape
    C, H, Hkv = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    D = config.get("head_dim") or C // H
    angles = np.arange(T)[:, None] * inverse_frequencies(config)[None, :]
    c, s = np.cos(angles), np.sin(angles)

    def rope(a):  # (B, heads, T, D): pairs (i, i + D/2) rotate by the position's angle
        a1, a2 = a[..., : D // 2], a[..., D // 2 :]
        return np.concatenate([a1 * c - a2 * s, a2 * c + a1 * s], axis=-1)

    def proj(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    x = w["model.embed_tokens.weight"][tokens]
    hidden_mask = np.triu(np.ones((T, T), bool), 1)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms_norm(x, w[p + "input_layernorm.weight"], config["rms_norm_eps"])
        q = rope(proj(h, p + "self_attn.q_proj").reshape(B, T, H, D).transpose(0, 2, 1, 3))
        k = rope(proj(h, p + "self_attn.k_proj").reshape(B, T, Hkv, D).transpose(0, 2, 1, 3))
        v = proj(h, p + "self_attn.v_proj").reshape(B, T, Hkv, D).transpose(0, 2, 1, 3)
        k, v = np.repeat(k, H // Hkv, axis=1), np.repeat(v, H // Hkv, axis=1)
        scores = np.where(hidden_mask, -np.inf, q @ k.transpose(0, 1, 3, 2) / math.sqrt(D))
        e = np.exp(scores - scores.max(-1, keepdims=True))
        y = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], config["rms_norm_eps"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, w["model.norm.weight"], config["rms_norm_eps"])
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return x @ head.T


def greedy(weights, prompt, n, config):
    """The next n greedy tokens (B, n) by recomputing the whole sequence each step."""
    seq = np.asarray(prompt, np.int64)
    for _ in range(n):
        nxt = logits(weights, seq, config)[:, -1].argmax(-1)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return seq[:, np.asarray(prompt).shape[1] :]

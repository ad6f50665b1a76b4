"""The float32 reference of bench/llm.py's --reference: a Llama-family model's prompt logits computed
from the checkpoint's safetensors without Tripy or transformers, one decoder layer's weights held at
a time (so a model larger than one GPU fits), with torch where it is installed, else numpy."""

import glob
import json
import math
import os

import numpy as np

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
HEAD_ROWS = 8192  # the output head's rows computed at a time


def checkpoint_arrays(directory):
    """Every tensor of the checkpoint's safetensors files, by name, as a numpy view of the mapped
    file (read from each file's JSON header): nothing is read until a tensor is used."""
    arrays = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.safetensors"))):
        data = np.memmap(path, np.uint8, mode="c")  # copy on write: writable for torch.from_numpy, never written
        start = 8 + int(data[:8].view("<u8")[0])
        for name, t in json.loads(bytes(data[8:start])).items():
            if name != "__metadata__":
                lo, hi = t["data_offsets"]
                arrays[name] = data[start + lo : start + hi].view(SAFETENSORS_DTYPES[t["dtype"]]).reshape(t["shape"])
    return arrays


def head_dim(c):
    """Features per attention head of config `c` (its head_dim, else hidden_size / heads)."""
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def rope_frequencies(c):
    """The rotary inverse frequencies of config `c`: theta ** (-2i / head_dim), rescaled by llama3
    rope scaling (long wavelengths over `factor`, short ones kept, those between interpolated)."""
    D = head_dim(c)
    inv = c["rope_theta"] ** -(np.arange(0, D, 2) / D)
    s = c.get("rope_scaling")
    if not s:
        return inv
    wavelength, original = 2 * math.pi / inv, s["original_max_position_embeddings"]
    t = (original / wavelength - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
    between = (1 - t) * inv / s["factor"] + t * inv
    return np.where(wavelength > original / s["low_freq_factor"], inv / s["factor"],
                    np.where(wavelength < original / s["high_freq_factor"], inv, between))


def float32(a, torch=None, device="cpu"):
    """A mapped (or gathered) checkpoint array (bfloat16 read as its bits) as float32: a numpy
    array, or with torch a tensor on `device`."""
    bf16 = a.dtype == np.uint16
    if torch is None:
        return (a.astype(np.uint32) << 16).view(np.float32) if bf16 else a.astype(np.float32)
    t = torch.from_numpy(a.view(np.int16) if bf16 else a).to(device)
    return (t.view(torch.bfloat16) if bf16 else t).float()


def rms_norm(x, weight, eps, xp):
    return x / xp.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def rotate(a, cos, sin, xp):
    """The pairs (i, i + D/2) of a's last dim (D) turned by each position's angle (cos, sin: D/2 each)."""
    half = a.shape[-1] // 2
    a1, a2 = a[..., :half], a[..., half:]
    return xp.concatenate([a1 * cos - a2 * sin, a2 * cos + a1 * sin], axis=-1)


def reference_layer(x, w, c, cos, sin, mask, xp):
    """One decoder layer on x (B, T, C) in float32 with xp (torch or numpy): RMSNorm, rotary GQA
    causal attention, RMSNorm, SwiGLU MLP, each added to x. `w`: the layer's weights by the names
    after `model.layers.{i}.`; cos, sin: (T, head_dim / 2) of each position's angles."""
    B, T, C = x.shape
    H, G = c["num_attention_heads"], c["num_key_value_heads"]
    D, eps = head_dim(c), c["rms_norm_eps"]

    def heads(h, name, n):  # (B, n, G, T, D): query head g * n + j at [:, j, g]; a KV head broadcasts over j
        return (h @ w[f"self_attn.{name}_proj.weight"].T).reshape(B, T, G, n, D).swapaxes(1, 3)

    h = rms_norm(x, w["input_layernorm.weight"], eps, xp)
    q, k, v = rotate(heads(h, "q", H // G), cos, sin, xp), rotate(heads(h, "k", 1), cos, sin, xp), heads(h, "v", 1)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(D) + mask
    e = xp.exp(scores - xp.amax(scores, -1, keepdims=True))
    y = ((e / e.sum(-1, keepdims=True)) @ v).swapaxes(1, 3).reshape(B, T, H * D)
    x = x + y @ w["self_attn.o_proj.weight"].T
    h = rms_norm(x, w["post_attention_layernorm.weight"], eps, xp)
    gate = h @ w["mlp.gate_proj.weight"].T
    return x + (gate / (1 + xp.exp(-gate)) * (h @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T


def reference_logits(directory, c, ids, torch, device="cpu"):
    """The float32 logits (B, vocab) at the last position of the prompt `ids` (B, T), computed from
    the checkpoint's safetensors without Tripy or transformers, one decoder layer's weights held at a
    time (so a model larger than one GPU fits): with torch on `device`, or numpy where torch is None."""
    arrays = checkpoint_arrays(directory)
    xp = np if torch is None else torch

    def f32(a):  # on the reference's device
        return float32(a, torch, device)

    T = ids.shape[1]
    angles = np.arange(T)[:, None] * rope_frequencies(c)[None, :]
    causal = np.triu(np.full((T, T), -np.inf), 1)  # added to the scores: no position sees a later one
    cos, sin, mask = (f32(a.astype(np.float32)) for a in (np.cos(angles), np.sin(angles), causal))
    x = f32(arrays["model.embed_tokens.weight"][ids])
    for i in range(c["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        w = {name[len(prefix) :]: f32(a) for name, a in arrays.items() if name.startswith(prefix)}
        x = reference_layer(x, w, c, cos, sin, mask, xp)
        del w  # freed before the next layer's weights are read
    last = rms_norm(x[:, -1], f32(arrays["model.norm.weight"]), c["rms_norm_eps"], xp)
    # The head a slice of rows at a time: whole, in float32 (4.2 GB for a 128256 x 8192 head), it can
    # outgrow what a GPU that also holds the model being checked has left.
    head = arrays.get("lm_head.weight", arrays["model.embed_tokens.weight"])
    logits = xp.concatenate([last @ f32(head[i : i + HEAD_ROWS]).T for i in range(0, head.shape[0], HEAD_ROWS)],
                            axis=-1)
    if torch is None:
        return logits
    torch.cuda.empty_cache()  # the layers' memory back to the GPU for Tripy's next run (a no-op without CUDA)
    return logits.cpu().numpy()

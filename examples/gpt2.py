"""GPT-2 written with Tripy, in nanoGPT's architecture and parameter names, so weights copy over by name.

    GPT: wte + wpe -> n_layer x Block -> ln_f -> lm_head (tied to wte)
    Block: x + attn(ln_1(x)), then x + mlp(ln_2(x))

The attention is written by hand as nanoGPT users write it (q @ k^T * scale, a sliced causal mask
filled with -inf, softmax, @ v), a pattern the compiler is free to recognise. The file also holds a
torch twin of the same model (used where torch is installed; its attention is torch's
scaled_dot_product_attention from torch 2.0 on, as a torch user would write it) and a float64 numpy
reference.

`GPT.cached` is the same model over a KV cache, for generation (examples/gpt2_generate.py): each
layer writes its new keys and values into its cache with tp.update_slice at a position read at run
time, and attends over the whole cache with a mask that hides the positions not yet written (the
compiler recognises it: the kernel reads the position and visits only the rows written).

Run: python examples/gpt2.py   (a tiny config, checked against torch, or numpy without torch)
"""

import math
import os
import sys
from dataclasses import dataclass

import numpy as np

import tripy as tp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref as ref  # noqa: E402
from model_utils import load_weights, optional_torch, report, to_numpy  # noqa: E402

torch = optional_torch()
nn = torch.nn if torch else None


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50257
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768


GPT2_124M = GPTConfig()
TINY = GPTConfig(block_size=32, vocab_size=97, n_layer=2, n_head=4, n_embd=32)

# Names in a nanoGPT state dict that this model does not load: lm_head is wte (tied), and the causal
# mask buffer (present when nanoGPT does not use flash attention) is built here.
IGNORED = ("lm_head.weight", ".attn.bias", ".attn.masked_bias")


class CausalSelfAttention(tp.Module):
    def __init__(self, config, causal_mask, dtype):
        self.c_attn = tp.Linear(config.n_embd, 3 * config.n_embd, dtype=dtype)
        self.c_proj = tp.Linear(config.n_embd, config.n_embd, dtype=dtype)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.bias = causal_mask  # (1, 1, block_size, block_size), ones on and below the diagonal

    def __call__(self, x):
        B, T, C = x.shape
        H, D = self.n_head, self.n_embd // self.n_head
        qkv = self.c_attn(x)
        q, k, v = tp.split(qkv, 3, dim=2)
        q = q.reshape((B, T, H, D)).transpose(1, 2)  # (B, H, T, D)
        k = k.reshape((B, T, H, D)).transpose(1, 2)
        v = v.reshape((B, T, H, D)).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = tp.masked_fill(att, self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = tp.softmax(att, dim=-1)
        y = att @ v  # (B, H, T, D)
        y = y.transpose(1, 2).reshape((B, T, self.n_embd))
        return self.c_proj(y)

    def cached(self, x, pos, k_cache, v_cache):
        """T new tokens at positions pos .. pos + T - 1 (pos: an int32 tensor of shape (1,)) with this
        layer's cache (B, H, block_size, D): their keys and values are written into the cache and
        each query attends to the cached positions up to its own. Returns (y, k_cache, v_cache)."""
        B, T, C = x.shape
        H, D = self.n_head, self.n_embd // self.n_head
        q, k, v = tp.split(self.c_attn(x), 3, dim=2)
        q, k, v = (a.reshape((B, T, H, D)).transpose(1, 2) for a in (q, k, v))  # (B, H, T, D)
        k_cache = tp.update_slice(k_cache, 2, pos, k)
        v_cache = tp.update_slice(v_cache, 2, pos, v)
        S = k_cache.shape[2]
        # Query t sits at position pos + t and sees cached positions s <= pos + t; the rest of the
        # cache (not yet written) is masked out. One shape for every position: one CUDA graph.
        visible = tp.iota((T, S), dim=1, dtype=tp.int32) <= tp.iota((T, S), dim=0, dtype=tp.int32) + pos
        y = tp.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=visible.reshape((1, 1, T, S)))
        y = y.transpose(1, 2).reshape((B, T, self.n_embd))
        return self.c_proj(y), k_cache, v_cache


class MLP(tp.Module):
    def __init__(self, config, dtype):
        self.c_fc = tp.Linear(config.n_embd, 4 * config.n_embd, dtype=dtype)
        self.c_proj = tp.Linear(4 * config.n_embd, config.n_embd, dtype=dtype)

    def __call__(self, x):
        return self.c_proj(tp.gelu(self.c_fc(x)))


class Block(tp.Module):
    def __init__(self, config, causal_mask, dtype):
        self.ln_1 = tp.LayerNorm(config.n_embd, dtype=dtype)
        self.attn = CausalSelfAttention(config, causal_mask, dtype)
        self.ln_2 = tp.LayerNorm(config.n_embd, dtype=dtype)
        self.mlp = MLP(config, dtype)

    def __call__(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def cached(self, x, pos, k_cache, v_cache):
        y, k_cache, v_cache = self.attn.cached(self.ln_1(x), pos, k_cache, v_cache)
        x = x + y
        return x + self.mlp(self.ln_2(x)), k_cache, v_cache


class GPT(tp.Module):
    """GPT-2 on int32 token ids of shape (B, T), T <= block_size; returns logits (B, T, vocab)."""

    def __init__(self, config, dtype=tp.float32):
        self.config = config
        n = config.block_size
        # One mask tensor shared by every layer: one constant in the compiled program.
        causal_mask = tp.tril(tp.ones((n, n), dtype=dtype)).reshape((1, 1, n, n))
        self.transformer = {
            "wte": tp.Embedding(config.vocab_size, config.n_embd, dtype=dtype),
            "wpe": tp.Embedding(config.block_size, config.n_embd, dtype=dtype),
            "h": [Block(config, causal_mask, dtype) for _ in range(config.n_layer)],
            "ln_f": tp.LayerNorm(config.n_embd, dtype=dtype),
        }

    def __call__(self, idx):
        B, T = idx.shape
        pos = tp.iota((T,), dtype=tp.int32)
        x = self.transformer["wte"](idx) + self.transformer["wpe"](pos)
        for block in self.transformer["h"]:
            x = block(x)
        x = self.transformer["ln_f"](x)
        return x @ self.transformer["wte"].weight.transpose(0, 1)  # lm_head, tied to wte

    def cache_shape(self, batch):
        """The shape of each layer's key cache and value cache: (B, H, block_size, D)."""
        c = self.config
        return (batch, c.n_head, c.block_size, c.n_embd // c.n_head)

    def cached(self, idx, pos, caches):
        """A generation step: token ids ``idx`` (B, T) at positions pos .. pos + T - 1 (``pos``: an
        int32 tensor of shape (1,)); ``caches``: per layer a key and a value cache (2 * n_layer
        tensors of ``cache_shape(B)``, zeros to start). Returns (logits of the last position
        (B, 1, vocab), the updated caches). A prefill is T prompt tokens at pos 0, a decode step one
        token at the number of tokens cached."""
        B, T = idx.shape
        positions = tp.iota((T,), dtype=tp.int32) + pos
        x = self.transformer["wte"](idx) + self.transformer["wpe"](positions)
        updated = []
        for i, block in enumerate(self.transformer["h"]):
            x, k_cache, v_cache = block.cached(x, pos, caches[2 * i], caches[2 * i + 1])
            updated += [k_cache, v_cache]
        x = self.transformer["ln_f"](x[:, T - 1 :])  # only the last position predicts the next token
        return x @ self.transformer["wte"].weight.transpose(0, 1), updated


def load_gpt(model, state):
    """Copies nanoGPT-named weights (a torch GPT's state_dict(), or a dict of numpy arrays) into ``model``."""
    load_weights(model, state, ignore=IGNORED)


def random_weights(config, seed=0):
    """nanoGPT-named float32 numpy weights, random like nanoGPT's initialisation (std 0.02), with
    LayerNorms and biases perturbed too so that every parameter takes part in a check."""
    rng = np.random.default_rng(seed)

    def normal(*shape, std=0.02, mean=0.0):  # drawn in float32: no float64 copy of a large model
        return mean + std * rng.standard_normal(shape, dtype=np.float32)

    C, w = config.n_embd, {}
    w["transformer.wte.weight"] = normal(config.vocab_size, C)
    w["transformer.wpe.weight"] = normal(config.block_size, C)
    for i in range(config.n_layer):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = normal(C, std=0.1, mean=1.0), normal(C)
        for name, (n_out, n_in) in {"attn.c_attn": (3 * C, C), "attn.c_proj": (C, C),
                                    "mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C)}.items():
            w[p + name + ".weight"], w[p + name + ".bias"] = normal(n_out, n_in), normal(n_out)
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = normal(C, std=0.1, mean=1.0), normal(C)
    return w


def numpy_forward(weights, idx, config):
    """The same forward pass in float64 numpy: logits (B, T, vocab) for int token ids (B, T)."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    B, T = idx.shape
    H, D = config.n_head, config.n_embd // config.n_head
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    future = np.triu(np.ones((T, T), bool), 1)
    for i in range(config.n_layer):
        p = f"transformer.h.{i}."
        h = ref.layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = ref.linear(h, w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"])
        q, k, v = (a.reshape(B, T, H, D).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
        att = np.where(future, -np.inf, q @ k.transpose(0, 1, 3, 2) / math.sqrt(D))
        y = (ref.softmax(att) @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)
        x = x + ref.linear(y, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"])
        h = ref.layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = ref.gelu(ref.linear(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"]))
        x = x + ref.linear(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
    x = ref.layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"])
    return x @ w["transformer.wte.weight"].T


# --- the torch twin: the same architecture and names ----------------------------------------------
# Attention as a torch user writes it (nanoGPT's flash path): F.scaled_dot_product_attention where
# torch has it (2.0 and later), else the explicit softmax of nanoGPT's other path.
class TorchAttention(nn.Module if torch else object):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head, self.n_embd = config.n_head, config.n_embd
        n = config.block_size
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, x, past=None):
        """``past``: this layer's cached (k, v), each (B, H, P, D); returns (y, (k, v) including x's)."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (a.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for a in (q, k, v))
        P = 0
        if past is not None:
            P = past[0].size(2)
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        sdpa = getattr(nn.functional, "scaled_dot_product_attention", None)
        if sdpa is not None:
            if P == 0:
                y = sdpa(q, k, v, is_causal=True)
            elif T == 1:  # one new token sees every cached one
                y = sdpa(q, k, v)
            else:
                y = sdpa(q, k, v, attn_mask=self.bias[:, :, P : P + T, : P + T] != 0)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, P : P + T, : P + T] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)), (k, v)


class TorchBlock(nn.Module if torch else object):
    def __init__(self, config):
        super().__init__()
        C = config.n_embd
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = TorchAttention(config)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(C, 4 * C), c_proj=nn.Linear(4 * C, C)))

    def forward(self, x, past=None):
        y, present = self.attn(self.ln_1(x), past)
        x = x + y
        return x + self.mlp.c_proj(nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)))), present


class TorchGPT(nn.Module if torch else object):
    def __init__(self, config, seed=0):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([TorchBlock(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as in GPT-2
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():  # random like random_weights: every parameter matters to a check
            for name, p in self.named_parameters():
                is_ln = ".ln_" in name or name.startswith("transformer.ln_f")
                p.copy_(torch.randn(p.shape, generator=gen) * (0.1 if is_ln and name.endswith("weight") else 0.02))
                if is_ln and name.endswith("weight"):
                    p.add_(1.0)

    def forward(self, idx, past=None):
        """Logits for ``idx`` (B, T). With ``past`` (a list of per-layer (k, v), empty to start), the
        positions continue after the cached ones and (logits, new cache) is returned: a KV-cache step."""
        P = past[0][0].size(2) if past else 0
        pos = torch.arange(P, P + idx.size(1), device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        presents = []
        for i, block in enumerate(self.transformer.h):
            x, present = block(x, past[i] if past else None)
            presents.append(present)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits if past is None else (logits, presents)


def main():
    config = TINY
    model = GPT(config)
    idx = np.random.default_rng(1).integers(0, config.vocab_size, (2, 11)).astype(np.int32)
    if torch is not None:
        twin = TorchGPT(config).eval()
        load_gpt(model, twin.state_dict())
        with torch.no_grad():
            want, against = twin(torch.from_numpy(idx).long()).numpy(), f"torch {torch.__version__}"
    else:
        weights = random_weights(config)
        load_gpt(model, weights)
        want, against = numpy_forward(weights, idx, config), "numpy float64"
    # Batch 2, any sequence length up to block_size: one executable serves them all.
    fast = tp.compile(model, args=[tp.InputInfo(shape=(2, (1, 16, config.block_size)), dtype=tp.int32)])
    got = to_numpy(fast(tp.Tensor(idx)))
    report(f"GPT-2 {config} vs {against}", ref.max_relative_error(got, want), 1e-4)
    short = to_numpy(fast(tp.Tensor(np.ascontiguousarray(idx[:, :5]))))  # causal: a prefix's logits do not see the rest
    report("GPT-2, 5-token prefix, same executable", ref.max_relative_error(short, want[:, :5]), 1e-4)


if __name__ == "__main__":
    main()

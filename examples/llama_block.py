"""A Llama-style decoder block written with Tripy: RMSNorm, rotary position embeddings, grouped-query
attention (k/v heads shared by groups of q heads) and a SwiGLU MLP, with Meta's parameter names.

    h   = x + attention(attention_norm(x))      (rotary q/k, causal, n_kv_heads dividing n_heads)
    out = h + feed_forward(ffn_norm(h))         (w2(silu(w1 h) * w3 h))

The file also holds a torch twin of the same block (used where torch is installed) and a float64
numpy reference.

Run: python examples/llama_block.py   (a tiny config, compiled, checked against torch or numpy)
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
class LlamaConfig:
    dim: int = 4096
    n_heads: int = 32
    n_kv_heads: int = 8
    hidden_dim: int = 14336
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0

    @property
    def head_dim(self):
        return self.dim // self.n_heads


LLAMA3_8B = LlamaConfig()  # one decoder block of Llama 3 8B
TINY = LlamaConfig(dim=64, n_heads=8, n_kv_heads=2, hidden_dim=160, rope_theta=10000.0)


def inverse_frequencies(config):
    """Rotary frequencies theta^(-2i/d), i < d/2, as float32 (shared by every implementation here)."""
    d = config.head_dim
    return (config.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)


class RMSNorm(tp.Module):
    def __init__(self, dim, eps, dtype):
        self.eps = eps
        self.weight = tp.ones((dim,), dtype=dtype)

    def __call__(self, x):
        xf = tp.cast(x, tp.float32)  # normalise in float32, as Llama does, whatever the model's dtype
        normed = xf * tp.rsqrt(tp.mean(xf * xf, dim=-1, keepdim=True) + self.eps)
        return tp.cast(normed, x.dtype) * self.weight


def rotary_tables(seq_len, config, dtype):
    """cos and sin of position * frequency, each (seq_len, head_dim / 2)."""
    positions = tp.iota((seq_len, config.head_dim // 2), dim=0, dtype=tp.float32)
    angles = positions * tp.Tensor(inverse_frequencies(config))
    return tp.cast(tp.cos(angles), dtype), tp.cast(tp.sin(angles), dtype)


def rotate(x, cos, sin):
    """Rotates each (first half, second half) pair of x's last dim by its position's angle."""
    x1, x2 = tp.split(x, 2, dim=-1)
    return tp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(tp.Module):
    def __init__(self, config, dtype):
        if config.n_heads % config.n_kv_heads:
            raise ValueError(f"n_kv_heads ({config.n_kv_heads}) must divide n_heads ({config.n_heads})")
        self.config = config
        H, Hkv, D = config.n_heads, config.n_kv_heads, config.head_dim
        self.wq = tp.Linear(config.dim, H * D, bias=False, dtype=dtype)
        self.wk = tp.Linear(config.dim, Hkv * D, bias=False, dtype=dtype)
        self.wv = tp.Linear(config.dim, Hkv * D, bias=False, dtype=dtype)
        self.wo = tp.Linear(H * D, config.dim, bias=False, dtype=dtype)

    def __call__(self, x, cos, sin):
        B, T, _ = x.shape
        H, Hkv, D = self.config.n_heads, self.config.n_kv_heads, self.config.head_dim
        q = self.wq(x).reshape((B, T, H, D)).transpose(1, 2)  # (B, H, T, D)
        k = self.wk(x).reshape((B, T, Hkv, D)).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.wv(x).reshape((B, T, Hkv, D)).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        # Grouped-query attention: q head h reads k/v head h // (H / Hkv).
        k, v = tp.repeat(k, H // Hkv, dim=1), tp.repeat(v, H // Hkv, dim=1)
        y = tp.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape((B, T, H * D)))


class FeedForward(tp.Module):
    def __init__(self, config, dtype):
        self.w1 = tp.Linear(config.dim, config.hidden_dim, bias=False, dtype=dtype)
        self.w2 = tp.Linear(config.hidden_dim, config.dim, bias=False, dtype=dtype)
        self.w3 = tp.Linear(config.dim, config.hidden_dim, bias=False, dtype=dtype)

    def __call__(self, x):
        return self.w2(tp.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(tp.Module):
    """One decoder block on hidden states (B, T, dim); returns (B, T, dim)."""

    def __init__(self, config, dtype=tp.float32):
        self.config = config
        self.attention = Attention(config, dtype)
        self.feed_forward = FeedForward(config, dtype)
        self.attention_norm = RMSNorm(config.dim, config.norm_eps, dtype)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps, dtype)

    def __call__(self, x):
        cos, sin = rotary_tables(x.shape[1], self.config, x.dtype)
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


def random_weights(config, seed=0):
    """Meta-named float32 numpy weights: projections ~ N(0, 1/fan_in), norms near one."""
    rng = np.random.default_rng(seed)
    H, Hkv, D, C, F = config.n_heads, config.n_kv_heads, config.head_dim, config.dim, config.hidden_dim
    shapes = {"attention.wq.weight": (H * D, C), "attention.wk.weight": (Hkv * D, C),
              "attention.wv.weight": (Hkv * D, C), "attention.wo.weight": (C, H * D),
              "feed_forward.w1.weight": (F, C), "feed_forward.w2.weight": (C, F), "feed_forward.w3.weight": (F, C)}
    w = {name: (rng.standard_normal(s) / math.sqrt(s[1])).astype(np.float32) for name, s in shapes.items()}
    for norm in ("attention_norm", "ffn_norm"):
        w[norm + ".weight"] = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    return w


def numpy_forward(weights, x, config):
    """The same block in float64 numpy, on hidden states (B, T, dim)."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    B, T, _ = x.shape
    H, Hkv, D = config.n_heads, config.n_kv_heads, config.head_dim
    angles = np.arange(T, dtype=np.float64)[:, None] * inverse_frequencies(config).astype(np.float64)
    cos, sin = np.cos(angles), np.sin(angles)

    def heads(a, n):
        return a.reshape(B, T, n, D).transpose(0, 2, 1, 3)

    def rotate_np(a):
        a1, a2 = a[..., : D // 2], a[..., D // 2 :]
        return np.concatenate([a1 * cos - a2 * sin, a2 * cos + a1 * sin], axis=-1)

    h = ref.rms_norm(x, w["attention_norm.weight"], config.norm_eps)
    q = rotate_np(heads(h @ w["attention.wq.weight"].T, H))
    k = np.repeat(rotate_np(heads(h @ w["attention.wk.weight"].T, Hkv)), H // Hkv, axis=1)
    v = np.repeat(heads(h @ w["attention.wv.weight"].T, Hkv), H // Hkv, axis=1)
    scores = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, q @ k.transpose(0, 1, 3, 2) / math.sqrt(D))
    y = (ref.softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)
    h = x + y @ w["attention.wo.weight"].T
    f = ref.rms_norm(h, w["ffn_norm.weight"], config.norm_eps)
    f = ref.silu(f @ w["feed_forward.w1.weight"].T) * (f @ w["feed_forward.w3.weight"].T)
    f = f @ w["feed_forward.w2.weight"].T
    return h + f


# --- the torch twin: the same block and names ----------------------------------------------------
class TorchRMSNorm(nn.Module if torch else object):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class TorchTransformerBlock(nn.Module if torch else object):
    def __init__(self, config, seed=0):
        super().__init__()
        self.config = config
        H, Hkv, D, C, F = config.n_heads, config.n_kv_heads, config.head_dim, config.dim, config.hidden_dim
        self.attention = nn.ModuleDict(dict(wq=nn.Linear(C, H * D, bias=False), wk=nn.Linear(C, Hkv * D, bias=False),
                                            wv=nn.Linear(C, Hkv * D, bias=False), wo=nn.Linear(H * D, C, bias=False)))
        self.feed_forward = nn.ModuleDict(dict(w1=nn.Linear(C, F, bias=False), w2=nn.Linear(F, C, bias=False),
                                               w3=nn.Linear(C, F, bias=False)))
        self.attention_norm, self.ffn_norm = TorchRMSNorm(C, config.norm_eps), TorchRMSNorm(C, config.norm_eps)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))

    def forward(self, x):
        B, T, _ = x.shape
        H, Hkv, D = self.config.n_heads, self.config.n_kv_heads, self.config.head_dim
        # Computed here in float32: a buffer would be rounded to the model's dtype by .to(float16).
        d = torch.arange(0, D, 2, device=x.device, dtype=torch.float32)
        inv_freq = self.config.rope_theta ** (-d / D)
        angles = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * inv_freq[None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)

        def rotate_t(a):
            a1, a2 = a.chunk(2, dim=-1)
            return torch.cat([a1 * cos - a2 * sin, a2 * cos + a1 * sin], dim=-1)

        att = self.attention
        h = self.attention_norm(x)
        q = rotate_t(att.wq(h).view(B, T, H, D).transpose(1, 2))
        k = rotate_t(att.wk(h).view(B, T, Hkv, D).transpose(1, 2)).repeat_interleave(H // Hkv, dim=1)
        v = att.wv(h).view(B, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
        sdpa = getattr(nn.functional, "scaled_dot_product_attention", None)  # torch 2.0 on
        if sdpa is not None:
            y = sdpa(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        h = x + att.wo(y.transpose(1, 2).reshape(B, T, H * D))
        f = self.ffn_norm(h)
        ff = self.feed_forward
        return h + ff.w2(nn.functional.silu(ff.w1(f)) * ff.w3(f))


def main():
    config = TINY
    block = TransformerBlock(config)
    x = np.random.default_rng(1).standard_normal((2, 13, config.dim)).astype(np.float32)
    if torch is not None:
        twin = TorchTransformerBlock(config).eval()
        load_weights(block, twin.state_dict())
        with torch.no_grad():
            want, against = twin(torch.from_numpy(x)).numpy(), f"torch {torch.__version__}"
    else:
        weights = random_weights(config)
        load_weights(block, weights)
        want, against = numpy_forward(weights, x, config), "numpy float64"
    fast = tp.compile(block, args=[tp.InputInfo(shape=(2, (1, 16, 64), config.dim), dtype=tp.float32)])
    got = to_numpy(fast(tp.Tensor(x)))
    report(f"Llama block {config} vs {against}", ref.max_relative_error(got, want), 1e-4)
    short = to_numpy(fast(tp.Tensor(x[:, :4].copy())))  # causal: a prefix does not see what follows
    report("Llama block, 4-token prefix, same executable", ref.max_relative_error(short, want[:, :4]), 1e-4)


if __name__ == "__main__":
    main()

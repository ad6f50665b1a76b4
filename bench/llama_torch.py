"""bench/llm.py's peer on the CPU: a Llama-family decoder written in plain torch (eager, float32,
each layer's keys and values in a cache allocated once for the whole run), as a torch user without
transformers writes one. The checkpoint's safetensors are read as llm_reference.py reads them, so
the peer owes nothing to Tripy. It computes what Tripy's generator does: a prefill of the prompt,
then greedy decode steps of one token each."""

import math
import statistics
import time

import numpy as np

from llm_reference import checkpoint_arrays, float32, head_dim, rms_norm, rope_frequencies, rotate


class TorchLlama:
    """The checkpoint's weights as torch tensors (float32; q/k/v and gate/up each one matrix, as a
    hand-written decoder stacks them), rotary tables for `length` positions, and `batch` sequences'
    caches."""

    def __init__(self, directory, c, batch, length, torch):
        self.torch, self.c = torch, c
        arrays = checkpoint_arrays(directory)

        def f32(name):
            return float32(arrays[name], torch)

        self.H, self.G, self.D = c["num_attention_heads"], c["num_key_value_heads"], head_dim(c)
        self.eps = c["rms_norm_eps"]
        self.embed = f32("model.embed_tokens.weight")
        self.head = f32("lm_head.weight") if "lm_head.weight" in arrays else self.embed
        self.norm = f32("model.norm.weight")
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            self.layers.append(dict(
                qkv=torch.cat([f32(p + f"self_attn.{n}_proj.weight") for n in "qkv"]).T.contiguous(),
                o=f32(p + "self_attn.o_proj.weight").T.contiguous(),
                gate_up=torch.cat([f32(p + f"mlp.{n}_proj.weight") for n in ("gate", "up")]).T.contiguous(),
                down=f32(p + "mlp.down_proj.weight").T.contiguous(),
                ln1=f32(p + "input_layernorm.weight"), ln2=f32(p + "post_attention_layernorm.weight")))
        angles = np.arange(length)[:, None] * rope_frequencies(c)[None, :]
        self.cos = torch.from_numpy(np.cos(angles).astype(np.float32))
        self.sin = torch.from_numpy(np.sin(angles).astype(np.float32))
        shape = (batch, self.G, length, self.D)
        self.k = [torch.zeros(shape) for _ in self.layers]
        self.v = [torch.zeros(shape) for _ in self.layers]

    def rms(self, x, w):
        return rms_norm(x, w, self.eps, self.torch)

    def __call__(self, tokens, start):
        """The next token of each sequence after `tokens` (B, T) at positions start .. start + T - 1,
        the caches updated; and the last position's logits."""
        torch = self.torch
        B, T = tokens.shape
        H, G, D = self.H, self.G, self.D
        cos, sin = self.cos[start : start + T], self.sin[start : start + T]
        end = start + T
        x = self.embed[tokens]
        # A query at position p sees keys up to p: within the new tokens, a causal mask.
        mask = torch.full((T, end), float("-inf")).triu(start + 1) if T > 1 else None
        for layer, kc, vc in zip(self.layers, self.k, self.v):
            h = self.rms(x, layer["ln1"]) @ layer["qkv"]
            q, k, v = h.split([H * D, G * D, G * D], dim=-1)
            q = rotate(q.view(B, T, H, D).transpose(1, 2), cos, sin, torch)
            kc[:, :, start:end] = rotate(k.view(B, T, G, D).transpose(1, 2), cos, sin, torch)
            vc[:, :, start:end] = v.view(B, T, G, D).transpose(1, 2)
            # Grouped-query attention: each KV head serves H / G query heads.
            q = q.reshape(B, G, H // G * T, D)
            scores = q @ kc[:, :, :end].transpose(-1, -2) / math.sqrt(D)
            if mask is not None:
                scores = scores.view(B, G, H // G, T, end) + mask
            y = (scores.softmax(-1).view(B, G, H // G * T, end) @ vc[:, :, :end]).view(B, H, T, D)
            x = x + y.transpose(1, 2).reshape(B, T, H * D) @ layer["o"]
            gate, up = (self.rms(x, layer["ln2"]) @ layer["gate_up"]).chunk(2, dim=-1)
            x = x + (torch.nn.functional.silu(gate) * up) @ layer["down"]
        logits = self.rms(x[:, -1], self.norm) @ self.head.T
        return logits.argmax(-1, keepdim=True), logits


def bench_torch_cpu(directory, c, ids, steps, check_steps, repeats, torch):
    """Decode ms a step (the median of `repeats` runs of `steps` steps after a fresh prefill), the
    prefill's ms (the median of 3), the greedy tokens of `check_steps` steps (the prefill's first),
    and the prompt's last logits, as bench_torch returns them."""
    batch, prompt = ids.shape
    model = TorchLlama(directory, c, batch, prompt + max(steps, check_steps) + 8, torch)
    tokens = torch.from_numpy(ids.astype(np.int64))

    def run(n, keep):
        first, logits = model(tokens, 0)
        out, cur = [first], first
        t0 = time.perf_counter()
        for i in range(n):
            cur, _ = model(cur, prompt + i)
            if keep:
                out.append(cur)
        return (time.perf_counter() - t0) * 1e3 / max(n, 1), out, logits

    with torch.inference_mode():
        _, out, logits = run(check_steps - 1, True)
        greedy = torch.cat(out, dim=1).numpy()
        ms = statistics.median(run(steps, False)[0] for _ in range(repeats))
        prefill = []
        for _ in range(3):
            t0 = time.perf_counter()
            model(tokens, 0)
            prefill.append((time.perf_counter() - t0) * 1e3)
    return dict(ms=ms, prefill_ms=statistics.median(prefill), tokens=greedy, logits=logits.numpy())

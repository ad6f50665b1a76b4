"""Greedy generation with GPT-2 over a KV cache: a compiled prefill and a compiled decode step.

    prefill = tp.compile(step, args=[ids (B, T <= block_size), pos (1,), *caches])
    decode  = tp.compile(step, args=[ids (B, 1),               pos (1,), *caches])

`step` is `GPT.cached` (examples/gpt2.py). Each layer's key and value caches, (B, H, block_size, D),
are runtime inputs declared with tp.InputInfo(donate=True): tp.update_slice writes each step's new
rows into them in place and the executables return those same tensors, so no step copies a cache.
The position `pos` is an int32 tensor that kernels read at run time, so every decode step has the
same shapes: on a GPU each step replays one CUDA graph.

The tokens (and each step's logits) are checked against torch's greedy decoding on the same random
weights where torch is installed (the twin recomputes the whole sequence each step), otherwise
against the float64 numpy reference. The attention and MLP weights are scaled up (SHARPEN): with
GPT-2's initialisation a random model repeats its last token forever, which would check little.

Run: python examples/gpt2_generate.py [--tokens 64] [--prompt 8]
"""

import argparse
import concurrent.futures
import os
import sys

import numpy as np

import tripy as tp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402
from model_utils import optional_torch  # noqa: E402

torch = optional_torch()

# Small enough for CI and the numpy reference; positions for a prompt plus 64 new tokens.
SMALL = gpt2.GPTConfig(block_size=96, vocab_size=211, n_layer=2, n_head=4, n_embd=64)
SHARPEN = 16.0  # attention and MLP weights x 16: greedy decoding then visits dozens of tokens


def sharpened(name):
    return (".attn." in name or ".mlp." in name) and name.endswith("weight")


def compile_steps(model, batch=1, dtype=tp.float32, prefill_opt=16):
    """The prefill (any prompt length up to block_size) and decode (one token) executables of
    ``model.cached``; the caches are donated, so both update them in place."""
    n = model.config.block_size
    caches = [tp.InputInfo(model.cache_shape(batch), dtype=dtype, donate=True)] * (2 * model.config.n_layer)
    pos = tp.InputInfo((1,), dtype=tp.int32)

    def step(idx, pos, *caches):
        logits, updated = model.cached(idx, pos, caches)
        return (logits, *updated)

    def compile_prefill():
        return tp.compile(step, args=[tp.InputInfo((batch, (1, min(prefill_opt, n), n)), tp.int32), pos, *caches])

    def compile_decode():
        return tp.compile(step, args=[tp.InputInfo((batch, 1), tp.int32), pos, *caches])

    # Two threads: tp.compile gives up the GIL while it compiles, so the two compiles overlap.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        prefill, decode = pool.submit(compile_prefill), pool.submit(compile_decode)
        return prefill.result(), decode.result()


def empty_caches(model, batch=1, dtype=tp.float32):
    """Zeroed caches: positions not yet written are masked out, but must not hold NaN (0 x NaN)."""
    return [tp.zeros(model.cache_shape(batch), dtype=dtype) for _ in range(2 * model.config.n_layer)]


def position(p):
    return tp.Tensor(np.array([p], dtype=np.int32))


def generate(prefill, decode, model, prompt, n_tokens, dtype=tp.float32, logits_out=None):
    """Greedy decoding: int32 prompt ids (B, T) -> the next ``n_tokens`` ids (B, n_tokens) as numpy.
    Each step's logits (B, vocab) are appended to ``logits_out`` when it is a list."""
    B, T = prompt.shape
    if T + n_tokens - 1 > model.config.block_size:
        raise ValueError(f"{T} prompt tokens + {n_tokens} new ones exceed block_size {model.config.block_size}")
    logits, *caches = prefill(tp.Tensor(prompt), position(0), *empty_caches(model, B, dtype))
    tokens = []
    for i in range(n_tokens):
        nxt = tp.cast(tp.argmax(logits, dim=-1), tp.int32)  # (B, 1), stays on the device
        tokens.append(nxt)
        if logits_out is not None:
            logits_out.append(np.asarray(logits)[:, -1].astype(np.float64))
        if i + 1 < n_tokens:
            logits, *caches = decode(nxt, position(T + i), *caches)
    return np.concatenate([np.asarray(t) for t in tokens], axis=1)


def reference_tokens(prompt, n_tokens, config, twin=None, weights=None, logits_out=None):
    """The same greedy decoding by full recompute: torch's twin, or the float64 numpy model."""
    seq = prompt.astype(np.int64)
    for _ in range(n_tokens):
        if twin is not None:
            with torch.no_grad():
                logits = twin(torch.from_numpy(seq))[:, -1].double().numpy()
        else:
            logits = gpt2.numpy_forward(weights, seq, config)[:, -1]
        if logits_out is not None:
            logits_out.append(logits)
        seq = np.concatenate([seq, logits.argmax(-1)[:, None]], axis=1)
    return seq[:, prompt.shape[1]:]


def model_and_reference(config):
    """A Tripy GPT with sharpened random weights, and the reference holding the same weights:
    (model, twin, None) with torch, else (model, None, numpy weights)."""
    model = gpt2.GPT(config)
    if torch is not None:
        twin = gpt2.TorchGPT(config).eval()
        with torch.no_grad():
            for name, p in twin.named_parameters():
                if sharpened(name):
                    p.mul_(SHARPEN)
        gpt2.load_gpt(model, twin.state_dict())
        return model, twin, None
    weights = gpt2.random_weights(config)
    weights = {k: v * SHARPEN if sharpened(k) else v for k, v in weights.items()}
    gpt2.load_gpt(model, weights)
    return model, None, weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=8, help="prompt length")
    args = parser.parse_args()
    config = SMALL
    model, twin, weights = model_and_reference(config)
    against = f"torch {torch.__version__}" if twin is not None else "numpy float64"
    prompt = np.random.default_rng(4).integers(0, config.vocab_size, (1, args.prompt)).astype(np.int32)

    prefill, decode = compile_steps(model)
    got_logits, want_logits = [], []
    got = generate(prefill, decode, model, prompt, args.tokens, logits_out=got_logits)
    want = reference_tokens(prompt, args.tokens, config, twin, weights, logits_out=want_logits)
    print(f"generated: {got[0].tolist()}")
    first = np.flatnonzero(got[0] != want[0])
    verdict = "agree" if first.size == 0 else "DISAGREE"
    where = "" if first.size == 0 else f" (first difference at token {first[0]}: {got[0, first[0]]} vs {want[0, first[0]]})"
    print(f"GPT-2 {config}, {args.tokens} greedy tokens with a KV cache vs {against}: {verdict}{where}")
    # Each step's logits, while the two sequences are the same (after a difference they see other tokens).
    steps = args.tokens if first.size == 0 else first[0] + 1
    err = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got_logits[:steps], want_logits[:steps]))
    print(f"logits of each step (cached decode vs full recompute): max relative error {err:.2e} "
          f"(tolerance 1e-4): {'agree' if err <= 1e-4 else 'DISAGREE'}")
    if verdict != "agree" or err > 1e-4:
        raise SystemExit("generated tokens or logits disagree")


if __name__ == "__main__":
    main()

"""A decode step's attention alone on the GPU: one query row per head over a KV cache of which the
first `pos + 1` rows are written (the Llama model's form: caches (B, S, Hkv, D) read through a
transpose, the mask `key <= pos` that the compiler turns into a run-time causal offset), Tripy's
kernel against torch's scaled_dot_product_attention over the written rows (GQA, bfloat16) in the
same run. GPU time per call of each system's attention kernels, from torch.profiler.

--cold-l2 writes 256 MB before every call (its kernel is not counted), so the cache rows come from
device memory as in a model's step, where each layer's weights pass through the L2 between two
attentions; without it they stay in the L2 from call to call.

Run: python bench/attention_decode.py [--shapes 1b,8b] [--batches 1,8] [--positions 128,1024,4000]
     [--cold-l2]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import empty_caches  # noqa: E402

empty_caches()

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tripy as tp  # noqa: E402

# Heads, kv heads, head size: Llama-3.2-1B and Llama-3-8B.
SHAPES = {"1b": (32, 8, 64), "8b": (32, 8, 128)}


def tripy_attention(B, H, Hkv, D, S):
    def step(q, k_cache, v_cache, pos):
        visible = tp.iota((1, S), dim=1, dtype=tp.int32) <= tp.iota((1, S), dim=0, dtype=tp.int32) + pos
        y = tp.scaled_dot_product_attention(q, k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                            attn_mask=visible.reshape((1, 1, 1, S)))
        return y

    return tp.compile(step, args=[tp.InputInfo((B, H, 1, D), tp.bfloat16), tp.InputInfo((B, S, Hkv, D), tp.bfloat16),
                                  tp.InputInfo((B, S, Hkv, D), tp.bfloat16), tp.InputInfo((1,), tp.int32)])


def kernel_us(fn, calls, match):
    """GPU microseconds per call of `fn` in the kernels whose name contains one of `match`."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total, names = 0.0, set()
    for e in prof.events():
        if e.device_time > 0 and any(m in e.name for m in match):
            total += e.device_time
            names.add(e.name[:60])
    return total / calls, sorted(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1b,8b")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--positions", default="128,1024,4000")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--cold-l2", action="store_true", help="evict the L2 before every call")
    args = parser.parse_args()
    tp.config.default_device = "gpu"
    flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda") if args.cold_l2 else None

    def cold(fn):
        return fn if flush is None else (lambda: (flush.zero_(), fn())[1])

    rng = np.random.default_rng(0)
    print("shape | batch | pos | tripy_us | torch_us | torch/tripy | kv_MB | tripy_TB_s | kernels")
    for shape in args.shapes.split(","):
        H, Hkv, D = SHAPES[shape]
        for B in map(int, args.batches.split(",")):
            S = max(map(int, args.positions.split(","))) + 64
            exe = tripy_attention(B, H, Hkv, D, S)
            q = torch.from_numpy(rng.standard_normal((B, H, 1, D), np.float32)).cuda().bfloat16()
            kc = torch.from_numpy(rng.standard_normal((B, S, Hkv, D), np.float32)).cuda().bfloat16()
            vc = torch.from_numpy(rng.standard_normal((B, S, Hkv, D), np.float32)).cuda().bfloat16()
            tq, tk, tv = tp.Tensor(q), tp.Tensor(kc), tp.Tensor(vc)
            for pos in map(int, args.positions.split(",")):
                tpos = tp.Tensor(np.array([pos], np.int32))
                tri_us, tri_names = kernel_us(cold(lambda: exe(tq, tk, tv, tpos)), args.calls, ["tripy_attention"])
                k = kc[:, : pos + 1].transpose(1, 2).contiguous()
                v = vc[:, : pos + 1].transpose(1, 2).contiguous()

                def peer():
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

                torch_us, _ = kernel_us(cold(peer), args.calls, ["flash", "attention", "fmha", "sdpa", "gemv", "softmax"])
                got = torch.from_dlpack(exe(tq, tk, tv, tpos)).float()
                err = (torch.linalg.norm(got - peer().float()) / torch.linalg.norm(peer().float())).item()
                assert err < 2e-2, err
                kv_mb = 2 * B * Hkv * (pos + 1) * D * 2 / 1e6
                print(f"{shape} | {B} | {pos} | {tri_us:.2f} | {torch_us:.2f} | {torch_us / tri_us:.2f} | {kv_mb:.2f} | "
                      f"{kv_mb / tri_us:.2f} | {','.join(tri_names)}", flush=True)


if __name__ == "__main__":
    main()

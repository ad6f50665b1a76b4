"""Few-row products (a decode step's x @ W.T) on the GPU: the weight bandwidth of Tripy's
dot with the GEMV kernel forced (TRIPY_GEMV=1), its TMA form forced where it applies (TRIPY_GEMV=tma:
8 or more rows on sm_90), with cuBLASLt only (TRIPY_GEMV=0) and as the tuner chooses, against
torch.matmul and a device-to-device copy, for Llama-3.2-1B's shapes in bfloat16 (--shapes: also
Llama-3-8B's, and one rank's share of them over two GPUs).

Each executable multiplies one x by several weights of the same shape, inputs whose bytes together
exceed the L2 cache (as a decode step's weights do), and Tripy's profiler times each dot with CUDA
events; torch's products are timed the same way, one event pair per call. GB/s counts the weight's
bytes (x and the output are a few KB). --rows 1,8 runs each shape with 1 and with 8 rows of x
(a batch-8 step; from 8 rows the GEMV runs on tensor cores). Run: python bench/gemv_bench.py
[--quick] [--rows 1,8] [--shapes 1b,8b,8b-rank]
"""

import argparse
import os
import statistics

import torch

import tripy as tp

# W (N, K) of each model's products: qkv, o_proj, gate/up, down, and the 1B's lm_head; "8b-rank"
# is one rank's share of the 8B's over two GPUs (qkv and gate/up split by rows, o and down by K).
SHAPES = {
    "1b": [(3072, 2048), (16384, 2048), (2048, 8192), (128256, 2048)],
    "8b": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
    "8b-rank": [(3072, 4096), (4096, 2048), (14336, 4096), (4096, 7168)],
}
QUICK = False


def copies_for(nbytes):
    return max(2, -(-(256 << 20) // nbytes)) if not QUICK else 2


def copy_gbs():
    """Device-to-device copy bandwidth, read + write bytes."""
    n = (64 << 20) if QUICK else (1 << 30)
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return 2 * n / statistics.median(times[2:]) / 1e9


def torch_seconds(x, ws):
    times = []
    for rep in range(5):
        for w in ws:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.matmul(x, w.T)
            e.record()
            e.synchronize()
            if rep:
                times.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(times)


def tripy_seconds(x, ws, gemv):
    rows = x.shape[0]
    if gemv is None:
        os.environ.pop("TRIPY_GEMV", None)
    else:
        os.environ["TRIPY_GEMV"] = gemv
    n, k = ws[0].shape

    def f(x, *w):
        return tuple(x @ tp.transpose(wi, 0, 1) for wi in w)

    infos = [tp.InputInfo((rows, k), dtype=tp.bfloat16)] + [tp.InputInfo((n, k), dtype=tp.bfloat16)] * len(ws)
    exe = tp.compile(f, args=infos)
    args = [tp.Tensor(x)] + [tp.Tensor(w) for w in ws]
    outs = exe(*args)
    want = torch.matmul(x, ws[0].T).float()
    got = torch.from_dlpack(tp.cast(outs[0], tp.float32)).float()
    err = ((got - want).abs().max() / want.abs().max()).item()
    assert err < 2e-2, f"tripy differs from torch by {err}"
    times = []
    for _ in range(3):
        prof = exe.profile(*args)
        times += [r["ms"] * 1e-3 for r in prof.rows if r["kind"] == "dot"]
    os.environ.pop("TRIPY_GEMV", None)
    return statistics.median(times)


def main():
    global QUICK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes and copies only")
    parser.add_argument("--rows", default="1", help="rows of x, comma-separated (1 to 16)")
    parser.add_argument("--shapes", default="1b", help=f"comma-separated, of: {', '.join(SHAPES)}")
    args = parser.parse_args()
    shapes = []
    for name in args.shapes.split(","):
        if name not in SHAPES:
            parser.error(f"--shapes: unknown '{name}' (choose from {', '.join(SHAPES)})")
        shapes += SHAPES[name]
    QUICK = args.quick
    print(f"device: {torch.cuda.get_device_name()}")
    copy = copy_gbs()
    print(f"device-to-device copy: {copy:.0f} GB/s (read + write)")
    print(f"{'rows':>4} {'W (N, K)':>16} {'MB':>7} | {'tripy':>12} {'GEMV':>12} {'GEMV TMA':>12} {'cuBLASLt':>12} "
          f"{'torch':>12} | GB/s, % of copy")
    for rows, (n, k) in [(int(r), s) for r in args.rows.split(",") for s in shapes]:
        if QUICK and n * k > 16384 * 2048:
            continue
        nbytes = n * k * 2
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=g)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5 for _ in range(copies_for(nbytes))]
        cells = []
        runs = (tripy_seconds(x, ws, None), tripy_seconds(x, ws, "1"), tripy_seconds(x, ws, "tma"),
                tripy_seconds(x, ws, "0"), torch_seconds(x, ws))
        for seconds in runs:
            gbs = nbytes / seconds / 1e9
            cells.append(f"{gbs:6.0f} {100 * gbs / copy:3.0f}%")
        print(f"{rows:>4} {str((n, k)):>16} {nbytes / 1e6:7.1f} | " + " ".join(f"{c:>12}" for c in cells), flush=True)
        del ws


if __name__ == "__main__":
    main()

"""Compile time and peak memory against weight bytes: GPT-2-width decoders (d=768, vocabulary
50257, weights from numpy) of several depths, each compiled in a fresh process on the CPU.

    python bench/compile_scaling.py                 # 0, 6, 12, 24 layers at GPT-2 width
    python bench/compile_scaling.py --layers 2 --width 64 --vocab 512   # quick (the test suite)

One JSON object per configuration: weight MiB, compile seconds, the process's peak RSS before and
after compiling (MiB), and what the compile added beyond the weights it was given.
"""

import argparse
import json
import resource
import subprocess
import sys
import time


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child(layers, width, vocab, seq):
    import numpy as np

    import tripy as tp

    rng = np.random.default_rng(0)

    def weight(*shape):
        return tp.Tensor((rng.standard_normal(shape) * 0.02).astype(np.float32))

    class Block(tp.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = tp.LayerNorm(width)
            self.attn = tp.Linear(width, 3 * width)
            self.proj = tp.Linear(width, width)
            self.ln_2 = tp.LayerNorm(width)
            self.fc = tp.Linear(width, 4 * width)
            self.out = tp.Linear(4 * width, width)

        def __call__(self, x):
            q, k, v = tp.split(self.attn(self.ln_1(x)), 3, dim=-1)
            att = tp.softmax((q @ tp.transpose(k, -2, -1)) * (1.0 / width**0.5), dim=-1)
            x = x + self.proj(att @ v)
            return x + self.out(tp.gelu(self.fc(self.ln_2(x))))

    class Model(tp.Module):
        def __init__(self):
            super().__init__()
            self.wte = weight(vocab, width)
            self.blocks = [Block() for _ in range(layers)]
            self.ln_f = tp.LayerNorm(width)

        def __call__(self, x):
            for b in self.blocks:
                x = b(x)
            return self.ln_f(x) @ tp.transpose(self.wte, 0, 1)  # tied lm_head

    model = Model()
    # Weights as a checkpoint would give them: numpy arrays loaded into the parameters.
    state = {name: weight(*p.shape) for name, p in model.state_dict().items()}
    model.load_state_dict(state)
    for p in model.state_dict().values():
        p.eval()
    nbytes = sum(int(np.prod(p.shape)) * 4 for p in model.state_dict().values())
    before = _peak_mib()
    start = time.perf_counter()
    tp.compile(model, args=[tp.InputInfo((1, seq, width), dtype=tp.float32)])
    seconds = time.perf_counter() - start
    after = _peak_mib()
    return {
        "layers": layers,
        "width": width,
        "weights_mib": round(nbytes / 2**20, 1),
        "compile_s": round(seconds, 3),
        "peak_rss_before_mib": round(before, 1),
        "peak_rss_after_mib": round(after, 1),
        "compile_extra_mib": round(after - before, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="0,6,12,24", help="comma-separated depths")
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_child(args.child, args.width, args.vocab, args.seq)))
        return
    rows = []
    for layers in [int(n) for n in args.layers.split(",")]:
        cmd = [sys.executable, __file__, "--child", str(layers), "--width", str(args.width), "--vocab", str(args.vocab),
               "--seq", str(args.seq)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        print(out, flush=True)
        rows.append(json.loads(out))
    print(f"{'layers':>6} {'weights MiB':>11} {'compile s':>9} {'ms/MiB':>7} {'extra MiB':>9}")
    for r in rows:
        per = 1000 * r["compile_s"] / max(r["weights_mib"], 1e-9)
        print(f"{r['layers']:>6} {r['weights_mib']:>11} {r['compile_s']:>9} {per:>7.2f} {r['compile_extra_mib']:>9}")


if __name__ == "__main__":
    main()

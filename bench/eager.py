"""Eager mode against torch eager on one device, in one run: Tripy's time per op (evaluated, then
waited for) divided by torch's for the same op.

Cases: `a + b` at 2x3 (per-op overhead is all there is) and 1000x1000, LayerNorm + Linear + GELU
evaluated together (16x256 -> 512), each a cache hit after the first call; then the first eager op
of a fresh process (`import tripy`, two tensors, `(a + b)` read back), twice: with an empty kernel
cache and with the cache the first process left. On the GPU each call is waited for, so a row is
the time until the result exists: Tripy's `eval()` returns only then, and torch waits for its
current stream (cheaper than torch.cuda.synchronize, which waits for the whole device). The two
systems are timed in alternating rounds. Each case first checks Tripy against numpy.

Run: python bench/eager.py [--device cpu|gpu] [--quick]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tripy as tp  # noqa: E402
from timing import median_seconds  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

FIRST_OP = """
import time
t0 = time.perf_counter()
import numpy as np
import tripy as tp
t1 = time.perf_counter()
tp.config.default_device = {device!r}
a = tp.Tensor(np.ones((2, 3), dtype=np.float32))
print(t1 - t0, time.perf_counter() - t1, float(np.asarray(tp.copy(a + a, tp.device("cpu")))[0, 0]))
"""


def random_init(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def np_gelu(x):
    """GELU with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and this
    stays vectorised, so numpy is timed at its best where it is a peer (bench/cpu_bench.py)."""
    sign, a = np.sign(x), np.abs(x) * np.float32(1.0 / np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (0.5 * x * (1.0 + sign * (1.0 - poly * np.exp(-a * a)))).astype(np.float32)


def add_case(rows, cols, tdev):
    """`a + b` evaluated eagerly; its numpy reference; torch's twin on `tdev` (None: no torch)."""
    a_np = (np.arange(rows * cols, dtype=np.float32) / np.float32(rows * cols)).reshape(rows, cols)
    b_np = np.ones((rows, cols), dtype=np.float32)
    a, b = tp.Tensor(a_np), tp.Tensor(b_np)
    a.eval()
    b.eval()
    twin = None
    if tdev is not None:
        a_t, b_t = torch.from_numpy(a_np).to(tdev), torch.from_numpy(b_np).to(tdev)
        twin = lambda: a_t + b_t  # noqa: E731
    return (lambda: (a + b).eval()), (lambda: a_np + b_np), twin


def layernorm_linear_gelu_case(batch, features, hidden, tdev):
    """tp.LayerNorm, tp.Linear and tp.gelu called eagerly and evaluated together, as a user
    debugging a block would; its numpy reference; torch's twin F.layer_norm, F.linear, F.gelu."""
    ln, linear = tp.LayerNorm(features), tp.Linear(features, hidden)
    w = {"ln.weight": 1.0 + random_init((features,), 1), "ln.bias": random_init((features,), 2),
         "linear.weight": random_init((hidden, features), 3), "linear.bias": random_init((hidden,), 4)}
    ln.load_state_dict({"weight": tp.Tensor(w["ln.weight"]), "bias": tp.Tensor(w["ln.bias"])})
    linear.load_state_dict({"weight": tp.Tensor(w["linear.weight"]), "bias": tp.Tensor(w["linear.bias"])})
    x_np = np.linspace(-2.0, 2.0, batch * features, dtype=np.float32).reshape(batch, features)
    x = tp.Tensor(x_np)
    x.eval()
    w_t = np.ascontiguousarray(w["linear.weight"].T)

    def reference():
        mean = x_np.mean(axis=-1, keepdims=True)
        normed = (x_np - mean) / np.sqrt(((x_np - mean) ** 2).mean(axis=-1, keepdims=True) + np.float32(1e-5))
        return np_gelu((normed * w["ln.weight"] + w["ln.bias"]) @ w_t + w["linear.bias"])
    twin = None
    if tdev is not None:
        t = {name: torch.from_numpy(value).to(tdev) for name, value in w.items()}
        x_t = torch.from_numpy(x_np).to(tdev)
        F = torch.nn.functional

        def twin():
            return F.gelu(F.linear(F.layer_norm(x_t, (features,), t["ln.weight"], t["ln.bias"], 1e-5),
                                   t["linear.weight"], t["linear.bias"]))
    return (lambda: tp.gelu(linear(ln(x))).eval()), reference, twin


def first_op_seconds(device, cache_dir):
    """(import seconds, first-op seconds) of a fresh Python process using `cache_dir` as its kernel cache."""
    env = dict(os.environ, TRIPY_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", FIRST_OP.format(device=device)], env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the first-op process failed:\n{out.stderr}")
    import_s, op_s, value = map(float, out.stdout.split())
    if value != 2.0:
        raise SystemExit(f"the first-op process computed 1 + 1 = {value}")
    return import_s, op_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), help="default: gpu where Tripy sees one")
    parser.add_argument("--quick", action="store_true", help="short timings (CI)")
    args = parser.parse_args()
    from tripy import _C

    device = args.device or ("gpu" if _C.gpu_available() else "cpu")
    tp.config.default_device = device
    tdev = None
    if torch is not None and (device == "cpu" or torch.cuda.is_available()):
        tdev = "cuda" if device == "gpu" else "cpu"
    torch_sync = lambda: None  # noqa: E731
    if device == "gpu" and tdev:
        torch_sync = torch.cuda.current_stream().synchronize
    budget = 0.3 if args.quick else 2.0
    cases = [("a + b, 2x3", add_case(2, 3, tdev)), ("a + b, 1000x1000", add_case(1000, 1000, tdev)),
             ("LayerNorm+Linear+GELU, 16x256->512", layernorm_linear_gelu_case(16, 256, 512, tdev))]
    peer = f"torch {torch.__version__} eager" if tdev else "no torch"
    print(f"tripy eager on {device}, against {peer}; median time per op, waited for")
    header = f"{'case':<40} {'tripy':>11} {'torch':>11} {'ratio':>7}"
    print(header + "\n" + "-" * len(header))
    for name, (run, reference, twin) in cases:
        got = np.asarray(tp.copy(run(), tp.device("cpu")))
        if not np.allclose(got, reference(), rtol=1e-4, atol=1e-4):
            raise SystemExit(f"{name}: Tripy and numpy disagree")
        # Each op waited for before the next (the timer's batches then hold whole ops). The two
        # systems take turns, five rounds each, so that a drift of the machine (clocks, another
        # process) falls on both; a row is the median of each system's rounds.
        rounds = [(median_seconds(run, budget / 5),
                   median_seconds(lambda: (twin(), torch_sync()), budget / 5) if twin else None) for _ in range(5)]
        tri = statistics.median(r[0] for r in rounds)
        ref = statistics.median(r[1] for r in rounds) if twin else None
        ratio = f"{tri / ref:>7.2f}" if ref else f"{'-':>7}"
        print(f"{name:<40} {tri * 1e6:>8.1f} us {ref * 1e6 if ref else float('nan'):>8.1f} us {ratio}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tripy-eager-cache-") as cache:
        for label in ("empty kernel cache", "warm kernel cache"):
            import_s, op_s = first_op_seconds(device, cache)
            print(f"first op of a process, {label}: {op_s * 1e3:.1f} ms (import tripy {import_s * 1e3:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()

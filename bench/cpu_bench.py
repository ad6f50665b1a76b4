"""CPU benchmarks against numpy: Tripy's time per call divided by numpy's for the same math.

Cases: one eager op on a cache hit, the seeds' compiled MLP and GEGLU, and a larger compiled MLP.
Each case first checks that Tripy and numpy agree, then reports the median over many timed batches
(calls: how many Tripy calls were timed).

Run: python bench/cpu_bench.py [--quick]
"""

import argparse
import os
import statistics
import time

# Benchmarks run on the CPU whatever the machine has; set before tripy reads it.
os.environ["TRIPY_DEVICE"] = "cpu"

import numpy as np  # noqa: E402

import tripy as tp  # noqa: E402


def np_erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and this keeps the reference
    # vectorised, so numpy is timed at its best.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def np_gelu(x):
    return (0.5 * x * (1.0 + np_erf(x * np.float32(1.0 / np.sqrt(2.0))))).astype(np.float32)


def placeholder(shape):
    """The deterministic values tp.Module parameters start with (arange reshaped)."""
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def random_init(shape):
    """Weights scaled by 1/sqrt(fan_in), so a large MLP's outputs stay near 1 and compare tightly."""
    rng = np.random.default_rng(sum(shape))
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


class MLP(tp.Module):
    def __init__(self, embd_size, hidden):
        super().__init__()
        self.c_fc = tp.Linear(embd_size, hidden)
        self.c_proj = tp.Linear(hidden, embd_size)

    def __call__(self, x):
        return self.c_proj(tp.gelu(self.c_fc(x)))


class GEGLU(tp.Module):
    def __init__(self, in_dim, out_dim):
        self.proj = tp.Linear(in_dim, out_dim * 2)
        self.out_dim = out_dim

    def __call__(self, x):
        proj = self.proj(x)
        x, gate = tp.split(proj, 2, proj.rank - 1)
        return x * tp.gelu(gate)


def median_seconds(fn, repeats, budget_s):
    """
    Median time per call over up to ``repeats`` batches. A batch runs enough calls to last about
    10 ms, so timer overhead vanishes for microsecond calls; slow cases get fewer batches so the
    whole case stays near ``budget_s``. Returns (seconds per call, calls timed).
    """
    fn()  # warm caches (and, for eager ops, the compiled-subgraph cache)
    start = time.perf_counter()
    fn()
    one = max(time.perf_counter() - start, 1e-9)
    number = max(1, int(0.01 / one))
    repeats = max(3, min(repeats, int(budget_s / (one * number))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples), repeats * number


def mlp_case(embd_size, hidden, batch, init):
    """A compiled MLP and its numpy twin, with weights loaded from the same arrays."""
    mlp = MLP(embd_size, hidden)
    weights = {
        "c_fc.weight": init((hidden, embd_size)),
        "c_fc.bias": init((hidden,)),
        "c_proj.weight": init((embd_size, hidden)),
        "c_proj.bias": init((embd_size,)),
    }
    mlp.load_state_dict({name: tp.Tensor(value) for name, value in weights.items()})
    fast = tp.compile(mlp, args=[tp.InputInfo(shape=(batch, embd_size), dtype=tp.float32)])

    x = np.linspace(-1.0, 1.0, batch * embd_size, dtype=np.float32).reshape(batch, embd_size)
    w_fc_t = np.ascontiguousarray(weights["c_fc.weight"].T)
    w_proj_t = np.ascontiguousarray(weights["c_proj.weight"].T)

    def reference():
        return np_gelu(x @ w_fc_t + weights["c_fc.bias"]) @ w_proj_t + weights["c_proj.bias"]

    inp = tp.Tensor(x)
    inp.eval()
    return (lambda: fast(inp).eval()), reference


def geglu_case():
    fast = tp.compile(GEGLU(2, 1), args=[tp.InputInfo(shape=(1, 2), dtype=tp.float32)])
    x = np.ones((1, 2), dtype=np.float32)
    weight_t = np.ascontiguousarray(placeholder((2, 2)).T)
    bias = placeholder((2,))

    def reference():
        proj = x @ weight_t + bias
        return proj[:, :1] * np_gelu(proj[:, 1:])

    inp = tp.Tensor(x)
    inp.eval()
    return (lambda: fast(inp).eval()), reference


def eager_add_case():
    a_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    b_np = np.ones((2, 3), dtype=np.float32)
    a, b = tp.Tensor(a_np), tp.Tensor(b_np)
    a.eval()
    b.eval()
    return (lambda: (a + b).eval()), (lambda: a_np + b_np)


def check(name, run_tripy, run_numpy):
    got = np.asarray(run_tripy().tolist(), dtype=np.float32)
    expected = run_numpy()
    if not np.allclose(got, expected, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"{name}: Tripy and numpy disagree:\n{got}\nvs\n{expected}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repeats and a smaller large MLP (for CI)")
    args = parser.parse_args()

    repeats, budget_s = (5, 0.5) if args.quick else (31, 10.0)
    large = (256, 1024, 16) if args.quick else (1024, 4096, 64)
    cases = [
        ("eager a + b, 2x3 (cache hit)", eager_add_case()),
        ("compiled quickstart MLP, embd 2, (1, 2)", mlp_case(2, 8, 1, placeholder)),
        ("compiled quickstart GEGLU, (1, 2)", geglu_case()),
        (f"compiled MLP {large[0]}->{large[1]}->{large[0]}, batch {large[2]}",
         mlp_case(large[0], large[1], large[2], random_init)),
    ]

    print(f"tripy on {tp.Tensor([0.0]).device}, numpy {np.__version__}, {os.cpu_count()} CPU cores")
    print("median time per call over timed batches; ratio = tripy time / numpy time (lower is better)\n")
    header = f"{'case':<44} {'tripy':>12} {'numpy':>12} {'ratio':>8} {'calls':>8}"
    print(header)
    print("-" * len(header))
    for name, (run_tripy, run_numpy) in cases:
        check(name, run_tripy, run_numpy)
        tripy_s, tripy_calls = median_seconds(run_tripy, repeats, budget_s)
        numpy_s, _ = median_seconds(run_numpy, repeats, budget_s)
        times = f"{tripy_s * 1e6:>9.1f} us {numpy_s * 1e6:>9.1f} us"
        print(f"{name:<44} {times} {tripy_s / numpy_s:>8.2f} {tripy_calls:>8}")


if __name__ == "__main__":
    main()

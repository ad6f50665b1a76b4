"""CPU benchmarks against numpy and torch: Tripy's time per call divided by each peer's for the
same math, all measured in the same run.

Cases: eager ops on cache hits (`a + b` at 2x3, where per-op overhead is all there is, and at
1000x1000; LayerNorm + Linear + GELU evaluated as one graph), the seeds' compiled MLP and GEGLU,
a larger compiled MLP, and weight-only products (one row of x against an int8 or int4 weight of
8192 x 2048, a decode step's, and 128 rows in int4, a prefill's; numpy multiplying the dequantized
float32 weight). The eager cases also run in torch eager where torch is importable
(on tensors that need no gradient, so autograd records nothing). Each case first checks that Tripy and
numpy agree, then reports the median over many timed batches (calls: how many Tripy calls were
timed).

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
from eager import add_case, layernorm_linear_gelu_case, np_gelu  # noqa: E402  (the eager cases, both devices)

try:  # the peer of the eager cases, where present
    import torch  # noqa: E402
except ImportError:
    torch = None


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
    return (lambda: fast(inp).eval()), reference, None


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
    return (lambda: fast(inp).eval()), reference, None


def weight_only_case(mode, in_features, out_features, rows=1):
    """A compiled Linear quantized as the LLM loader quantizes (tripy/llm/quantize.py) and numpy's
    x @ W.T on the weight it holds, dequantized."""
    from tripy.llm.quantize import quantize_weight

    weight = tp.Tensor(random_init((out_features, in_features)))
    entries = quantize_weight(weight, mode, "weight")
    int4 = mode == "int4-weight-only"
    linear = tp.Linear(in_features, out_features, bias=False, quant_dtype=tp.int4 if int4 else tp.int8,
                       weight_quant_dim=None if int4 else 0)
    linear.load_state_dict(entries)
    q = np.asarray(tp.cast(entries["weight"], tp.float32))
    scale = np.asarray(entries["weight_scale"])
    if int4:
        group = in_features // scale.shape[1]
        zero = np.repeat(np.asarray(entries["weight_zero_point"]), group, axis=1)
        w_t = np.ascontiguousarray(((q - zero) * np.repeat(scale, group, axis=1)).T.astype(np.float32))
    else:
        w_t = np.ascontiguousarray((q * scale[:, None]).T.astype(np.float32))
    fast = tp.compile(linear, args=[tp.InputInfo(shape=(rows, in_features), dtype=tp.float32)])
    x = np.linspace(-1.0, 1.0, rows * in_features, dtype=np.float32).reshape(rows, in_features)
    inp = tp.Tensor(x)
    inp.eval()
    return (lambda: fast(inp).eval()), (lambda: x @ w_t), None


def check(name, run_tripy, run_numpy, run_torch):
    got = np.asarray(run_tripy(), dtype=np.float32)
    expected = run_numpy()
    if not np.allclose(got, expected, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"{name}: Tripy and numpy disagree:\n{got}\nvs\n{expected}")
    if run_torch is not None and not np.allclose(run_torch().numpy(), expected, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"{name}: torch and numpy disagree")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repeats and a smaller large MLP (for CI)")
    args = parser.parse_args()

    repeats, budget_s = (5, 0.5) if args.quick else (31, 10.0)
    tdev = "cpu" if torch is not None else None
    large = (256, 1024, 16) if args.quick else (1024, 4096, 64)
    cases = [
        ("eager a + b, 2x3 (cache hit)", add_case(2, 3, tdev)),
        ("eager a + b, 1000x1000", add_case(1000, 1000, tdev)),
        ("eager LayerNorm+Linear+GELU, 16x256->512", layernorm_linear_gelu_case(16, 256, 512, tdev)),
        ("compiled quickstart MLP, embd 2, (1, 2)", mlp_case(2, 8, 1, placeholder)),
        ("compiled quickstart GEGLU, (1, 2)", geglu_case()),
        (f"compiled MLP {large[0]}->{large[1]}->{large[0]}, batch {large[2]}",
         mlp_case(large[0], large[1], large[2], random_init)),
    ]
    wo = (512, 1024) if args.quick else (2048, 8192)
    for mode in ("int8-weight-only", "int4-weight-only"):
        cases.append((f"compiled {mode[:4]} Linear {wo[0]}->{wo[1]}, 1 row", weight_only_case(mode, *wo)))
    cases.append((f"compiled int4 Linear {wo[0]}->{wo[1]}, 128 rows", weight_only_case("int4-weight-only", *wo, 128)))

    peer = f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch is not None else ", no torch"
    print(f"tripy on {tp.Tensor([0.0]).device}, numpy {np.__version__}{peer}, {os.cpu_count()} CPU cores")
    print("median time per call over timed batches; ratio = tripy time / the peer's (lower is better)\n")
    header = f"{'case':<44} {'tripy':>11} {'numpy':>11} {'torch':>11} {'/numpy':>7} {'/torch':>7} {'calls':>7}"
    print(header)
    print("-" * len(header))
    for name, (run_tripy, run_numpy, run_torch) in cases:
        check(name, run_tripy, run_numpy, run_torch)
        time.sleep(0.5)  # OpenBLAS's threads spin for a while after numpy's last call, taking the cores
        tripy_s, tripy_calls = median_seconds(run_tripy, repeats, budget_s)
        numpy_s, _ = median_seconds(run_numpy, repeats, budget_s)
        torch_s = median_seconds(run_torch, repeats, budget_s)[0] if run_torch is not None else None
        torch_text = f"{torch_s * 1e6:>8.1f} us" if torch_s is not None else f"{'-':>11}"
        torch_ratio = f"{tripy_s / torch_s:>7.2f}" if torch_s is not None else f"{'-':>7}"
        print(f"{name:<44} {tripy_s * 1e6:>8.1f} us {numpy_s * 1e6:>8.1f} us {torch_text} "
              f"{tripy_s / numpy_s:>7.2f} {torch_ratio} {tripy_calls:>7}")


if __name__ == "__main__":
    main()

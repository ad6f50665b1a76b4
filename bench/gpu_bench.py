"""GPU benchmarks against PyTorch, measured in the same run: Tripy's compiled executables vs torch
eager and torch.compile (each checked against torch first).

Cases: the seeds' MLP (embd 2, input (1, 2), float32; per-call time), an LLM-sized MLP (d=4096,
input (8192, 4096), float16, bias + GELU; TFLOP/s), the seeds' GEGLU and an LLM-sized GEGLU,
a LayerNorm + softmax block, and fused attention against torch's SDPA ((8, 12, 1024, 64) float16
causal, GPT-2's shape; (4, 16, 2048, 128) bfloat16). Times are medians over batches of asynchronous calls, each batch
ended by a device synchronisation (so per-call numbers include launch cost, as users see it).

With --native, Tripy's side comes from bench/gpu_bench_native.cc (the same models built as
Programs by hand and run through the CUDA backend, no Python frontend), compiled here with g++
against build-gpu's libtripy_runtime_static.a and libtripy_backend_cuda_codegen.a (the builder); torch is timed on the same shapes in this process.

Then the low-precision GEMMs: int8 and float8 (sm89+) quantize/dequantize around a matmul against
the float16 GEMM of the same M, N, K (4096^3 and a decode-like 16 x 4096 x 4096), as time ratios.

Then weight-only products (--weight-only alone): x [M, K] bfloat16 @ W.T for M = 1 and 16 (decode)
at 4096 x 4096 and 14336 x 4096 (and 4096 x 14336), and M = 512 (a prefill), W in bfloat16, int8
and float8 per output feature and int4 in groups of 128 with zero points (the weight_only_dot kernel), with
torch's bfloat16 matmul in the same run; ratios are time over Tripy's bfloat16 call, and bytes/s
the weight's stored bytes per call.

Run: python bench/gpu_bench.py [--quick] [--no-torch-compile] [--native] [--quantized] [--weight-only]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

import timing  # bench/timing.py: the timing method shared with models.py

try:  # --native needs no frontend: it must run even while the Python binding does not build
    import tripy as tp
except ImportError as e:
    tp = None
    TRIPY_IMPORT_ERROR = e


def sync():
    # Tripy's stream is a blocking stream, so a device-wide synchronisation covers it too.
    torch.cuda.synchronize()


def median_seconds(fn, budget_s):
    return timing.median_seconds(fn, budget_s, sync)


def time_torch(f, x, budget_s, with_compile):
    """Seconds per call of f(x) (f(*x) for a tuple) in torch eager and under torch.compile (nan
    when skipped), and torch.compile's compile time (its first call)."""
    xs = x if isinstance(x, tuple) else (x,)
    eager_s = median_seconds(lambda: f(*xs), budget_s)
    if not with_compile:
        return eager_s, float("nan"), float("nan")
    compiled = torch.compile(f)
    compile_s, _ = timing.first_call_seconds(lambda: compiled(*xs), sync)
    return eager_s, median_seconds(lambda: compiled(*xs), budget_s), compile_s


def to_tripy(t):
    """A torch GPU tensor as a tp.Tensor on gpu:0 (zero-copy through DLPack where supported)."""
    try:
        return tp.Tensor(t)
    except Exception:
        return tp.Tensor(t.cpu().numpy(), device=tp.device("gpu"))


def to_torch(t):
    try:
        return torch.from_dlpack(t).float()
    except Exception:
        return torch.tensor(np.asarray(t.tolist(), dtype=np.float32), device="cuda")


class MLP(tp.Module if tp else object):
    def __init__(self, embd_size, hidden, dtype):
        super().__init__()
        self.c_fc = tp.Linear(embd_size, hidden, bias=True, dtype=dtype)
        self.c_proj = tp.Linear(hidden, embd_size, bias=True, dtype=dtype)

    def __call__(self, x):
        return self.c_proj(tp.gelu(self.c_fc(x)))


class GEGLU(tp.Module if tp else object):
    def __init__(self, in_dim, out_dim, dtype=None):
        self.proj = tp.Linear(in_dim, out_dim * 2, dtype=dtype or tp.float32)
        self.out_dim = out_dim

    def __call__(self, x):
        proj = self.proj(x)
        x, gate = tp.split(proj, 2, proj.rank - 1)
        return x * tp.gelu(gate)


class LnSoftmax(tp.Module if tp else object):
    def __init__(self, dim, dtype):
        self.ln = tp.LayerNorm(dim, dtype=dtype)

    def __call__(self, x):
        return tp.softmax(self.ln(x), dim=x.rank - 1)


def torch_linear(w, b):
    lin = torch.nn.Linear(w.shape[1], w.shape[0], device="cuda", dtype=w.dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    return lin


def load(module, weights):
    # Weights enter zero-copy from torch's GPU memory; compile copies constants to the host side of
    # the compiler and the backend uploads them once at load.
    module.load_state_dict({k: tp.Tensor(v.contiguous()) for k, v in weights.items()})


def mlp_case(d, hidden, batch, dtype):
    tdt = torch.float16 if dtype == tp.float16 else torch.float32
    g = torch.Generator(device="cuda").manual_seed(0)
    w = {
        "c_fc.weight": torch.randn(hidden, d, device="cuda", dtype=tdt, generator=g) / d**0.5,
        "c_fc.bias": torch.randn(hidden, device="cuda", dtype=tdt, generator=g) * 0.1,
        "c_proj.weight": torch.randn(d, hidden, device="cuda", dtype=tdt, generator=g) / hidden**0.5,
        "c_proj.bias": torch.randn(d, device="cuda", dtype=tdt, generator=g) * 0.1,
    }
    mod = MLP(d, hidden, dtype)
    load(mod, w)
    ref = torch.nn.Sequential(
        torch_linear(w["c_fc.weight"], w["c_fc.bias"]), torch.nn.GELU(), torch_linear(w["c_proj.weight"], w["c_proj.bias"])
    )
    x = torch.randn(batch, d, device="cuda", dtype=tdt, generator=g)
    return mod, ref, x, [tp.InputInfo(shape=(batch, d), dtype=dtype)], 2.0 * batch * d * hidden * 2


def geglu_case(d, out, batch, dtype):
    tdt = torch.float16 if dtype == tp.float16 else torch.float32
    g = torch.Generator(device="cuda").manual_seed(1)
    w = {
        "proj.weight": torch.randn(2 * out, d, device="cuda", dtype=tdt, generator=g) / d**0.5,
        "proj.bias": torch.randn(2 * out, device="cuda", dtype=tdt, generator=g) * 0.1,
    }
    mod = GEGLU(d, out, dtype)
    load(mod, w)
    lin = torch_linear(w["proj.weight"], w["proj.bias"])

    def ref(x):
        a, gate = lin(x).chunk(2, dim=-1)
        return a * torch.nn.functional.gelu(gate)

    x = torch.randn(batch, d, device="cuda", dtype=tdt, generator=g)
    return mod, ref, x, [tp.InputInfo(shape=(batch, d), dtype=dtype)], 2.0 * batch * d * 2 * out


def ln_softmax_case(rows, dim, dtype):
    tdt = torch.float16 if dtype == tp.float16 else torch.float32
    mod = LnSoftmax(dim, dtype)
    g = torch.Generator(device="cuda").manual_seed(2)
    gamma = 1 + 0.1 * torch.randn(dim, device="cuda", dtype=tdt, generator=g)
    beta = 0.1 * torch.randn(dim, device="cuda", dtype=tdt, generator=g)
    load(mod, {"ln.weight": gamma, "ln.bias": beta})

    def ref(x):
        return torch.softmax(torch.nn.functional.layer_norm(x, (dim,), gamma, beta, 1e-5), dim=-1)

    x = torch.randn(rows, dim, device="cuda", dtype=tdt, generator=g)
    return mod, ref, x, [tp.InputInfo(shape=(rows, dim), dtype=dtype)], 0.0


def attention_case(b, h, t, d, causal, dtype):
    """Fused attention against torch's SDPA (flash attention on recent GPUs)."""
    tdt = torch.float16 if dtype == tp.float16 else torch.bfloat16 if dtype == tp.bfloat16 else torch.float32
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=tdt, generator=g) for _ in range(3))

    def mod(q, k, v):
        return tp.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def ref(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    info = tp.InputInfo(shape=(b, h, t, d), dtype=dtype)
    # q k^T and P v: 4 b h t^2 d multiply-adds' worth of FLOPs, half of them under a causal mask.
    flops = 4.0 * b * h * t * t * d * (0.5 if causal else 1.0)
    return mod, ref, (q, k, v), [info, info, info], flops


def run_case(name, make, args, use_torch_compile, budget_s):
    mod, ref, x, infos, flops = make(*args)
    t0 = time.perf_counter()
    fast = tp.compile(mod, args=infos)
    compile_s = time.perf_counter() - t0
    xs = x if isinstance(x, tuple) else (x,)
    tx = [to_tripy(t) for t in xs]
    with torch.no_grad():
        want = ref(*xs).float()
        got = to_torch(fast(*tx))
        err = (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item()
        tripy_s = median_seconds(lambda: fast(*tx), budget_s)
        eager_s, comp_s, tc_compile_s = time_torch(ref, x, budget_s, use_torch_compile)
    return dict(name=name, err=err, tripy=tripy_s, eager=eager_s, tcomp=comp_s, flops=flops,
                compile=compile_s, tc_compile=tc_compile_s)


def fmt_time(s):
    if s != s:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def torch_models(quick):
    """torch twins of gpu_bench_native.cc's cases: name -> (callable, input)."""
    m, d = (1024, 2048) if quick else (8192, 4096)
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape, dtype=torch.float16, scale=1.0):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g) * scale

    def mlp(d, hidden, batch, dt):
        l1, l2 = torch.nn.Linear(d, hidden, device="cuda", dtype=dt), torch.nn.Linear(hidden, d, device="cuda", dtype=dt)
        return torch.nn.Sequential(l1, torch.nn.GELU(), l2), rnd(batch, d, dtype=dt)

    def geglu(d, n, batch, dt):
        lin = torch.nn.Linear(d, 2 * n, device="cuda", dtype=dt)

        def f(x):
            a, gate = lin(x).chunk(2, dim=-1)
            return a * torch.nn.functional.gelu(gate)

        return f, rnd(batch, d, dtype=dt)

    def ln_softmax(rows, dim, dt):
        gamma, beta = rnd(dim, dtype=dt, scale=0.1), rnd(dim, dtype=dt, scale=0.1)

        def f(x):
            return torch.softmax(torch.nn.functional.layer_norm(x, (dim,), gamma, beta, 1e-5), dim=-1)

        return f, rnd(rows, dim, dtype=dt)

    f32, f16 = torch.float32, torch.float16
    return {
        "quickstart_mlp": mlp(2, 8, 1, f32),
        "quickstart_geglu": geglu(2, 1, 1, f32),
        "llm_mlp": mlp(d, 4 * d, m, f16),
        "llm_geglu": geglu(d, d, m, f16),
        "ln_softmax_big": ln_softmax(m, d, f16),
        "ln_softmax_small": ln_softmax(64, 256, f32),
    }


def native(a, budget):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.environ.get("TRIPY_BUILD", os.path.join(root, "build-gpu"))
    exe = os.path.join(build, "gpu_bench_native")
    deps = os.path.join(root, ".deps", "usr")
    subprocess.run(["g++", "-O2", "-std=c++17", "-DTRIPY_WITH_CUDA=1", "-DTRIPY_WITH_DNNL=1", "-I", f"{root}/core/include",
                    "-I", f"{root}/core/src", "-I", f"{deps}/include", f"{root}/bench/gpu_bench_native.cc",
                    f"{build}/core/libtripy_backend_cuda_codegen.a", f"{build}/core/libtripy_runtime_static.a", f"-L{deps}/lib/x86_64-linux-gnu", "-ldnnl", "-lpthread", "-ldl",
                    "-o", exe], check=True)
    out = subprocess.run([exe] + (["--quick"] if a.quick else []), capture_output=True, text=True)
    sys.stderr.write(out.stderr[-3000:])
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    models = torch_models(a.quick)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; tripy: CUDA backend via gpu_bench_native")
    head = (f"{'case':<18} {'tripy':>10} {'torch':>10} {'t.compile':>10} {'tripy/torch':>11} "
            f"{'TFLOP/s tp|torch|tc':>20} {'tp build':>9} {'t.c compile':>11}")
    print(head)
    print("-" * len(head))
    for r in results:
        if "error" in r:
            print(f"{r.get('name', '?'):<18} error: {r['error']}")
            continue
        f, x = models[r["name"]]
        with torch.no_grad():
            eager, tc, tc_compile = time_torch(f, x, budget, not a.no_torch_compile)
        tf = "-"
        if r["flops"] > 1e9:
            tf = f"{r['flops'] / r['tripy_s'] / 1e12:.0f}|{r['flops'] / eager / 1e12:.0f}|{r['flops'] / tc / 1e12:.0f}"
        print(f"{r['name']:<18} {fmt_time(r['tripy_s']):>10} {fmt_time(eager):>10} {fmt_time(tc):>10} "
              f"{r['tripy_s'] / eager:>11.2f} {tf:>20} {r['build_s']:>8.2f}s {tc_compile:>10.2f}s")


def quantized_gemms(quick, budget_s):
    """int8 and float8 GEMMs (quantize/dequantize around a matmul, compiled by flat::quantized_dot)
    against the float16 GEMM of the same M, N, K: x [M, K] float16 @ W.T with W [N, K]. 'call' is
    the whole executable (the activation's quantize, the GEMM, the rescale); 'gemm' the dot kernel
    alone (from exe.profile; the weight-only product's, 'w-only', where a decode-sized int8 product
    reads the int8 weight that way). Ratios are time over the float16 GEMM's (< 1: faster)."""
    shapes = [(1024, 1024, 1024), (16, 1024, 1024)] if quick else [(4096, 4096, 4096), (16, 4096, 4096)]
    fp8 = torch.cuda.get_device_capability() >= (8, 9)
    g = torch.Generator(device="cuda").manual_seed(3)
    print()
    head = (f"{'low-precision GEMM (M, N, K)':<34} {'call':>10} {'gemm':>10} {'call/f16':>9} {'gemm/f16':>9} "
            f"{'TFLOP/s gemm':>12} {'dot reads':>9} {'rel.err':>8}")
    print(head)
    print("-" * len(head))
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=g)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16, generator=g) * 0.05
        sx, sw = float(x.abs().max()) / 127, float(w.abs().max()) / 127
        base = None
        for qname in ["float16", "int8"] + (["float8"] if fp8 else []):
            if qname == "float16":
                wt = to_tripy(w.contiguous())
                wt.eval()

                def model(a, wt=wt):
                    return a @ tp.transpose(wt, 0, 1)

                want = x.float() @ w.float().T
            else:
                qd = tp.int8 if qname == "int8" else tp.float8
                wsc = sw if qname == "int8" else float(w.abs().max()) / 448
                xsc = sx if qname == "int8" else float(x.abs().max()) / 448
                wq = tp.quantize(to_tripy(w.contiguous()), wsc, qd)
                wq.eval()

                def model(a, wq=wq, qd=qd, xsc=xsc, wsc=wsc):
                    xa = tp.dequantize(tp.quantize(a, xsc, qd), xsc, tp.float16)
                    return xa @ tp.transpose(tp.dequantize(wq, wsc, tp.float16), 0, 1)

                want = x.float() @ w.float().T  # quantization error included in rel.err
            exe = tp.compile(model, args=[tp.InputInfo((m, k), dtype=tp.float16)])
            text = exe._impl.program_text  # which dtype the dot reads: the rewrite fired or not
            decl = dict(re.findall(r"^(b\d+) = (?:input|temp|constant|output)(?: \d+)? (\w+)\[", text, re.M))
            dot = re.search(r"^b\d+ = dot '[^']*'\((b\d+),", text, re.M)
            weight_only = re.search(r"^b\d+ = weight_only_dot ", text, re.M)
            reads = decl.get(dot.group(1), "?") if dot else "w-only" if weight_only else "no dot"
            xt = to_tripy(x)
            got = to_torch(exe(xt))
            err = (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item()
            call_s = median_seconds(lambda: exe(xt), budget_s)
            prof = [exe.profile(xt) for _ in range(5)]
            products = ("dot", "weight_only_dot")
            gemm_ms = sorted(sum(r["ms"] for r in p.rows if r["kind"] in products) for p in prof)[2]
            if base is None:
                base = (call_s, gemm_ms)
            tf = 2.0 * m * n * k / (gemm_ms * 1e-3) / 1e12
            print(f"{qname + f' ({m}, {n}, {k})':<34} {fmt_time(call_s):>10} {fmt_time(gemm_ms * 1e-3):>10} "
                  f"{call_s / base[0]:>9.2f} {gemm_ms / base[1]:>9.2f} {tf:>12.0f} {reads:>9} {err:>8.1e}")
    if not fp8:
        print("(float8 needs sm89+: not run on this GPU)")


def weight_only_gemvs(quick, budget_s):
    """Decode- and prefill-sized products with bfloat16, int8, float8 and int4 weights (the weight-only product reads
    them packed): per call, the ratio to Tripy's bfloat16 call, the weight bytes read per second,
    torch's bfloat16 matmul on the same shape, and each result's error against float32."""
    shapes = [(1, 1024, 1024), (16, 1024, 1024)] if quick else [
        (m, n, k) for m in (1, 16) for n, k in ((4096, 4096), (14336, 4096), (4096, 14336))
    ] + [(512, 14336, 4096), (512, 4096, 14336)]  # a prefill's products
    g = torch.Generator(device="cuda").manual_seed(27)
    print()
    head = (f"{'weight-only (M, N, K)':<30} {'call':>10} {'/bf16':>7} {'GB/s':>7} {'torch bf16':>10} "
            f"{'kernel':>16} {'rel.err':>8}")
    print(head)
    print("-" * len(head))
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) * 0.05
        want = x.float() @ w.float().T
        torch_s = median_seconds(lambda: x @ w.T, budget_s)
        base = None
        for qname in ("bfloat16", "int8", "float8", "int4"):
            per_channel = qname in ("int8", "float8")
            layer = tp.Linear(k, n, bias=False, dtype=tp.bfloat16, quant_dtype=None if qname == "bfloat16" else
                              getattr(tp, qname), weight_quant_dim=0 if per_channel else None)
            wt = to_tripy(w.contiguous())
            if qname == "bfloat16":
                state, nbytes = {"weight": wt}, n * k * 2
            else:
                mode = "float8" if qname == "float8" else f"{qname}-weight-only"
                state = tp.llm.quantize.quantize_weight(wt, mode, "w")  # the loader's quantizer
                nbytes = n * k // (1 if per_channel else 2)
            layer.load_state_dict(state)
            exe = tp.compile(layer, args=[tp.InputInfo((m, k), dtype=tp.bfloat16)])
            kinds = re.findall(r"^b\d+ = (\w+) '", exe._impl.program_text, re.M)
            xt = to_tripy(x)
            got = to_torch(exe(xt)).float()
            err = (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item()
            call_s = median_seconds(lambda: exe(xt), budget_s)
            base = base or call_s
            print(f"{qname + f' ({m}, {n}, {k})':<30} {fmt_time(call_s):>10} {call_s / base:>7.2f} "
                  f"{nbytes / call_s / 1e9:>7.0f} {fmt_time(torch_s):>10} {'+'.join(kinds)[:16]:>16} {err:>8.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and short timings")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--case", type=int, action="append", help="run only these cases (by index)")
    parser.add_argument("--native", action="store_true", help="Tripy side from gpu_bench_native.cc")
    parser.add_argument("--quantized", action="store_true", help="only the int8/float8 vs float16 GEMM table")
    parser.add_argument("--weight-only", action="store_true", help="only the bf16/int8/int4 weight-only decode table")
    a = parser.parse_args()
    budget = 0.3 if a.quick else 1.5
    if a.native:
        return native(a, budget)
    if tp is None:
        raise SystemExit(f"tripy does not import ({TRIPY_IMPORT_ERROR}); try --native")
    if a.quantized:
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
        return quantized_gemms(a.quick, budget)
    if a.weight_only:
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
        return weight_only_gemvs(a.quick, budget)
    big = (1024, 2048) if a.quick else (8192, 4096)
    cases = [
        ("quickstart MLP, embd 2, (1, 2), f32", mlp_case, (2, 8, 1, tp.float32)),
        ("quickstart GEGLU, (1, 2), f32", geglu_case, (2, 1, 1, tp.float32)),
        (f"LLM MLP d={big[1]}, ({big[0]}, {big[1]}), f16, bias+GELU", mlp_case, (big[1], 4 * big[1], big[0], tp.float16)),
        (f"GEGLU d={big[1]}, ({big[0]}, {big[1]}), f16", geglu_case, (big[1], big[1], big[0], tp.float16)),
        (f"LayerNorm+softmax ({big[0]}, {big[1]}), f16", ln_softmax_case, (big[0], big[1], tp.float16)),
        ("LayerNorm+softmax (64, 256), f32", ln_softmax_case, (64, 256, tp.float32)),
        ("attention (8, 12, 1024, 64), f16, causal", attention_case, (8, 12, 1024, 64, True, tp.float16)),
        ("attention (4, 16, 2048, 128), bf16", attention_case, (4, 16, 2048, 128, False, tp.bfloat16)),
    ]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, tripy on {tp.Tensor([0.0]).device}")
    rows = []
    if a.case:
        cases = [cases[i] for i in a.case]
    for name, make, args in cases:
        try:
            rows.append(run_case(name, make, args, not a.no_torch_compile, budget))
        except Exception as e:  # one broken case must not hide the others
            print(f"{name}: FAILED: {type(e).__name__}: {str(e)[:2000]}", file=sys.stderr)
    print()
    head = (f"{'case':<46} {'tripy':>10} {'torch':>10} {'t.compile':>10} {'tripy/torch':>11} "
            f"{'TFLOP/s tp|torch':>17} {'rel.err':>8} {'tp compile':>10} {'t.c compile':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        tf = "-"
        if r["flops"]:
            tf = f"{r['flops'] / r['tripy'] / 1e12:.0f} | {r['flops'] / r['eager'] / 1e12:.0f}"
        print(f"{r['name']:<46} {fmt_time(r['tripy']):>10} {fmt_time(r['eager']):>10} {fmt_time(r['tcomp']):>10} "
              f"{r['tripy'] / r['eager']:>11.2f} {tf:>17} {r['err']:>8.1e} {r['compile']:>9.2f}s {r['tc_compile']:>10.2f}s")
    if not a.case:
        try:
            quantized_gemms(a.quick, budget)
        except Exception as e:
            print(f"low-precision GEMMs: FAILED: {type(e).__name__}: {str(e)[:2000]}", file=sys.stderr)
        try:
            weight_only_gemvs(a.quick, budget)
        except Exception as e:
            print(f"weight-only products: FAILED: {type(e).__name__}: {str(e)[:2000]}", file=sys.stderr)


if __name__ == "__main__":
    main()

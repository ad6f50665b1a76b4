"""Per-kernel GPU times of Tripy's executables next to torch's, for the large benchmark cases.

Uses torch.profiler (CUPTI traces every kernel in the process, Tripy's included), and compiles each
generated fused kernel with nvcc --resource-usage when nvcc exists, to show registers and spills.
Run on the GPU machine after a build: PYTHONPATH=python python3 scripts/gpu_profile.py

--decode instead times the kernels of a Llama-3-8B decode step alone, at one row: its four
products with bfloat16, int8 and int4 weights, and its residual add + RMSNorm (also at 8 and 4096
rows), each call after an L2 flush (a decode step streams every weight from memory) and with plain
launches (an overlapping launch's time would include its wait for the kernel before it).

--prefill times, the same way, the elementwise and row kernels of a Llama-3-8B prefill of 2048
tokens compiled with the prompt length dynamic (residual add + RMSNorm, SwiGLU over the halves of
the gate/up product, rotary embedding of the q and k heads, a KV-cache write of a head range) and
GPT-2's LayerNorm over 8192 rows, each with the bytes it must move over its time, beside torch's
kernels for the same computation.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

if "--decode" in sys.argv or "--prefill" in sys.argv:
    os.environ["TRIPY_OVERLAP_LAUNCHES"] = "0"  # read at the first launch

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import gpu_bench as gb  # noqa: E402

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402


class AddNorm(tp.Module):
    """The residual add and RMSNorm between the products of a Llama-3-8B layer."""

    def __init__(self):
        super().__init__()
        self.norm = tp.RMSNorm(4096, dtype=tp.bfloat16)

    def __call__(self, h, r):
        s = h + r
        return s, self.norm(s)


def kernel_table(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows.append((t / reps, e.count // reps, e.key[:90]))
    rows.sort(reverse=True)
    return rows


def resource_usage(sources):
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        return ["(no nvcc)"]
    out = []
    with tempfile.TemporaryDirectory() as d:
        for i, src in enumerate(sources):
            path = os.path.join(d, f"k{i}.cu")
            with open(path, "w") as f:
                f.write(src)
            r = subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-O3", "--resource-usage", "-o", path + ".cubin", path],
                               capture_output=True, text=True)
            name = re.search(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)", src)
            lines = [l for l in (r.stdout + r.stderr).splitlines() if "registers" in l or "spill" in l or "error" in l]
            out.append(f"{name.group(1) if name else i}: " + " | ".join(l.strip() for l in lines[-3:]))
    return out


def decode_kernels(reps=20):
    """Each kernel of one 8B decode product or norm alone: its time and the bytes it must read."""
    g = torch.Generator(device="cuda").manual_seed(25)
    flush = torch.empty(256 << 20, device="cuda", dtype=torch.uint8)  # more than the L2
    shapes = (("qkv", 6144, 4096), ("o_proj", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336))
    print(f"device: {torch.cuda.get_device_name()}; one row of x, times of each kernel alone")
    print(f"{'kernel':<34} {'us':>8} {'GB/s':>7}  name")
    for label, n, k in shapes:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) * 0.05
        x = gb.to_tripy(torch.randn(1, k, device="cuda", dtype=torch.bfloat16, generator=g))
        for mode, quant, nbytes in (("bfloat16", None, 2 * n * k), ("int8", tp.int8, n * k), ("int4", tp.int4, n * k // 2)):
            layer = tp.Linear(k, n, bias=False, dtype=tp.bfloat16, quant_dtype=quant,
                              weight_quant_dim=0 if mode == "int8" else None)
            wt = gb.to_tripy(w.contiguous())
            layer.load_state_dict({"weight": wt} if quant is None else
                                  tp.llm.quantize.quantize_weight(wt, f"{mode}-weight-only", label))
            exe = tp.compile(layer, args=[tp.InputInfo((1, k), dtype=tp.bfloat16)])
            rows = [r for r in kernel_table(lambda: (flush.zero_(), exe(x)), reps) if "at::native" not in r[2]]
            for t, _, name in rows[:2]:
                print(f"{label + ' ' + mode + f' ({n}, {k})':<34} {t:8.2f} {nbytes / t / 1e3:7.0f}  {name[:60]}")

    m = AddNorm()
    m.norm.weight = gb.to_tripy(torch.rand(4096, device="cuda", dtype=torch.bfloat16, generator=g) + 0.5)
    # A decode step's one row and eight, and a prefill's 4096 (its four tensors' bytes over the time).
    for rows in (1, 8, 4096):
        info = tp.InputInfo((rows, 4096), dtype=tp.bfloat16)
        exe = tp.compile(m, args=[info, info])
        h, r = (gb.to_tripy(torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16, generator=g))
                for _ in range(2))
        rows_of = kernel_table(lambda: (flush.zero_(), exe(h, r)), reps)
        for t, _, name in [row for row in rows_of if "at::native" not in row[2]]:
            print(f"{f'add + RMSNorm ({rows}, 4096)':<34} {t:8.2f} {4 * rows * 4096 * 2 / t / 1e3:7.0f}  {name[:60]}")


def prefill_kernels(reps=20):
    """The prefill's elementwise and row kernels alone, Tripy's and torch's: time and GB/s."""
    from tripy.llm.llama import _rotate

    g = torch.Generator(device="cuda").manual_seed(26)
    flush = torch.empty(256 << 20, device="cuda", dtype=torch.uint8)
    T = 2048
    rows_t = (1, T, T)  # the prompt length: dynamic, as in a prefill executable

    def rand(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

    def show(label, fn, nbytes, who):
        kernels = [r for r in kernel_table(lambda: (flush.zero_(), fn()), reps) if "FillFunctor" not in r[2]]
        for t, n, name in kernels[:3]:  # the flush's fill left out
            print(f"{label:<30} {who:<6} {t:8.2f} {nbytes / t / 1e3:7.0f}  {n}x {name[:56]}")

    print(f"device: {torch.cuda.get_device_name()}; prefill-sized kernels alone (L2 flushed, plain launches)")
    print(f"{'kernel':<30} {'who':<6} {'us':>8} {'GB/s':>7}  name")

    m, w = AddNorm(), rand(4096) + 1.0
    m.norm.weight = gb.to_tripy(w)
    h, r = rand(T, 4096), rand(T, 4096)
    exe = tp.compile(m, args=[tp.InputInfo((rows_t, 4096), dtype=tp.bfloat16)] * 2)
    th, tr = gb.to_tripy(h), gb.to_tripy(r)

    def torch_norm():
        s = h + r
        return s, (s.float() * torch.rsqrt(s.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(s.dtype) * w

    for who, fn in (("tripy", lambda: exe(th, tr)), ("torch", torch.compile(torch_norm))):
        show(f"add + RMSNorm ({T}, 4096)", fn, 4 * T * 4096 * 2, who)

    def swiglu(x):
        gate, up = tp.split(x, 2, dim=-1)
        return tp.silu(gate) * up

    x = rand(T, 2 * 14336)
    exe = tp.compile(swiglu, args=[tp.InputInfo((rows_t, 2 * 14336), dtype=tp.bfloat16)])
    tx = gb.to_tripy(x)
    halves = lambda: torch.nn.functional.silu(x[:, :14336]) * x[:, 14336:]  # noqa: E731
    for who, fn in (("tripy", lambda: exe(tx)), ("torch", torch.compile(halves))):
        show(f"SwiGLU ({T}, 2 x 14336)", fn, 3 * T * 14336 * 2, who)

    qkv, cos, sin = rand(1, T, 48, 128), rand(T, 1, 2, 64), rand(T, 1, 2, 64)
    exe = tp.compile(lambda q, c, s: _rotate(q, 40, c, s),
                     args=[tp.InputInfo((1, rows_t, 48, 128), dtype=tp.bfloat16)] +
                          [tp.InputInfo((rows_t, 1, 2, 64), dtype=tp.bfloat16)] * 2)
    args = [gb.to_tripy(a) for a in (qkv, cos, sin)]
    show(f"rotary ({T}, 40 of 48 heads)", lambda: exe(*args), 2 * T * 40 * 128 * 2, "tripy")

    def write(cache, pos, proj):
        return tp.update_slice(cache, 1, pos, proj[:, :, 40:])

    cache = gb.to_tripy(rand(1, T + 64, 8, 128))
    exe = tp.compile(write, args=[tp.InputInfo((1, T + 64, 8, 128), dtype=tp.bfloat16, donate=True),
                                  tp.InputInfo((1,), dtype=tp.int32),
                                  tp.InputInfo((1, rows_t, 48, 128), dtype=tp.bfloat16)])
    pos, tq = gb.to_tripy(torch.zeros(1, dtype=torch.int32, device="cuda")), gb.to_tripy(qkv)
    show(f"KV-cache write ({T}, 8 heads)", lambda: exe(cache, pos, tq), 2 * T * 8 * 128 * 2, "tripy")

    ln = tp.LayerNorm(768, dtype=tp.float16)
    ln.weight, ln.bias = (gb.to_tripy(rand(768, dtype=torch.float16)) for _ in range(2))
    y = rand(8, 1024, 768, dtype=torch.float16)
    exe, ty = tp.compile(ln, args=[tp.InputInfo((8, 1024, 768), dtype=tp.float16)]), gb.to_tripy(y)
    tln = torch.nn.LayerNorm(768, device="cuda", dtype=torch.float16)
    for who, fn in (("tripy", lambda: exe(ty)), ("torch", lambda: tln(y))):
        show("LayerNorm (8192, 768) f16", fn, 2 * 8192 * 768 * 2, who)


def main():
    if "--decode" in sys.argv:
        return decode_kernels()
    if "--prefill" in sys.argv:
        return prefill_kernels()
    cases = [
        ("LayerNorm+softmax (8192, 4096) f16", gb.ln_softmax_case, (8192, 4096, tp.float16)),
        ("GEGLU d=4096 (8192, 4096) f16", gb.geglu_case, (4096, 4096, 8192, tp.float16)),
    ]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name, make, args in cases:
        mod, ref, x, infos, _ = make(*args)
        fast = tp.compile(mod, args=infos)
        tx = gb.to_tripy(x)
        with torch.no_grad():
            got = gb.to_torch(fast(tx))
            want = ref(x).float()
            err = (torch.linalg.norm(got - want) / torch.linalg.norm(want)).item()
            print(f"\n== {name}: rel err {err:.2e}")
            for who, fn in (("tripy", lambda: fast(tx)), ("torch", lambda: ref(x))):
                rows = kernel_table(fn)
                total = sum(r[0] for r in rows)
                print(f"-- {who}: {total:.1f} us of kernels per call")
                for t, n, k in rows[:8]:
                    print(f"   {t:9.1f} us  x{n}  {k}")
        small = tp.Tensor(x[:4].contiguous())
        try:
            srcs = _C._cuda_kernel_sources(mod(small)._node)
            for line in resource_usage(srcs):
                print("   " + line)
        except Exception as e:  # the profile still stands without the resource report
            print(f"   (resource usage unavailable: {e})")


if __name__ == "__main__":
    main()

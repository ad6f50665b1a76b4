"""Per-kernel GPU times of Tripy's executables next to torch's, for the large benchmark cases.

Uses torch.profiler (CUPTI traces every kernel in the process, Tripy's included), and compiles each
generated fused kernel with nvcc --resource-usage when nvcc exists, to show registers and spills.
Run on the GPU machine after a build: PYTHONPATH=python python3 scripts/gpu_profile.py
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import gpu_bench as gb  # noqa: E402

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402


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


def main():
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

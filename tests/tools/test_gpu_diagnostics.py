"""The standalone GPU diagnostics (scripts/*.cu: the weight-only products timed alone, outside Tripy)
include the kernel files as they are, so they compile with nvcc wherever the CUDA toolkit is, GPU or
not: a change to the kernels that breaks them fails here instead of on the GPU machine."""

import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "core", "src", "backend", "cuda", "codegen", "kernels")


def _nvcc():
    found = shutil.which("nvcc")
    if found is None and os.path.exists("/usr/local/cuda/bin/nvcc"):
        found = "/usr/local/cuda/bin/nvcc"
    return found


@pytest.mark.skipif(_nvcc() is None, reason="no CUDA toolkit (nvcc) on this machine")
@pytest.mark.parametrize("source", sorted(glob.glob(os.path.join(ROOT, "scripts", "*.cu"))), ids=os.path.basename)
def test_the_diagnostic_compiles_for_hopper(source, tmp_path):
    # An object file: what the kernel files decide (linking needs the driver library, which some take).
    out = subprocess.run([_nvcc(), "-arch=sm_90a", "-O1", "-std=c++17", f"-I{KERNELS}", "-c", "-o",
                          str(tmp_path / "diagnostic.o"), source], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]

"""Examples and benchmarks are code that runs in CI (small sizes), so they never rot."""

import os
import subprocess
import sys

import pytest

from tripy import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_quickstart_walks_through_the_seeds():
    out = _run("examples/quickstart.py")
    assert out.returncode == 0, out.stderr
    assert "tensor([[6.0000]]" in out.stdout and "[18.0000]," in out.stdout and "[42.0000]]" in out.stdout
    assert "Did you mean: 'tripy.softmax'?" in out.stdout


def test_cpu_benchmark_runs_and_checks_its_results():
    out = _run("bench/cpu_bench.py", "--quick")
    assert out.returncode == 0, out.stderr
    assert "compiled seed MLP" in out.stdout and "ratio" in out.stdout


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_gpu_benchmark_runs_quickly():
    pytest.importorskip("torch")
    out = _run("bench/gpu_bench.py", "--quick", "--no-torch-compile")
    assert out.returncode == 0, out.stderr

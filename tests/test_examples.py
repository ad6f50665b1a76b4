"""Examples and benchmarks are code that runs in CI (small sizes), so they never rot."""

import os
import subprocess
import sys

import pytest

from tripy import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    # Kept: an inherited PYTHONPATH may be where torch comes from.
    path = [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_quickstart_walks_through_the_seeds():
    out = _run("examples/quickstart.py")
    assert out.returncode == 0, out.stderr
    assert "tensor([[6.0000]]" in out.stdout and "[18.0000]," in out.stdout and "[42.0000]]" in out.stdout
    assert "Did you mean: 'tripy.softmax'?" in out.stdout


def test_cpu_benchmark_runs_and_checks_its_results():
    out = _run("bench/cpu_bench.py", "--quick")
    assert out.returncode == 0, out.stderr
    assert "compiled quickstart MLP" in out.stdout and "ratio" in out.stdout
    for row in ("eager a + b, 2x3", "eager a + b, 1000x1000", "eager LayerNorm+Linear+GELU"):
        assert row in out.stdout


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_gpu_benchmark_runs_quickly():
    pytest.importorskip("torch")
    out = _run("bench/gpu_bench.py", "--quick", "--no-torch-compile")
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_gpu_quantized_gemm_benchmark_runs_the_int8_gemm():
    pytest.importorskip("torch")
    out = _run("bench/gpu_bench.py", "--quick", "--quantized")
    assert out.returncode == 0, out.stderr
    int8_rows = [line for line in out.stdout.splitlines() if line.startswith("int8 (")]
    # The large product takes the int8 dot; a decode-sized one the int8 dot or the weight-only product.
    assert len(int8_rows) == 2 and " i8 " in int8_rows[0], out.stdout
    assert " i8 " in int8_rows[1] or " w-only " in int8_rows[1], out.stdout


MODEL_EXAMPLES = ["gpt2", "gpt2_generate", "llama_block", "resnet50", "mobilenet_unet_block"]


@pytest.mark.parametrize("name", MODEL_EXAMPLES)
def test_model_example_agrees_with_its_reference(name):
    # Each checks against torch where it is installed, else against a float64 numpy reference.
    out = _run(f"examples/{name}.py")
    assert out.returncode == 0, out.stderr[-3000:]
    assert ": agree" in out.stdout and "DISAGREE" not in out.stdout


@pytest.mark.parametrize("name", MODEL_EXAMPLES)
def test_model_example_falls_back_to_numpy_without_torch(name, tmp_path):
    pytest.importorskip("torch", reason="without torch the test above already takes the numpy path")
    for blocked in ("torch", "torchvision"):  # found first on the path, so `import torch` fails
        (tmp_path / f"{blocked}.py").write_text("raise ImportError('blocked by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.path.join(ROOT, "python")]))
    out = subprocess.run([sys.executable, f"examples/{name}.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "vs numpy float64" in out.stdout and ": agree" in out.stdout

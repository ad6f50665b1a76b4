"""bench/onnx.py, the ONNX benchmark, runs on the CPU at small sizes: its stand-in models (written
with onnx.helper, so no torch is needed) are imported, checked against numpy and timed, and every
peer that is installed gets a ratio."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnx")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "onnx.py")


def _run(*args):
    path = [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_quick_cpu_run_checks_and_times_the_stand_in_models():
    out = _run("--device", "cpu", "--quick", "--no-torch-compile", "--only", "mlp,convnet")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    tripy = [r for r in records if r["system"] == "tripy (onnx)"]
    assert {(r["model"], r["batch"]) for r in tripy} == {("mlp", 1), ("mlp", 2), ("convnet", 1), ("convnet", 2)}
    for r in tripy:
        assert r["ms"] > 0 and r["max_rel_err"] < 1e-3 and r["checked_against"] in ("onnxruntime", "numpy")
        assert r["kernels"] >= 1 and r["device"] == "cpu"
    for r in records:
        if r["system"] != "tripy (onnx)":
            assert r["ratio"] > 0
    assert "model" in out.stdout and "peer/tripy" in out.stdout  # the table


def test_unknown_models_are_refused():
    out = _run("--device", "cpu", "--quick", "--only", "alexnet")
    assert out.returncode == 2 and "unknown models ['alexnet']" in out.stderr

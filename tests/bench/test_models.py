"""bench/models.py, the model benchmark, runs in CI at small sizes on the CPU (with or without torch),
checks every model's output and fails loudly when an output is off."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tripy import _C

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "models.py")


def _run(*args, **env_vars):
    # Kept: an inherited PYTHONPATH may be where torch comes from.
    path = [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **env_vars)
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def _records(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_quick_cpu_run_checks_and_times_every_model():
    out = _run("--device", "cpu", "--quick", "--no-torch-compile")
    assert out.returncode == 0, out.stderr[-3000:]
    records = _records(out.stdout)
    tripy = [r for r in records if r["system"].startswith("tripy") and r["ms"] is not None]
    assert {r["model"] for r in tripy} == {"gpt2", "gpt2-decode", "llama-block", "resnet50"}
    assert {r["shape"] for r in tripy if r["model"] == "gpt2"} == {"B1x16", "B2x64"}
    assert {r["batch"] for r in tripy if r["model"] == "resnet50"} == {1, 2}
    for r in tripy:
        assert r["ms"] > 0 and r["compile_s"] > 0 and r["device"] == "cpu" and r["dtype"] == "float32"
        # Each output was compared with torch or with the float64 numpy reference, and agreed.
        assert r["checked_against"] in ("torch", "numpy float64"), r
        assert r["max_rel_err"] < 1e-3, r
    decode = [r for r in records if r["model"] == "gpt2-decode" and r["system"] == "tripy"]
    assert decode and decode[0]["ms"] > 0 and "KV cache updated in place" in decode[0]["note"]
    assert decode[0]["shape"] == "B1 past 63"
    assert "tripy/best" in out.stdout


def test_only_selects_models_and_rejects_unknown_names():
    out = _run("--device", "cpu", "--quick", "--no-torch-compile", "--only", "llama-block")
    assert out.returncode == 0, out.stderr[-3000:]
    assert {r["model"] for r in _records(out.stdout)} == {"llama-block"}
    bad = _run("--device", "cpu", "--only", "gpt3")
    assert bad.returncode == 2 and "unknown model(s) ['gpt3']" in bad.stderr


def test_compile_times_are_cold_unless_asked_and_the_empty_caches_are_removed(tmp_path):
    # By default every compile cache points at a new directory under TMPDIR, gone after the run.
    out = _run("--device", "cpu", "--quick", "--no-torch-compile", "--only", "llama-block", TMPDIR=str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "# compile caches: new and empty" in out.stdout
    assert os.listdir(tmp_path) == []
    warm = _run("--device", "cpu", "--quick", "--no-torch-compile", "--only", "llama-block", "--warm-caches")
    assert warm.returncode == 0 and "# compile caches: the usual ones" in warm.stdout, warm.stderr[-3000:]


def test_compile_scaling_reports_time_and_peak_memory_against_weight_bytes():
    out = _run("--device", "cpu", "--quick", "--only", "compile-scaling")
    assert out.returncode == 0, out.stderr[-3000:]
    records = _records(out.stdout)
    assert [r["n_layer"] for r in records] == [6, 12, 24]
    weights = [r["weight_mib"] for r in records]
    assert weights == sorted(weights) and weights[0] > 0
    for r in records:
        assert r["compile_s"] > 0 and r["peak_mib"] >= r["rss_before_mib"] > 0 and r["extra_peak_mib"] >= 0
    assert "ms per MiB" in out.stdout


def test_compile_dynamic_times_static_and_dynamic_compiles_alternately():
    out = _run("--device", "cpu", "--quick", "--only", "compile-dynamic")
    assert out.returncode == 0, out.stderr[-3000:]
    records = _records(out.stdout)
    assert [r["dynamic"] for r in records] == [False, True, False, True]
    assert all(r["model"] == "compile-dynamic" and r["compile_s"] > 0 for r in records)
    assert records[1]["shape"] == "B1xT, T in (1, 16, 16)" and records[0]["shape"] == "B1xT, T = 16"
    assert "dynamic / static" in out.stdout


def test_profiles_time_each_shape_on_the_two_profile_executable_and_alone():
    out = _run("--device", "cpu", "--quick", "--only", "profiles")
    assert out.returncode == 0, out.stderr[-3000:]
    records = _records(out.stdout)
    assert [(r["shape"], r["profile"]) for r in records] == [("B1x16", 0), ("B8x64", 1)]
    # Both executables compute the same outputs (the CPU's kernels do not depend on the profile).
    assert all(r["model"] == "profiles" and r["ms"] > 0 and r["alone_ms"] > 0 and r["max_rel_err"] == 0 for r in records)


def test_an_output_that_disagrees_is_a_failure(monkeypatch, capsys, load_bench):
    import tripy as tp

    bench = load_bench("models")
    monkeypatch.setattr(tp.config, "default_device", tp.config.default_device)  # Env sets it; restore after
    env = bench.Env(argparse.Namespace(device="cpu", quick=True, no_torch_compile=True, profile=None, kernels=False))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = bench.Case("double", "2x3", 2, lambda t: t * 2.0, [x], reference=lambda: x * 2.0)
    bad = bench.Case("double", "wrong", 2, lambda t: t * 2.0, [x], reference=lambda: x * 2.5)
    bench.run_tripy(good, env)
    assert env.failures == []
    bench.run_tripy(bad, env)
    assert len(env.failures) == 1 and "double wrong: Tripy differs from numpy float64" in env.failures[0]
    assert [r["max_rel_err"] for r in env.records] == [0.0, 0.2]
    assert '"system": "tripy"' in capsys.readouterr().out


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_quick_gpu_run_checks_every_model_in_float16():
    out = _run("--device", "gpu", "--quick", "--no-torch-compile")
    assert out.returncode == 0, out.stderr[-3000:]
    tripy = [r for r in _records(out.stdout) if r["system"].startswith("tripy") and r["ms"] is not None]
    assert {r["model"] for r in tripy} == {"gpt2", "gpt2-decode", "llama-block", "resnet50"}
    assert all(r["dtype"] == "float16" and r["max_rel_err"] < 2e-2 for r in tripy), tripy


def test_profile_prints_where_the_time_goes_and_writes_traces(tmp_path):
    out = _run("--device", "cpu", "--quick", "--no-torch-compile", "--only", "gpt2", "--profile", str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "profile gpt2-B1x16:" in out.stdout and " attention " in out.stdout
    trace = json.load(open(tmp_path / "gpt2-B1x16.json"))
    assert {e["cat"] for e in trace["traceEvents"]} >= {"dot", "attention"}

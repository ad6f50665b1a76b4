"""Shared test fixtures: the devices to run on (the GPU only where one is present), two GPUs, tripy-run."""

import os
import subprocess
import sys

import pytest


def _devices():
    from tripy import _C

    return ["cpu", "gpu"] if _C.gpu_available() else ["cpu"]


@pytest.fixture(params=["cpu", "gpu"])
def device(request, monkeypatch):
    """Runs the test once per device, skipping the GPU where there is none."""
    if request.param not in _devices():
        pytest.skip("no GPU on this machine")
    import tripy as tp

    monkeypatch.setattr(tp.config, "default_device", request.param)
    return request.param


def _gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


@pytest.fixture
def two_gpus():
    """Skips the test unless this machine has two GPUs or more."""
    if _gpu_count() < 2:
        pytest.skip("needs two GPUs")


@pytest.fixture
def tripy_run():
    """The path of the tripy-run command: the venv's, else the build tree's; skips where neither is built."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for runner in (os.path.join(sys.prefix, "bin", "tripy-run"),
                   os.path.join(root, os.environ.get("TRIPY_BUILD_DIR", "build"), "core", "tripy-run")):
        if os.path.exists(runner):
            return runner
    pytest.skip("tripy-run is not built")

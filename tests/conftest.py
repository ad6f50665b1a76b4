"""Shared test fixtures: the devices to run on (the GPU only where one is present)."""

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

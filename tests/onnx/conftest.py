"""The ONNX tests load their models on the CPU: tp.compile compiles for the CPU too, also where a
GPU is present (the backend conformance cases choose each case's device themselves)."""

import pytest

import tripy as tp


@pytest.fixture(autouse=True)
def _compile_for_the_cpu(monkeypatch):
    monkeypatch.setattr(tp.config, "default_device", "cpu")

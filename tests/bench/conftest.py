"""Shared by the benchmark tests: a script of bench/ loaded as a module."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def load_bench():
    """A call that loads bench/<name>.py as a module, without putting bench/ on the path (its
    onnx.py would shadow the onnx package)."""

    def load(name):
        spec = importlib.util.spec_from_file_location(f"{name}_bench", os.path.join(ROOT, "bench", f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load

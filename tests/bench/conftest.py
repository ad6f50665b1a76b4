"""Shared by the benchmark tests: a script of bench/ loaded as a module."""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def load_bench():
    """A call that loads bench/<name>.py as a module, without leaving bench/ on the path (its
    onnx.py would shadow the onnx package for every later test): a script that puts it there for
    its own imports (bench/llm.py) keeps the modules it imported, and the path is restored."""

    def load(name):
        spec = importlib.util.spec_from_file_location(f"{name}_bench", os.path.join(ROOT, "bench", f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        path = list(sys.path)
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path[:] = path
        return module

    return load

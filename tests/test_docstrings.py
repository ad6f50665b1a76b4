"""Every public API's docstring example runs (API.md: examples are collected as tests)."""

import inspect
import re
import textwrap

import pytest

import tripy as tp


def _public_objects():
    seen = set()
    for name in sorted(dir(tp)):
        obj = getattr(tp, name)
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        yield name, obj
        if inspect.isclass(obj):
            for meth_name, meth in vars(obj).items():
                if not meth_name.startswith("_") and inspect.isfunction(meth) and meth.__doc__:
                    yield f"{name}.{meth_name}", meth


def _examples(doc):
    # A block starts at "Example::" and runs while lines are indented deeper than that line.
    lines = (doc or "").splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Example::":
            base = len(line) - len(line.lstrip())
            block = []
            for body in lines[i + 1 :]:
                if body.strip() and len(body) - len(body.lstrip()) <= base:
                    break
                block.append(body)
            yield textwrap.dedent("\n".join(block))


CASES = [(name, code) for name, obj in _public_objects() for code in _examples(obj.__doc__)]
UNDOCUMENTED = [
    name
    for name, obj in _public_objects()
    if "." not in name and not inspect.isclass(obj) and not list(_examples(obj.__doc__))
]


@pytest.mark.parametrize("name,code", CASES, ids=[c[0] for c in CASES])
def test_docstring_example_runs(name, code):
    exec(compile(code, f"<docstring of tp.{name}>", "exec"), {})


def test_every_public_function_has_an_example():
    assert UNDOCUMENTED == []

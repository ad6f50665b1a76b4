"""tripy-run, the command-line runner: found on the venv's PATH, self-describing, and never
crashing on a bad input file."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tripy as tp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_RUNNER = os.path.join(sys.prefix, "bin", "tripy-run")
BUILD_RUNNER = os.path.join(ROOT, os.environ.get("TRIPY_BUILD_DIR", "build"), "core", "tripy-run")
RUNNER = VENV_RUNNER if os.path.exists(VENV_RUNNER) else BUILD_RUNNER
pytestmark = pytest.mark.skipif(not os.path.exists(RUNNER), reason="tripy-run is not built")


def _run(*args):
    return subprocess.run([RUNNER, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")

    def f(x, scale):
        return x * scale + 1.0

    info = tp.InputInfo(shape=((1, 2, 4), 3), dtype=tp.float32)
    tp.compile(f, args=[info, tp.InputInfo(shape=(3,), dtype=tp.float32)]).save(str(tmp / "f.tpy"))
    return tmp


@pytest.mark.skipif(
    os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(ROOT, ".venv")), reason="not the project's .venv"
)
def test_make_puts_tripy_run_in_the_venv():
    assert os.access(VENV_RUNNER, os.X_OK)


def test_help_describes_every_option():
    out = _run("--help")
    assert out.returncode == 0
    for option in ("FILE", "--input NAME=PATH.npy", "--input NAME=VALUE", "--zeros", "--help"):
        assert option in out.stdout


def test_no_arguments_prints_the_usage():
    out = _run()
    assert out.returncode == 1 and "usage: tripy-run" in out.stderr


def test_runs_on_npy_inputs(saved):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = np.array([1.0, -2.0, 0.5], np.float32)
    np.save(saved / "x.npy", x)
    np.save(saved / "s.npy", s)
    out = _run(saved / "f.tpy", "--input", f"x={saved / 'x.npy'}", "--input", f"scale={saved / 's.npy'}")
    assert out.returncode == 0, out.stderr
    assert "x: float32 [[1, 2, 4], [3, 3, 3]]" in out.stdout
    values = out.stdout.rsplit("= [", 1)[1].rstrip("]\n").split(", ")
    np.testing.assert_allclose(np.array(values, np.float32), (x * s + 1).ravel())


def test_an_unknown_input_names_the_inputs_there_are(saved):
    out = _run(saved / "f.tpy", "--input", "y=whatever.npy")
    assert out.returncode == 1
    assert "no input named 'y'" in out.stderr and "'x', 'scale'" in out.stderr


def _npy(path, shape_text, payload=b""):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape_text
    header += " " * (63 - len(header) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + payload)
    return path


@pytest.mark.parametrize(
    "shape_text",
    ["(-1, 8)", "(99999999999999999999, 8)", "(4611686018427387904, 8)", "(4294967296, 4294967296, 4)", "(2, x)", "(2, 4)"],
)
def test_a_crafted_npy_header_is_rejected_not_a_crash(saved, shape_text):
    bad = _npy(saved / "bad.npy", shape_text, payload=b"\0" * 12)
    out = _run(saved / "f.tpy", "--input", f"x={bad}", "--zeros")
    assert out.returncode == 1, out.stderr
    assert f"Cannot read '{bad}'" in out.stderr


@pytest.mark.parametrize(
    "content",
    [b"", b"\x93NUMPY", b"\x93NUMPY\x09\x00" + b"\0" * 20, b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'", b"not numpy at all"],
)
def test_a_truncated_or_foreign_npy_is_rejected(saved, content):
    bad = saved / "short.npy"
    bad.write_bytes(content)
    out = _run(saved / "f.tpy", "--input", f"x={bad}", "--zeros")
    assert out.returncode == 1 and f"Cannot read '{bad}'" in out.stderr, out.stderr


def test_a_directory_given_as_npy_is_rejected(saved):
    out = _run(saved / "f.tpy", "--input", f"x={saved}", "--zeros")
    assert out.returncode == 1 and "not a regular file" in out.stderr, out.stderr


def test_help_example_runs_on_the_readmes_mlp(tmp_path):
    # The README's first Python block saves mlp.tpy; each command of --help's example must run on it.
    readme = open(os.path.join(ROOT, "README.md")).read()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    example = _run("--help").stdout.split("Example", 1)[1].split("Exit status", 1)[0]
    commands = [line.strip() for line in example.splitlines()[1:] if line.strip()]
    assert any(c.startswith("tripy-run mlp.tpy --input") for c in commands)
    for command in commands:
        command = command.replace("python -c", f"{sys.executable} -c", 1).replace("tripy-run", RUNNER, 1)
        out = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (command, out.stderr)
        if "--input" in command:
            assert "return: float32 (8, 2)" in out.stdout

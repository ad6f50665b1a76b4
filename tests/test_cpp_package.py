"""The C++ runtime as a package: `cmake --install` it, then build and run the program that
docs/cpp.md shows, against the installed copy only, on an executable saved from Python."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tripy as tp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("TRIPY_BUILD_DIR", "build"))


def _doc_block(lang):
    text = open(os.path.join(ROOT, "docs", "cpp.md")).read()
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"docs/cpp.md should hold one {lang} block"
    return blocks[0]


def _sh(*cmd, cwd=None):
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def run_model(tmp_path_factory):
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")) or shutil.which("cmake") is None:
        pytest.skip("needs the CMake build tree and cmake")
    tmp = tmp_path_factory.mktemp("cpp")
    prefix, app = tmp / "prefix", tmp / "app"
    _sh("cmake", "--install", BUILD, "--prefix", str(prefix), "--component", "runtime")
    assert (prefix / "include" / "tripy" / "executable.h").exists()
    app.mkdir()
    (app / "run_model.cc").write_text(_doc_block("cpp"))
    (app / "CMakeLists.txt").write_text(_doc_block("cmake"))
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _sh("cmake", "-S", str(app), "-B", str(app / "build"), *gen, f"-DCMAKE_PREFIX_PATH={prefix}")
    _sh("cmake", "--build", str(app / "build"))
    return str(app / "build" / "run_model"), tmp


def test_the_documented_program_runs_a_saved_executable(run_model):
    exe_path, tmp = run_model

    def f(x, y):
        return tp.relu(x * 2.0 - y)

    info = tp.InputInfo(shape=((1, 2, 4), 3), dtype=tp.float32)
    tp.compile(f, args=[info, info]).save(str(tmp / "f.tpy"))
    out = subprocess.run([exe_path, str(tmp / "f.tpy")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = re.fullmatch(r"(\S+) \(2, 3\):((?: \S+)+)\n", out.stdout)
    assert m, out.stdout
    np.testing.assert_allclose(np.array(m.group(2).split(), np.float32), np.maximum(x * 2 - x, 0).ravel())


def test_the_documented_program_reports_a_missing_file(run_model):
    exe_path, tmp = run_model
    out = subprocess.run([exe_path, str(tmp / "missing.tpy")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "missing.tpy" in out.stderr and out.stdout == ""

"""Running out of memory is a TripyException that says how many bytes were asked for, for what,
at the user's line, and leaves the process usable (not a bare MemoryError, not an abort)."""

import os
import subprocess
import sys
import textwrap

import pytest

import tripy as tp

# Address-space limits cannot coexist with a sanitizer's shadow memory.
no_sanitizer = pytest.mark.skipif(bool(os.environ.get("TRIPY_SANITIZER")), reason="rlimits under a sanitizer")


def test_an_eager_tensor_too_large_for_memory_names_the_bytes_and_the_line():
    with pytest.raises(tp.TripyException) as e:
        tp.ones((10**5, 10**6)).eval()
    text = str(e.value)
    assert "400000000000 bytes" in text and "float32 (100000, 1000000)" in text
    assert f"test_allocation_errors.py:{e.tb.tb_lineno}" in text
    assert tp.ones((2,)).tolist() == [1.0, 1.0]  # still usable


def test_a_run_whose_dynamic_size_is_too_large_points_at_the_call():
    exe = tp.compile(lambda n: tp.full((n, 10**6), 1.0), args=[tp.DimensionInputInfo((1, 2, 10**7))])
    assert exe(2).shape == (2, 10**6)
    with pytest.raises(tp.TripyException, match="bytes") as e:
        exe(10**7)
    assert "40000000000000 bytes" in str(e.value) and "tp.full((n, 10**6), 1.0)" in str(e.value)
    assert f"test_allocation_errors.py:{e.tb.tb_lineno}" in str(e.value)
    assert exe(1).shape == (1, 10**6)


@no_sanitizer
def test_under_an_address_space_limit_python_gets_a_tripy_exception(tmp_path):
    script = textwrap.dedent(
        """
        import resource, tripy as tp
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        try:
            tp.ones((10**4, 10**5)).eval()  # 4 GB
        except tp.TripyException as e:
            print("caught:", str(e).splitlines()[-1])
        print(tp.ones((3,)).tolist())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "caught: Out of host memory: cannot allocate 4000000000 bytes" in out.stdout
    assert "[1.0, 1.0, 1.0]" in out.stdout


@no_sanitizer
def test_tripy_run_reports_running_out_of_memory_instead_of_aborting(tmp_path, tripy_run):
    runner = tripy_run
    path = tmp_path / "big.tpy"
    # Host memory is the point: on a GPU machine the CUDA driver alone needs more than 3 GiB of
    # address space, so the executable is built for the CPU.
    old = tp.config.default_device
    tp.config.default_device = "cpu"
    try:
        tp.compile(lambda n: tp.full((n, 1000), 1.0), args=[tp.DimensionInputInfo((1, 2, 10**7))]).save(str(path))
    finally:
        tp.config.default_device = old
    limit = "import resource, os, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); os.execv(sys.argv[1], sys.argv[1:])"
    out = subprocess.run([sys.executable, "-c", limit, runner, str(path), "--input", "n=2000000"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "Out of host memory: cannot allocate 8000000000 bytes" in out.stderr


def test_a_result_past_what_a_program_may_hold_names_the_op_and_its_line():
    # 2**40 + 2 float32 values: refused while the program is built, at the pad's line, in the
    # user's terms (not as an inconsistent program).
    with pytest.raises(tp.TripyException, match=r"The result of pad, of shape .* needs more than 2\*\*40 bytes") as e:
        tp.pad(tp.ones((2,)), [(0, 2**40)]).eval()
    assert "test_allocation_errors.py" in str(e.value) and "inconsistent" not in str(e.value)

"""Files and paths from a hostile user: saving never writes through a planted link or over a FIFO,
loading never blocks on a FIFO, a path with a NUL byte is refused instead of cut short, and a
plugin's CPU implementation may read tensors without deadlocking. Every error is a
tp.TripyException naming the user's line."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tripy as tp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.basename(__file__)


@pytest.fixture(scope="module")
def exe():
    return tp.compile(lambda x: x * 2.0, args=[tp.InputInfo(shape=(2,), dtype=tp.float32)])


def test_save_does_not_write_through_a_link_named_like_a_temporary_file(exe, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink("victim.txt", tmp_path / "x.tpy.tmp")
    exe.save(tmp_path / "x.tpy")
    assert victim.read_text() == "precious"
    assert os.path.islink(tmp_path / "x.tpy.tmp") and not os.path.islink(tmp_path / "x.tpy")
    assert tp.Executable.load(tmp_path / "x.tpy")(tp.Tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
    assert sorted(os.listdir(tmp_path)) == ["victim.txt", "x.tpy", "x.tpy.tmp"]


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "directory"])
def test_save_refuses_a_target_that_is_not_a_regular_file(exe, tmp_path, kind):
    target = tmp_path / "target.tpy"
    (tmp_path / "victim.txt").write_text("precious")
    {"symbolic link": lambda: os.symlink("victim.txt", target), "FIFO": lambda: os.mkfifo(target),
     "directory": lambda: os.mkdir(target)}[kind]()
    with pytest.raises(tp.TripyException, match=kind) as e:
        exe.save(target)
    assert str(target) in str(e.value) and HERE in str(e.value)
    assert (tmp_path / "victim.txt").read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["target.tpy", "victim.txt"]


def _in_subprocess(code, timeout=60):
    """Runs `code` in a fresh interpreter: a hang fails the test (TimeoutExpired) instead of CI."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_load_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "model.tpy"
    os.mkfifo(fifo)
    out = _in_subprocess(f"""
        import tripy as tp
        try:
            tp.Executable.load({str(fifo)!r})
        except tp.TripyException as e:
            print(e)
    """, timeout=30)
    assert "FIFO" in out.stdout and str(fifo) in out.stdout, (out.stdout, out.stderr)


def test_tripy_run_refuses_a_fifo_without_blocking(tmp_path, tripy_run):
    runner = tripy_run
    fifo = tmp_path / "model.tpy"
    os.mkfifo(fifo)
    out = subprocess.run([runner, str(fifo)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "FIFO" in out.stderr and str(fifo) in out.stderr, out.stderr


def test_paths_with_a_nul_byte_are_refused_naming_the_argument(exe, tmp_path):
    exe.save(tmp_path / "a")
    with pytest.raises(tp.TripyException, match="NUL byte") as e:
        tp.Executable.load(str(tmp_path / "a") + "\0b.tpy")
    assert "path" in str(e.value) and HERE in str(e.value)
    with pytest.raises(tp.TripyException, match="NUL byte") as e:
        exe.save(str(tmp_path / "n") + "\0ul.tpy")
    assert "path" in str(e.value) and HERE in str(e.value)
    with pytest.raises(tp.TripyException, match="NUL byte"):
        exe.save(os.fsencode(str(tmp_path / "d\0ir")) + b"/x.tpy")
    assert os.listdir(tmp_path) == ["a"]


def test_a_file_name_that_is_not_utf8_is_saved_loaded_and_reported(exe, tmp_path):
    name = os.fsdecode(b"caf\xff.tpy")  # what os.listdir gives for such a name
    exe.save(tmp_path / name)
    assert os.listdir(os.fsencode(tmp_path)) == [b"caf\xff.tpy"]
    assert tp.Executable.load(tmp_path / name)(tp.Tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
    os.mkfifo(tmp_path / os.fsdecode(b"f\xff.tpy"))
    with pytest.raises(tp.TripyException, match=r"f\\xff.tpy': it is a FIFO"):
        tp.Executable.load(tmp_path / os.fsdecode(b"f\xff.tpy"))


def test_a_plugin_cpu_implementation_may_read_tensor_values():
    # Before, the eager evaluation lock was taken again by the same thread: a deadlock.
    out = _in_subprocess("""
        import numpy as np
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugins have CPU implementations only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        def cpu(inputs, output):
            doubled = tp.Tensor(np.array(inputs[0])) * 2.0
            print("inside", doubled.tolist(), doubled)
            output[...] = np.asarray(doubled)

        tp.register_plugin("ReadsTensors", rule, cpu=cpu)
        x = tp.Tensor([1.0, 2.0])
        print(tp.plugin("ReadsTensors", [x], output_info=[(1, tp.float32)]).tolist())
        exe = tp.compile(lambda t: tp.plugin("ReadsTensors", [t], output_info=[(1, tp.float32)]) + 1.0,
                         args=[tp.InputInfo(shape=(2,), dtype=tp.float32)])
        print(exe(x).tolist())
    """)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("inside [2.0, 4.0] tensor(") and lines[1] == "[2.0, 4.0]", out.stdout
    assert lines[2].startswith("inside [2.0, 4.0] tensor(") and lines[3] == "[3.0, 5.0]", out.stdout


def test_a_plugin_cpu_implementation_may_call_its_own_plugin():
    # The nested call has the structure of the running one, whose cached program runs one call at
    # a time: the nested call gets a program of its own instead of waiting for it.
    out = _in_subprocess("""
        import numpy as np
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugins have CPU implementations only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        def count_up(inputs, output):
            a = np.array(inputs[0])
            if a[0] < 4:
                a = np.asarray(tp.plugin("CountUp", [tp.Tensor(a + 1)], output_info=[(1, tp.float32)]))
            output[...] = a

        tp.register_plugin("CountUp", rule, cpu=count_up)
        print(tp.plugin("CountUp", [tp.Tensor([1.0, 2.0])], output_info=[(1, tp.float32)]).tolist())
    """)
    assert out.returncode == 0 and out.stdout == "[4.0, 5.0]\n", (out.stdout, out.stderr)


def test_an_executable_called_from_its_own_plugin_fails_instead_of_hanging():
    out = _in_subprocess("""
        import numpy as np
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugins have CPU implementations only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        def calls_exe(inputs, output):
            output[...] = np.asarray(exe(tp.Tensor(np.array(inputs[0]))))

        tp.register_plugin("CallsExe", rule, cpu=calls_exe)
        exe = tp.compile(lambda t: tp.plugin("CallsExe", [t], output_info=[(1, tp.float32)]),
                         args=[tp.InputInfo(shape=(2,), dtype=tp.float32)])
        try:
            exe(tp.Tensor([1.0, 2.0]))
        except tp.TripyException as e:
            print(e)
    """)
    assert out.returncode == 0, out.stderr
    assert "CallsExe" in out.stdout and "already running on this thread" in out.stdout, out.stdout


def test_a_plugin_that_reads_its_own_output_fails_instead_of_hanging():
    out = _in_subprocess("""
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugins have CPU implementations only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        def cpu(inputs, output):
            output[...] = tp_output().tolist()

        tp.register_plugin("ReadsItself", rule, cpu=cpu)
        y = tp.plugin("ReadsItself", [tp.Tensor([1.0, 2.0])], output_info=[(1, tp.float32)])
        tp_output = lambda: y
        try:
            y.tolist()
        except tp.TripyException as e:
            print(e)
    """)
    assert out.returncode == 0, out.stderr
    assert "ReadsItself" in out.stdout and "read while it is being computed" in out.stdout, out.stdout


def test_an_executable_argument_evaluated_while_another_thread_runs_a_plugin_does_not_deadlock():
    # The thread running the plugin holds the eager lock and needs the GIL; the caller of the
    # executable waits for the eager lock to evaluate its lazy argument, without the GIL.
    out = _in_subprocess("""
        import threading
        import time
        import numpy as np
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugins have CPU implementations only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        def slow(inputs, output):
            time.sleep(0.3)
            output[...] = np.array(inputs[0])

        tp.register_plugin("Slow", rule, cpu=slow)
        exe = tp.compile(lambda t: t + 1.0, args=[tp.InputInfo(shape=(2,), dtype=tp.float32)])
        other = threading.Thread(target=lambda: tp.plugin("Slow", [tp.Tensor([1.0])], output_info=[(1, tp.float32)]).eval())
        other.start()
        time.sleep(0.1)
        result = exe(tp.Tensor([1.0, 2.0]) * 3.0)
        other.join()
        print(np.asarray(result).tolist())
    """)
    assert out.returncode == 0 and out.stdout == "[4.0, 7.0]\n", (out.stdout, out.stderr)


@pytest.mark.parametrize("read", ["t.tolist()", "np.from_dlpack(t).tolist()", "tp.copy(t, 'cpu').tolist()"])
def test_reading_values_while_another_thread_runs_a_plugin_does_not_deadlock(read):
    # The thread running the plugin holds the eager lock and needs the GIL for its Python CPU
    # implementation; the reader waits for the eager lock, so it must not hold the GIL meanwhile.
    out = _in_subprocess(f"""
        import threading
        import time
        import numpy as np
        import tripy as tp

        tp.config.default_device = "cpu"  # the plugin has a CPU implementation only

        def rule(inputs):
            return inputs[0].shape, inputs[0].dtype

        seen = []
        def slow(inputs, output):
            time.sleep(0.01)
            seen.append(np.array(inputs[0]).tolist())
            output[...] = np.array(inputs[0]) + 1.0

        tp.register_plugin("SlowPy", rule, cpu=slow)
        done = threading.Event()
        def run_plugins():
            for i in range(30):
                tp.plugin("SlowPy", [tp.Tensor([float(i)])], output_info=[(1, tp.float32)]).eval()
            done.set()
        other = threading.Thread(target=run_plugins)
        other.start()
        reads = 0
        while not done.is_set() or reads < 30:
            t = tp.Tensor([float(reads), 1.0]) * 2.0
            assert {read} == [2.0 * reads, 2.0], reads
            reads += 1
        other.join()
        print(len(seen), reads >= 30)
    """, timeout=30)
    assert out.returncode == 0 and out.stdout == "30 True\n", (out.stdout, out.stderr)

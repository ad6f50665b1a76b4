"""The logger: levels, flags, per-module verbosity, lazy messages and TRIPY_DEBUG."""

import inspect
import os
import subprocess
import sys

import pytest

from tripy.exception import TripyException
import tripy as tp
from tripy.logging import Logger, logger


@pytest.fixture
def log():
    return Logger(verbosity="warning")


def test_levels_enable_themselves_and_more_severe_ones(log, capsys):
    log.verbosity = "info"
    log.verbose("v")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert capsys.readouterr().err == "[tripy][info] i\n[tripy][warning] w\n[tripy][error] e\n"


def test_flags_are_independent_of_levels(log, capsys):
    log.verbosity = {"error", "ir"}
    log.warning("hidden")
    log.log("ir", "graph")
    log.log("timing", "hidden")
    assert capsys.readouterr().err == "[tripy][ir] graph\n"


def test_a_set_of_flags_keeps_the_default_level(log, capsys):
    log.verbosity = {"timing"}
    log.warning("w")
    log.info("hidden")
    log.log("timing", "t")
    assert capsys.readouterr().err == "[tripy][warning] w\n[tripy][timing] t\n"


def test_verbose_enables_everything(log):
    log.verbosity = "verbose"
    assert all(log.is_enabled(name) for name in ("verbose", "info", "trace", "ir", "timing", "kernels"))


def test_messages_are_built_only_when_shown(log, capsys):
    calls = []

    def build():
        calls.append(1)
        return "expensive"

    log.log("ir", build)
    assert calls == []
    log.verbosity = {"ir"}
    log.log("ir", build)
    assert calls == [1]
    assert capsys.readouterr().err == "[tripy][ir] expensive\n"


def test_use_verbosity_restores_the_previous_setting(log):
    with log.use_verbosity("verbose"):
        assert log.is_enabled("info")
    assert log.verbosity == "warning"
    assert not log.is_enabled("info")

    with pytest.raises(RuntimeError):
        with log.use_verbosity("error"):
            raise RuntimeError()
    assert log.verbosity == "warning"


def test_per_module_verbosity(log, capsys):
    log.verbosity = {"": "error", "tripy.frontend": "verbose", __name__: "info"}
    assert log.is_enabled("ir", module="tripy.frontend.ops")
    assert log.is_enabled("ir", module="tripy.frontend")
    assert not log.is_enabled("warning", module="tripy.frontendx")
    assert not log.is_enabled("warning", module="tripy")
    # Without a module, the calling module decides: this test file is at "info".
    log.info("mine")
    log.verbose("hidden")
    assert capsys.readouterr().err == "[tripy][info] mine\n"


def test_unknown_verbosity_is_rejected_with_a_suggestion(log):
    with pytest.raises(TripyException, match="Unknown verbosity: 'warn'.*Did you mean: 'warning'"):
        log.verbosity = "warn"
    with pytest.raises(TripyException, match="Unknown verbosity: 'kernel'"):
        log.log("kernel", "x")


@pytest.mark.parametrize(
    "level, flags",
    [("0", set()), ("1", {"timing"}), ("2", {"timing", "ir", "trace"}), ("3", {"timing", "ir", "trace", "kernels"})],
)
def test_tripy_debug_turns_on_flags(monkeypatch, level, flags):
    monkeypatch.setenv("TRIPY_DEBUG", level)
    debug_log = Logger()
    enabled = {flag for flag in ("trace", "ir", "timing", "kernels") if debug_log.is_enabled(flag)}
    assert enabled == flags
    assert debug_log.is_enabled("warning") and not debug_log.is_enabled("info")


def test_bad_tripy_debug_is_reported(monkeypatch):
    monkeypatch.setenv("TRIPY_DEBUG", "lots")
    with pytest.raises(TripyException, match="TRIPY_DEBUG must be an integer"):
        Logger()


def test_global_logger_exists():
    assert isinstance(logger, Logger)


def test_nvtripy_verbosity_names(capsys):
    from tripy.logging import Logger

    log = Logger(verbosity="error")
    log.verbosity = "mlir"
    assert log.is_enabled("ir") and not log.is_enabled("trace")
    log.verbosity = "ir"  # nvtripy: every IR dump
    assert log.is_enabled("ir") and log.is_enabled("trace")
    log.verbosity = {"timing"}
    log.timing("took 1 ms")
    log.trace("not shown")
    assert capsys.readouterr().err == "[tripy][timing] took 1 ms\n"


def test_enable_color_leaves_pipes_plain(capsys):
    from tripy.logging import Logger

    log = Logger(verbosity="warning")
    assert log.enable_color is True
    log.warning("plain when not a terminal")
    assert capsys.readouterr().err == "[tripy][warning] plain when not a terminal\n"
    assert tp.logger.enable_color in (True, False)


def test_timing_shows_where_a_compile_spent_its_time(capsys):
    with tp.logger.use_verbosity({"timing"}):
        tp.compile(lambda x: tp.relu(x) * 2.0, args=[tp.InputInfo((4,), dtype=tp.float32)])
    err = capsys.readouterr().err
    assert err.startswith("[tripy][timing] timing:\n"), err
    stages = [line.split()[0] for line in err.splitlines()[1:] if line.strip()]
    assert stages[:3] == ["tracing", "lowering", "constant_fold"], stages
    assert stages[-2:] == ["program", "build"], stages
    assert all(line.rstrip().endswith(" ms") for line in err.splitlines()[1:] if line.strip())



def _fresh_shape():
    # A shape no other test evaluates, so the eager cache has not compiled it yet.
    _fresh_shape.n = getattr(_fresh_shape, "n", 0) + 1
    return (3, 40 + _fresh_shape.n)


def test_timing_shows_each_eager_evaluation(capsys):
    shape = _fresh_shape()
    with tp.logger.use_verbosity({"timing"}):
        value = tp.gelu(tp.ones(shape) * 2.0)  # the line the dump names
        line = inspect.currentframe().f_lineno - 1
        value.eval()
        again = (tp.gelu(tp.ones(shape) * 2.0)).eval()  # same structure: a cache hit
    assert value.tolist() == again.tolist()
    err = capsys.readouterr().err
    blocks = [b for b in err.split("[tripy][") if b.startswith("timing] eager.timing:")]
    assert len(blocks) == 2, err
    first, second = blocks
    assert f"test_logging.py:{line} (test_timing_shows_each_eager_evaluation)" in first
    assert "compiled " in first and " ms" in first.split("compiled", 1)[1].splitlines()[0]
    assert "kernel 0   fused" in first and "ran " in first
    assert "compiled                  cached" in second
    assert "trace]" not in err and "ir]" not in err  # only the flags asked for


def test_trace_and_ir_show_the_eager_graph_and_its_kernels(capsys):
    with tp.logger.use_verbosity({"trace", "ir", "kernels"}):
        tp.relu(tp.ones(_fresh_shape()) - 1.0).eval()
    err = capsys.readouterr().err
    assert "[tripy][trace] eager:\nevaluating t" in err
    assert "= relu(" in err and "= sub(" in err
    assert "[tripy][ir] flat:" in err and "[tripy][ir] program:" in err
    assert "[tripy][kernels] kernels:\nk0 fused" in err
    assert "eager.timing" not in err


def test_a_failing_eager_evaluation_shows_its_graph(capsys, monkeypatch):
    # On the CPU the gather fails while its graph is evaluated. A GPU kernel records the index and
    # the error reaches the host at the next synchronisation, after the graph is gone.
    monkeypatch.setattr(tp.config, "default_device", "cpu")
    with tp.logger.use_verbosity({"timing"}):
        bad = tp.gather(tp.ones((2,)), 0, tp.Tensor([0, 5]))
        with pytest.raises(TripyException, match="out of bounds"):
            bad.eval()
    err = capsys.readouterr().err
    assert "[tripy][timing] eager.failed:\nevaluating t" in err
    failed = err.split("eager.failed:", 1)[1]
    assert "failed: " in failed and "out of bounds" in failed and "= gather(" in failed


def test_eager_dumps_stop_with_the_verbosity(capsys):
    with tp.logger.use_verbosity({"timing", "trace"}):
        pass
    tp.exp(tp.ones(_fresh_shape())).eval()
    assert capsys.readouterr().err == ""


def test_tripy_debug_covers_eager_evaluation_in_a_fresh_process():
    code = "import tripy as tp; print(tp.ones((2, 3)) * 3.0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TRIPY_DEBUG": "2"})
    assert out.returncode == 0, out.stderr
    assert "3.0000" in out.stdout
    assert "[tripy][trace] eager:" in out.stderr and "[tripy][timing] eager.timing:" in out.stderr
    assert "[tripy][ir] program:" in out.stderr

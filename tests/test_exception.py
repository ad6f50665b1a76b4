"""Uncaught TripyExceptions print a traceback of the user's frames only (the message already
points at the user's line); other exceptions, and TRIPY_EXTRA_ERROR_INFORMATION=all, keep all."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPE_ERROR = """
import tripy as tp
a = tp.ones((2, 3))
b = tp.ones((4, 3))
c = a + b
"""

# The same error through an op function (the operators are methods of the core, without frames).
SHAPE_ERROR_IN_AN_OP = """
import tripy as tp
a = tp.ones((2, 3))
b = tp.ones((4, 3))
c = tp.maximum(a, b)
"""

OTHER_ERROR = """
import json
import tripy as tp
json.loads("{")
"""


def run_script(code, tmp_path, extra_error_information=None):
    path = tmp_path / "user_script.py"
    path.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TRIPY_DEVICE="cpu")
    env.pop("TRIPY_EXTRA_ERROR_INFORMATION", None)
    if extra_error_information:
        env["TRIPY_EXTRA_ERROR_INFORMATION"] = extra_error_information
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120)


def test_traceback_shows_only_the_users_frames(tmp_path):
    err = run_script(SHAPE_ERROR, tmp_path).stderr
    assert "TripyException" in err and 'user_script.py", line 5' in err
    assert os.path.join("tripy", "frontend") not in err


def test_extra_error_information_keeps_tripys_frames(tmp_path):
    err = run_script(SHAPE_ERROR_IN_AN_OP, tmp_path, extra_error_information="all").stderr
    # tp.maximum (ops/elementwise.py) builds through make (trace_call.py).
    assert os.path.join("tripy", "frontend", "ops", "elementwise.py") in err
    assert os.path.join("tripy", "frontend", "trace_call.py") in err
    err = run_script(SHAPE_ERROR_IN_AN_OP, tmp_path).stderr
    assert "TripyException" in err and os.path.join("tripy", "frontend") not in err


def test_other_exceptions_keep_every_frame(tmp_path):
    err = run_script(OTHER_ERROR, tmp_path).stderr
    assert "JSONDecodeError" in err and os.path.join("json", "decoder.py") in err

"""bench/eager.py runs on the CPU: each eager case agrees with numpy before it is timed, torch's
twin is timed where torch is importable, and the first op of a fresh process is measured with an
empty and a warm kernel cache."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_cpu_run_times_every_case_and_the_first_op():
    path = [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "eager.py"), "--device", "cpu", "--quick"],
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(path)), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for case in ("a + b, 2x3", "a + b, 1000x1000", "LayerNorm+Linear+GELU, 16x256->512"):
        row = next(line for line in out.stdout.splitlines() if line.startswith(case))
        assert float(re.findall(r"([0-9.]+) us", row)[0]) > 0, row
    firsts = re.findall(r"first op of a process, (empty|warm) kernel cache: ([0-9.]+) ms", out.stdout)
    assert [kind for kind, _ in firsts] == ["empty", "warm"], out.stdout

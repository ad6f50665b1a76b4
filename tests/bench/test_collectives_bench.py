"""bench/collectives.py runs its chains of all-reduces and all-gathers on CPU ranks (the GPUs'
run needs torchrun and two GPUs): the chains keep their values, and a row per size is printed."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cpu_ranks_time_both_collectives():
    path = [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "collectives.py"), "--cpu-ranks", "2",
                          "--sizes", "8"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(path)),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line.split("|") for line in out.stdout.splitlines() if line.strip().startswith("8 |")]
    assert len(rows) == 1 and all(float(v) > 0 for v in rows[0][1:]), out.stdout

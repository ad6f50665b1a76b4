"""bench/llm.py, the LLM benchmark, runs in CI on its tiny shape on the CPU: it writes a checkpoint,
loads, compiles and times it, and prints one record per run and a table."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tiny_cpu_run_prints_a_record_and_the_table():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "cpu", "--steps", "4",
                          "--prompts", "16", "--batches", "1,2"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [(r["shape"], r["batch"], r["prompt"]) for r in records] == [("tiny", 1, 16), ("tiny", 2, 16)]
    for r in records:
        assert r["tripy_ms"] > 0 and r["tripy_tok_s"] > 0 and r["tripy_prefill_tok_s"] > 0
    assert out.stdout.splitlines()[-3].startswith("shape | dtype | batch | prompt | tripy_ms")

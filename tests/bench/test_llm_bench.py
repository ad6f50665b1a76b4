"""bench/llm.py, the LLM benchmark, runs in CI on its tiny shape on the CPU: it writes a checkpoint,
loads, compiles and times it, and prints one record per run and a table; with --devices 2, the
run over 2 CPU ranks beside one rank's, and on GPUs outside torchrun an error saying how to start it."""

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


def test_two_cpu_ranks_print_their_row_beside_one_ranks():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "cpu", "--steps", "4",
                          "--prompts", "16", "--devices", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    one, two = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert "devices" not in one and two["devices"] == 2
    assert two["tripy_ms"] > 0 and two["vs_one"] == one["tripy_ms"] / two["tripy_ms"]
    # The sharded greedy tokens are the one rank's (32 steps of the tiny model).
    assert two["same_tokens"] is True
    table = out.stdout.splitlines()[-3:]
    assert table[0].startswith("shape | dtype | devices | batch | prompt | tripy_ms | vs_one | same_tokens")
    assert table[1].split(" | ")[2] == "-" and table[2].split(" | ")[2] == "2"


def test_devices_on_gpus_outside_torchrun_says_how_to_start_it():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "llm.py"), "--device", "gpu", "--devices", "2"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and out.stdout == ""
    assert "--devices 2 on GPUs runs one process per GPU: start it with torchrun --nproc-per-node 2 bench/llm.py" in out.stderr

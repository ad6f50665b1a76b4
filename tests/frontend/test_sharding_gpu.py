"""Tensor parallelism on two GPUs through NCCL: one process driving both (a thread each), and one
process per GPU as torchrun starts them
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; tp.DeviceMesh.from_environment): a sharded
MLP, all-reduce, all-gather (an inner dim too) and reduce-scatter in float32 and bfloat16, all-reduces and
all-gathers on both sides of the one-shot kernel's size limits, the tiny Llama's prefill and decode steps (replayed as
CUDA graphs) against numpy; a rank that never reaches an all-reduce makes the other's fail with
an error naming it. Skipped without two GPUs."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.usefixtures("two_gpus")


# The parts both scripts run over their `mesh` (rank weights from `rng`): the sharded MLP, compiled
# as `exe` (with `want`, its output for `x`), and the tiny Llama's steps, `llm`, checked against
# numpy by check_llm(caches).
SHARDED_MLP = """
    w1, b1, w2, b2 = (rng.standard_normal(s).astype(np.float32) for s in ((64, 16), (64,), (16, 64), (16,)))

    class MLP(tp.Module):
        def __init__(self):
            super().__init__()
            self.up = tp.Linear(16, 64, parallel=tp.ColumnParallel())
            self.down = tp.Linear(64, 16, parallel=tp.RowParallel())

        def forward(self, x):
            return self.down(tp.relu(self.up(x)))

    mlp = MLP()
    mlp.up.load_state_dict({"weight": tp.Tensor(w1), "bias": tp.Tensor(b1)})
    mlp.down.load_state_dict({"weight": tp.Tensor(w2), "bias": tp.Tensor(b2)})
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 4, 8), 16), dtype=tp.float32)], mesh=mesh)
    want = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
"""
TINY_LLAMA = """
    config = llama_ref.tiny_config(num_key_value_heads=4, vocab_size=96)
    weights = llama_ref.random_weights(config, seed=1)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config), max_seq_len=16)
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})

    def step(tokens, pos, *caches):
        return model(tokens, pos, list(caches))[0]

    cache = tp.InputInfo(model.cache_shape(2, 2), dtype=tp.float32, donate=True)
    args = [tp.InputInfo((2, (1, 4, 8)), dtype=tp.int32), tp.InputInfo((1,), dtype=tp.int32)] + [cache] * 4
    llm = tp.compile(step, args=args, mesh=mesh)
    prompt = np.array([[3, 17, 42, 5, 9, 61], [8, 1, 2, 3, 4, 5]])

    def check_llm(caches):
        for pos, T in [(0, 4), (4, 1), (5, 1)]:
            got = llm(tp.Tensor(prompt[:, pos : pos + T].astype(np.int32)), tp.Tensor(np.array([pos], np.int32)), *caches)
            got = np.asarray(tp.copy(got, tp.device("cpu")))
            want = llama_ref.logits(weights, prompt[:, : pos + T], config)[:, -1]
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
"""

WORKER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tripy as tp
    sys.path.insert(0, sys.argv[1])
    import llama_ref
    from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

    mesh = tp.DeviceMesh.from_environment()
    assert mesh.size == 2
    rng = np.random.default_rng(0)  # the same weights and inputs on every rank
    x = rng.standard_normal((4, 16)).astype(np.float32)
    """
    + SHARDED_MLP
    + """
    for _ in range(3):  # the second call on replays the CUDA graph, NCCL's kernels in it
        np.testing.assert_allclose(np.asarray(tp.copy(exe(tp.Tensor(x)), tp.device("cpu"))), want, rtol=1e-4, atol=1e-4)

    rank = mesh._rank
    for dtype in (tp.float32, tp.bfloat16):
        f = tp.compile(lambda t: (tp.all_reduce(t), tp.all_gather(t, dim=1)), args=[tp.InputInfo((2, 3, 4), dtype=dtype)], mesh=mesh)
        mine = (np.arange(24).reshape(2, 3, 4) * (rank + 1)).astype(np.float32)
        total, gathered = f(tp.cast(tp.Tensor(mine), dtype))
        parts = [np.arange(24).reshape(2, 3, 4) * (r + 1) for r in range(2)]
        np.testing.assert_array_equal(np.asarray(tp.copy(tp.cast(total, tp.float32), tp.device("cpu"))), sum(parts))
        np.testing.assert_array_equal(np.asarray(tp.copy(tp.cast(gathered, tp.float32), tp.device("cpu"))),
                                      np.concatenate(parts, axis=1))
        # NCCL's reduce-scatter: each rank's share of the sum, split along dim 0 (one block) and dim 1
        # (two blocks, regrouped before NCCL's split).
        for dim in (0, 1):
            g = tp.compile(lambda t: tp.reduce_scatter(t, dim), args=[tp.InputInfo((2, 4, 6), dtype=dtype)], mesh=mesh)
            mine = (np.arange(48).reshape(2, 4, 6) * (rank + 1) - 7).astype(np.float32)
            for _ in range(3):  # graph replays too
                share = np.asarray(tp.copy(tp.cast(g(tp.cast(tp.Tensor(mine), dtype)), tp.float32), tp.device("cpu")))
                total = sum((np.arange(48).reshape(2, 4, 6) * (r + 1) - 7) for r in range(2))
                np.testing.assert_array_equal(share, np.split(total, 2, axis=dim)[rank])

    # The one-shot all-reduce (sent with its epoch up to 64 KiB per rank, staged up to 1 MiB) and
    # NCCL's (past it): odd counts, each float width, int32 and int64, against numpy; then many calls
    # in a row (graph replays: the kernel's epochs and alternating buffers) with other values each time.
    for n, dtype in [(4097, tp.float32), (262144, tp.bfloat16), (300001, tp.float32), (1000, tp.int32), (5, tp.float16),
                     (32768, tp.bfloat16), (16385, tp.float32), (33, tp.int64)]:
        f = tp.compile(lambda t: tp.all_reduce(t), args=[tp.InputInfo((n,), dtype=dtype)], mesh=mesh)
        for call in range(3 if n > 5000 else 40):
            mine = ((np.arange(n) % 61) * (rank + 1) + call).astype(np.float32)
            want = sum(((np.arange(n) % 61) * (r + 1) + call).astype(np.float32) for r in range(2))
            got = f(tp.cast(tp.Tensor(mine), dtype))
            got = np.asarray(tp.copy(tp.cast(got, tp.float32) if dtype != tp.int32 else got, tp.device("cpu")))
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"{n} {dtype} call {call}")

    # Both one-shot forms in one program, in turns: each advances the epochs the other reads.
    both = tp.compile(lambda t, u: (tp.all_reduce(t), tp.all_reduce(u), tp.all_reduce(t * 2.0)),
                      args=[tp.InputInfo((300,), dtype=tp.float32), tp.InputInfo((70000,), dtype=tp.float32)], mesh=mesh)
    for call in range(7):
        t, u = (((np.arange(n) % 31) * (rank + 1) + call).astype(np.float32) for n in (300, 70000))
        got = [np.asarray(tp.copy(g, tp.device("cpu"))) for g in both(tp.Tensor(t), tp.Tensor(u))]
        sums = [sum(((np.arange(n) % 31) * (r + 1) + call).astype(np.float32) for r in range(2)) for n in (300, 70000)]
        for g, w in zip(got, [sums[0], sums[1], 2 * sums[0]]):
            np.testing.assert_array_equal(g, w, err_msg=f"call {call}")

    # A decode step's residual add and RMSNorm after each all-reduce, twice in a chain, beside a
    # one-shot all-reduce of float32 and an all-gather; many calls, other values each time.
    norm1, norm2 = tp.RMSNorm(4096, dtype=tp.bfloat16), tp.RMSNorm(4096, dtype=tp.bfloat16)
    g1, g2 = (rng.uniform(0.5, 1.5, 4096).astype(np.float32) for _ in range(2))
    norm1.load_state_dict({"weight": tp.cast(tp.Tensor(g1), tp.bfloat16)})
    norm2.load_state_dict({"weight": tp.cast(tp.Tensor(g2), tp.bfloat16)})

    def layer(x, p, q):
        h = x + tp.all_reduce(p)
        n = norm1(h)
        h2 = h + tp.all_reduce(n * 0.5)
        return norm2(h2), tp.all_reduce(q), tp.all_gather(n, dim=1)

    bf16 = tp.InputInfo((1, 4096), dtype=tp.bfloat16)
    folded = tp.compile(layer, args=[bf16, bf16, tp.InputInfo((1, 100), dtype=tp.float32)], mesh=mesh)

    def as_bf16(a):  # float32 rounded to bfloat16 (to nearest even), as float32
        bits = a.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)

    def rms(h, g):
        return as_bf16(h / np.sqrt(np.mean(h * h, -1, keepdims=True) + 1e-5) * as_bf16(g))

    for call in range(12):
        xs, ps = (np.random.default_rng(seed + call).standard_normal((2, 1, 4096)).astype(np.float32) for seed in (100, 300))
        qs = np.random.default_rng(200 + call).standard_normal((2, 1, 100)).astype(np.float32)
        ins = [tp.cast(tp.Tensor(a[rank]), tp.bfloat16) for a in (xs, ps)] + [tp.Tensor(qs[rank])]
        out, total, gathered = (np.asarray(tp.copy(tp.cast(o, tp.float32), tp.device("cpu"))) for o in folded(*ins))
        p = as_bf16(as_bf16(ps[0]) + as_bf16(ps[1]))
        hs = [as_bf16(as_bf16(xs[r]) + p) for r in range(2)]
        ns = [rms(h, g1) for h in hs]
        h2 = as_bf16(hs[rank] + as_bf16(sum(as_bf16(n * 0.5) for n in ns)))
        np.testing.assert_allclose(out, rms(h2, g2), rtol=2e-2, atol=2e-2, err_msg=f"call {call}")
        np.testing.assert_allclose(gathered, np.concatenate(ns, axis=1), rtol=2e-2, atol=2e-2, err_msg=f"call {call}")
        np.testing.assert_array_equal(total, qs[0] + qs[1], err_msg=f"call {call}")

    # All-gathers on both sides of the same limit, along the first and an inner dim.
    for shape, dim, dtype in [((3, 4097), 1, tp.bfloat16), ((2, 1024), 0, tp.float32), ((300001,), 0, tp.float32),
                              ((4, 6, 16), 2, tp.float16), ((8, 2048), 0, tp.float32), ((2, 40000), 1, tp.bfloat16)]:
        g = tp.compile(lambda t: tp.all_gather(t, dim=dim), args=[tp.InputInfo(shape, dtype=dtype)], mesh=mesh)
        for call in range(5):
            parts = [((np.arange(np.prod(shape)) % 53) * (r + 1) + call).reshape(shape).astype(np.float32) for r in range(2)]
            got = np.asarray(tp.copy(tp.cast(g(tp.cast(tp.Tensor(parts[rank]), dtype)), tp.float32), tp.device("cpu")))
            np.testing.assert_array_equal(got, np.concatenate(parts, axis=dim), err_msg=f"{shape} {dim} call {call}")

    """
    + TINY_LLAMA
    + """
    check_llm(model.empty_caches(2, 2))
    print("RANK OK")
    """
)


# One process driving both GPUs, a thread each (tp.DeviceMesh(["gpu:0", "gpu:1"])): tensors on
# gpu:1, copies between the GPUs, an eager op there, then the sharded MLP and collectives (one-shot
# through peer access, NCCL's past 1 MiB) and the tiny Llama's steps against numpy, the unsharded
# model on gpu:0 beside.
IN_PROCESS = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tripy as tp
    sys.path.insert(0, sys.argv[1])
    import llama_ref
    from tripy.llm.llama import LlamaConfig, LlamaForCausalLM

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    on1 = tp.Tensor(x, device="gpu:1")
    assert str(on1.device) == "gpu:1", on1.device
    doubled = on1 * 2.0  # an eager op on gpu:1
    assert str(doubled.device) == "gpu:1"
    np.testing.assert_array_equal(np.asarray(tp.copy(doubled, tp.device("cpu"))), x * 2)
    on0 = tp.copy(doubled, tp.device("gpu:0"))
    assert str(on0.device) == "gpu:0"
    np.testing.assert_array_equal(np.asarray(tp.copy(on0, tp.device("cpu"))), x * 2)
    try:
        tp.compile(lambda t: t + 1.0, args=[tp.InputInfo((4, 16), dtype=tp.float32)])(on1)
        raise AssertionError("a gpu:0 executable took a gpu:1 tensor")
    except tp.TripyException as e:
        assert "is on gpu:1, but this executable runs on gpu:0" in str(e), str(e)

    mesh = tp.DeviceMesh(["gpu:0", "gpu:1"])
    """
    + SHARDED_MLP
    + """
    for _ in range(3):  # the second call on replays each GPU's CUDA graph
        out = exe(tp.Tensor(x))  # one gpu:0 tensor: rank 1 gets its copy
        assert str(out.device) == "gpu:0"
        np.testing.assert_allclose(np.asarray(tp.copy(out, tp.device("cpu"))), want, rtol=1e-4, atol=1e-4)

    f = tp.compile(lambda t: (tp.all_reduce(t), tp.all_gather(t, dim=1)), args=[tp.InputInfo((2, 3, 4), dtype=tp.bfloat16)],
                   mesh=mesh)
    parts = [np.arange(24).reshape(2, 3, 4) * (r + 1) for r in range(2)]
    ins = [tp.cast(tp.Tensor(p.astype(np.float32), device=f"gpu:{r}"), tp.bfloat16) for r, p in enumerate(parts)]
    total, gathered = f(ins)
    np.testing.assert_array_equal(np.asarray(tp.copy(tp.cast(total, tp.float32), tp.device("cpu"))), sum(parts))
    np.testing.assert_array_equal(np.asarray(tp.copy(tp.cast(gathered, tp.float32), tp.device("cpu"))),
                                  np.concatenate(parts, axis=1))

    # Between this process's GPUs the one-shot all-reduce reaches the other's memory by peer access:
    # sent with its epoch, staged and NCCL's (past 1 MiB a rank), many calls, other values each time.
    for n, dtype in [(4097, tp.float32), (262144, tp.bfloat16), (300001, tp.float32), (33, tp.int64)]:
        f = tp.compile(lambda t: tp.all_reduce(t), args=[tp.InputInfo((n,), dtype=dtype)], mesh=mesh)
        for call in range(3 if n > 5000 else 40):
            parts = [((np.arange(n) % 61) * (r + 1) + call).astype(np.float32) for r in range(2)]
            got = f([tp.cast(tp.Tensor(p, device=f"gpu:{r}"), dtype) for r, p in enumerate(parts)])
            got = np.asarray(tp.copy(tp.cast(got, tp.float32), tp.device("cpu")))
            np.testing.assert_array_equal(got, parts[0] + parts[1], err_msg=f"{n} {dtype} call {call}")

    """
    + TINY_LLAMA
    + """
    check_llm([[tp.copy(c, tp.device(f"gpu:{r}")) for r in range(2)] for c in model.empty_caches(2, 2)])
    print("PROCESS OK")
    """
)


def test_one_process_drives_both_gpus_a_thread_each(tmp_path):
    script = tmp_path / "in_process.py"
    script.write_text(IN_PROCESS)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TRIPY_CUDA_DEVICE")}
    env["NCCL_NVLS_ENABLE"] = "0"
    out = subprocess.run([sys.executable, str(script), os.path.join(ROOT, "tests", "llm")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "PROCESS OK" in out.stdout, (out.stdout + out.stderr)[-4000:]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Rank 0 stops calling after the first call (it waits, then leaves); rank 1's second call waits for
# it at the one-shot all-reduce until the timeout, then an NCCL all-gather (past the one-shot's
# size) waits until the watchdog aborts the communicator.
ABSENT_RANK = textwrap.dedent(
    """
    import time
    import numpy as np
    import tripy as tp

    mesh = tp.DeviceMesh.from_environment()
    f = tp.compile(lambda t: tp.all_reduce(t) * 2.0, args=[tp.InputInfo((64,), dtype=tp.float32)], mesh=mesh)
    x = tp.Tensor(np.ones(64, np.float32))
    assert np.asarray(tp.copy(f(x), tp.device("cpu"))).tolist() == [4.0] * 64
    g = tp.compile(lambda t: tp.all_gather(t, dim=0), args=[tp.InputInfo((300001,), dtype=tp.float32)], mesh=mesh)
    if mesh._rank == 0:
        time.sleep(30)
        print("RANK OK")
    else:
        try:
            np.asarray(tp.copy(f(x), tp.device("cpu")))
            raise AssertionError("the one-shot all-reduce without rank 0 returned")
        except tp.TripyException as e:
            assert "rank 1 waited more than 3 s for rank 0 at this all-reduce" in str(e), str(e)
        start = time.monotonic()
        try:
            np.asarray(tp.copy(g(tp.Tensor(np.ones(300001, np.float32))), tp.device("cpu")))
            raise AssertionError("the NCCL all-gather without rank 0 returned")
        except tp.TripyException as e:
            assert "waited more than 3 s for the other ranks" in str(e) and "aborted" in str(e), str(e)
        assert time.monotonic() - start < 20
        print("RANK OK")
    """
)


def _run_ranks(tmp_path, worker, timeout_s):
    script = tmp_path / "worker.py"
    script.write_text(worker)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TRIPY_BOOTSTRAP_PORT=str(port), NCCL_NVLS_ENABLE="0",
                   TRIPY_COLLECTIVE_TIMEOUT=str(timeout_s))
        procs.append(subprocess.Popen([sys.executable, str(script), os.path.join(ROOT, "tests", "llm")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=600)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank hung")
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and "RANK OK" in out, f"rank {rank}:\n{out[-4000:]}"


def test_two_processes_one_gpu_each_match_numpy(tmp_path):
    _run_ranks(tmp_path, WORKER, 120)


def test_a_rank_that_never_arrives_fails_the_others_all_reduce_naming_it(tmp_path):
    _run_ranks(tmp_path, ABSENT_RANK, 3)

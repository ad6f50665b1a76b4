"""Collectives on GPUs inside one compiled executable (CUDA graph replays), one process per GPU
under torchrun: the time per all-reduce and per all-gather, from a function of 33 chained
collectives (each followed by a small elementwise kernel: an all-reduce's scaling by 1 / ranks, an
all-gather's slice of rank 0's part, which keep the values) against one, best of 20 batches of 20
calls, the two chains' batches in turn. Small messages run as Tripy's one-shot kernel; --nccl runs every collective
through NCCL (TRIPY_ONESHOT_COLLECTIVES=0) to compare.

--cpu-ranks N runs N CPU ranks in this process instead (the host's collectives; a check of the
benchmark itself more than a measurement).

Run: torchrun --nproc-per-node 2 bench/collectives.py [--nccl] [--sizes 8,16,128,512]
     python bench/collectives.py --cpu-ranks 2 [--sizes 8]
"""

import argparse
import os
import time

import numpy as np


def per_collective_us(tp, mesh, collective, n, sync):
    """Microseconds per collective (and its elementwise kernel) at n bfloat16 elements per rank."""
    exes = {}
    for k in (1, 33):
        def f(x, k=k):
            for _ in range(k):
                x = collective(x)
            return x

        exes[k] = tp.compile(f, args=[tp.InputInfo((1, n), dtype=tp.bfloat16)], mesh=mesh)
    x = tp.cast(tp.Tensor(np.ones((1, n), np.float32)), tp.bfloat16)
    best = {k: float("inf") for k in exes}
    for k, exe in exes.items():
        for _ in range(5):
            y = exe(x)
        sync()
        value = np.asarray(tp.copy(tp.cast(y, tp.float32), tp.device("cpu")))
        if not np.all(value == 1.0):
            raise SystemExit(f"a chain of collectives of {n} elements gave {value.min()}..{value.max()}, not 1")
    # The two chains' batches alternate, so that a busy moment of the host slows both alike.
    for _ in range(20):
        for k, exe in exes.items():
            t0 = time.perf_counter()
            for _ in range(20):
                exe(x)
            sync()
            best[k] = min(best[k], (time.perf_counter() - t0) / 20)
    return (best[33] - best[1]) / 32 * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nccl", action="store_true", help="every collective through NCCL")
    parser.add_argument("--sizes", default="8,16,128,512", help="KiB per rank (bfloat16)")
    parser.add_argument("--cpu-ranks", type=int, default=0, metavar="N", help="N CPU ranks of this process")
    args = parser.parse_args()
    if args.nccl:
        os.environ["TRIPY_ONESHOT_COLLECTIVES"] = "0"
    import tripy as tp

    if args.cpu_ranks:
        tp.config.default_device = "cpu"
        mesh, sync, which = tp.DeviceMesh(["cpu"] * args.cpu_ranks), (lambda: None), "CPU ranks"
    else:
        mesh, sync = tp.DeviceMesh.from_environment(), tp.default_stream().synchronize
        which = "NCCL" if args.nccl else "one-shot where it fits"
    prints = mesh._rank in (None, 0)
    if prints:
        print(f"{mesh.size} ranks, {which}: microseconds per collective and its elementwise kernel, bfloat16")
        print("KiB per rank | all_reduce | all_gather")
    for kib in map(int, args.sizes.split(",")):
        n = kib * 1024 // 2
        reduce_us = per_collective_us(tp, mesh, lambda x: tp.all_reduce(x) * (1.0 / mesh.size), n, sync)
        gather_us = per_collective_us(tp, mesh, lambda x: tp.all_gather(x, dim=1)[:, :n], n, sync)
        if prints:
            print(f"{kib:>12} | {reduce_us:>10.2f} | {gather_us:>10.2f}", flush=True)


if __name__ == "__main__":
    main()

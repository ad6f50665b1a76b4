"""How the benchmarks time a call (shared by gpu_bench.py and models.py): a few warm-up calls, then
batches of back-to-back calls each ended by one synchronisation, and the median over batches. On a
GPU the calls queue asynchronously, so per-call numbers include launch cost as users see it."""

import atexit
import os
import shutil
import statistics
import tempfile
import time

# Compile caches: the variables that name them, read when the libraries start (so set before
# importing tripy or torch).
CACHE_VARIABLES = ("TRIPY_CACHE_DIR", "CUDA_CACHE_PATH", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def empty_caches():
    """Points every compile cache at a new empty directory, removed at exit."""
    root = tempfile.mkdtemp(prefix="tripy-bench-caches-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name in CACHE_VARIABLES:
        os.environ[name] = os.path.join(root, name.lower())


def no_sync():
    """The synchronisation for host-side (CPU) calls, which return only when done."""


def median_seconds(fn, budget_s, sync=no_sync, min_batch_s=0.02, warmup=3):
    """Median seconds per call of ``fn()`` over batches lasting about ``min_batch_s`` each, with as
    many batches (5 to 50) as fit in ``budget_s``; ``sync()`` waits for queued device work."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(min_batch_s / one))
    repeats = max(5, min(50, int(budget_s / (one * number))))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def first_call_seconds(fn, sync=no_sync):
    """Seconds from calling ``fn()`` until its work is done: for JIT compilers, the compile time."""
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out

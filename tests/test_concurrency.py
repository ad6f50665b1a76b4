"""Threads sharing Tripy objects: 8 threads evaluating one shared lazy tensor, one executable
called from 8 threads, 8 threads building and evaluating graphs of their own, 8 threads compiling
at once (their own functions, and one module), sharded executables over CPU meshes called from 8
threads (each rank on a thread the calls share). `make test-tsan` runs this file through a
TSan-instrumented module."""

import threading

import numpy as np

import tripy as tp

THREADS = 8


def _in_threads(work):
    errors = []

    def run(i):
        try:
            work(i)
        except BaseException as e:  # reported on the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_eight_threads_evaluate_one_shared_lazy_tensor():
    for _ in range(10):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        x = tp.Tensor(a)
        y = tp.exp(x * 0.1) + tp.sum(x, dim=1, keepdim=True)
        chain = [y]
        for i in range(THREADS):
            chain.append(chain[-1] * 0.5 + x)
        results = [None] * THREADS

        def work(i):
            chain[i].eval()  # releases the GIL: the evaluations overlap
            results[i] = np.asarray(chain[-1])  # every thread reads the same lazy tensor

        _in_threads(work)
        want = np.exp(a * 0.1) + a.sum(axis=1, keepdims=True)
        for _ in range(THREADS):
            want = want * 0.5 + a
        for r in results:
            np.testing.assert_allclose(r, want, rtol=1e-5)


def test_one_executable_called_from_eight_threads():
    exe = tp.compile(lambda x: tp.softmax(x, dim=1) * 2.0 + x, args=[tp.InputInfo(((1, 4, 32), 16), tp.float32)])
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1 + i % 32, 16)).astype(np.float32) for i in range(THREADS * 4)]
    mismatches = []

    def work(i):
        for k in range(50):
            a = inputs[(i * 4 + k) % len(inputs)]
            got = np.asarray(exe(tp.Tensor(a)))
            e = np.exp(a - a.max(axis=1, keepdims=True))
            want = e / e.sum(axis=1, keepdims=True) * 2.0 + a
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                mismatches.append((i, k))

    _in_threads(work)
    assert mismatches == []


def test_eight_threads_build_and_evaluate_their_own_graphs():
    def work(i):
        for k in range(30):
            a = np.full((2, 3), i + k, np.float32)
            y = tp.relu(tp.Tensor(a) - 5.0) @ tp.ones((3, 2))
            assert y.tolist() == (np.maximum(a - 5.0, 0) @ np.ones((3, 2), np.float32)).tolist()

    _in_threads(work)


def test_eight_threads_compile_at_once():
    # tp.compile gives up the GIL while it compiles: the threads' compiles overlap, each executable
    # computes its own function.
    def work(i):
        for k in range(5):
            scale = float(i * 5 + k)
            exe = tp.compile(lambda x: tp.gelu(x) * scale + x, args=[tp.InputInfo(((1, 3, 8), 4), tp.float32)])
            a = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
            want = np.asarray(tp.gelu(tp.Tensor(a))) * scale + a
            np.testing.assert_allclose(np.asarray(exe(tp.Tensor(a))), want, rtol=1e-5, atol=1e-6)

    _in_threads(work)


def test_eight_threads_compile_one_module_at_once():
    # One module's parameters (placeholders the first compile evaluates) read by every thread's trace.
    model = tp.Sequential(tp.Linear(8, 16), tp.Linear(16, 4))
    a = np.linspace(-1.0, 1.0, 16, dtype=np.float32).reshape(2, 8)
    got = [None] * THREADS

    def work(i):
        exe = tp.compile(model, args=[tp.InputInfo(((1, 2, 4), 8), tp.float32)])
        got[i] = np.asarray(exe(tp.Tensor(a)))

    _in_threads(work)
    want = np.asarray(model(tp.Tensor(a)))
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_sharded_executables_called_from_eight_threads():
    # Two threads a mesh: calls over one mesh take turns, calls over different meshes run at once,
    # and every call's ranks run on threads kept between calls.
    meshes = [tp.DeviceMesh(["cpu"] * world) for world in (2, 3, 4, 2)]
    cpu = tp.device("cpu")  # the meshes' device, also where a GPU is the default
    exes = [tp.compile(lambda x: tp.all_reduce(x * 2.0), args=[tp.InputInfo((32,), tp.float32)], mesh=m) for m in meshes]

    def work(i):
        exe, world = exes[i % len(exes)], meshes[i % len(meshes)].size
        for k in range(20):
            parts = [np.full(32, float(i + k + r), np.float32) for r in range(world)]
            np.testing.assert_array_equal(np.asarray(exe([tp.Tensor(p, device=cpu) for p in parts])), 2 * sum(parts))

    _in_threads(work)

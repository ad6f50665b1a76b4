"""tp.compile and tp.Executable: dynamic shapes, validation errors that point at the user's line,
save/load, and corrupt files."""

import ast
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import tripy as tp


def _double_plus_one(x):
    return x * 2.0 + 1.0


@pytest.fixture
def exe(device):
    return tp.compile(_double_plus_one, args=[tp.InputInfo(((1, 2, 4), 3), dtype=tp.float32)])


def test_dynamic_dim_accepts_every_size_in_range(exe):
    for n in (1, 2, 3, 4):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(np.array(exe(tp.Tensor(x)).tolist()), x * 2 + 1)


def test_out_of_range_dim_names_argument_dimension_and_bound(exe):
    with pytest.raises(tp.TripyException) as e:
        exe(tp.ones((5, 3)))  # the line the error must show
    msg = str(e.value)
    assert "'x'" in msg and "dimension 0" in msg and "5" in msg and "[1, 4]" in msg
    assert "test_compile.py" in msg and "exe(tp.ones((5, 3)))" in msg


def test_wrong_dtype_and_rank_are_rejected(exe):
    with pytest.raises(tp.TripyException, match="int32"):
        exe(tp.ones((2, 3), dtype=tp.int32))
    with pytest.raises(tp.TripyException, match="rank"):
        exe(tp.ones((2, 3, 1)))


def test_argument_binding_errors(exe):
    with pytest.raises(tp.TripyException, match="Missing argument"):
        exe()
    with pytest.raises(tp.TripyException, match="Unexpected argument 'y'"):
        exe(x=tp.ones((1, 3)), y=tp.ones((1, 3)))
    with pytest.raises(tp.TripyException, match="must be a tripy.Tensor"):
        exe([1.0, 2.0, 3.0])
    assert exe(x=tp.ones((1, 3))).tolist() == [[3.0, 3.0, 3.0]]


def test_signature_and_str(exe):
    assert str(exe) == "Executable(x: tripy.Tensor) -> tripy.Tensor"
    assert list(inspect.signature(exe).parameters) == ["x"]
    assert repr(exe.input_infos["x"]) == "InputInfo(min=[1, 3], opt=[2, 3], max=[4, 3], dtype=float32)"


def test_named_dimensions_must_agree_at_run_time(device):
    batch = tp.NamedDimension("batch", 1, 2, 4)
    f = tp.compile(
        lambda a, b: a + b,
        args=[tp.InputInfo((batch, 2), tp.float32), tp.InputInfo((batch, 2), tp.float32)],
    )
    assert f(tp.ones((3, 2)), tp.ones((3, 2))).tolist() == [[2.0, 2.0]] * 3
    with pytest.raises(tp.TripyException, match="batch"):
        f(tp.ones((3, 2)), tp.ones((2, 2)))


def test_tuple_outputs_come_back_as_tuples(device):
    f = tp.compile(lambda x: (x + 1.0, x * 3.0), args=[tp.InputInfo((2,), tp.float32)])
    a, b = f(tp.Tensor([1.0, 2.0]))
    assert (a.tolist(), b.tolist()) == ([2.0, 3.0], [3.0, 6.0])


def test_evaluating_a_traced_tensor_inside_compile_is_an_error(device):
    def bad(x):
        print(x + 1.0)
        return x

    with pytest.raises(tp.TripyException) as e:
        tp.compile(bad, args=[tp.InputInfo((2,), tp.float32)])
    assert "runtime input" in str(e.value)


def test_compile_rejects_non_tensor_results(device):
    with pytest.raises(tp.TripyException, match="must return a tripy.Tensor"):
        tp.compile(lambda x: 3, args=[tp.InputInfo((2,), tp.float32)])


def test_save_load_round_trip_and_corrupt_files(exe, tmp_path):
    path = tmp_path / "exe.tpy"
    exe.save(path)
    loaded = tp.Executable.load(path)
    assert loaded(tp.ones((2, 3))).tolist() == [[3.0] * 3] * 2
    data = path.read_bytes()
    (tmp_path / "truncated.tpy").write_bytes(data[: len(data) // 2])
    with pytest.raises(tp.TripyException):
        tp.Executable.load(tmp_path / "truncated.tpy")
    flipped = bytearray(data)
    flipped[8] ^= 0xFF  # the format version
    (tmp_path / "version.tpy").write_bytes(bytes(flipped))
    with pytest.raises(tp.TripyException, match="version"):
        tp.Executable.load(tmp_path / "version.tpy")
    with pytest.raises(tp.TripyException):
        tp.Executable.load(tmp_path / "missing.tpy")


def test_constants_are_frozen_at_compile_time(device):
    w = tp.Tensor([1.0, 2.0])
    f = tp.compile(lambda x: x * w, args=[tp.InputInfo((2,), tp.float32)])
    assert f(tp.Tensor([3.0, 3.0])).tolist() == [3.0, 6.0]


def test_module_parameters_are_frozen_on_their_device(device):
    # A parameter made from nothing (a causal mask) is computed by the CPU and placed on its device;
    # one read from a device tensor is computed there. Both keep their values and their device.
    class Masked(tp.Module):
        def __init__(self):
            super().__init__()
            self.mask = tp.tril(tp.ones((4, 4)))
            self.shift = tp.Tensor(np.arange(4, dtype=np.float32)) * 2.0

        def __call__(self, x):
            return tp.masked_fill(x, self.mask == 0, -1.0) + self.shift

    m = Masked()
    f = tp.compile(m, args=[tp.InputInfo((4, 4), tp.float32)])
    for p in (m.mask, m.shift):
        assert p.device == tp.device(device)
    np.testing.assert_array_equal(np.asarray(m.mask), np.tril(np.ones((4, 4), np.float32)))
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    want = np.where(np.tril(np.ones((4, 4))) == 0, -1.0, x) + 2.0 * np.arange(4)
    np.testing.assert_array_equal(np.asarray(f(tp.Tensor(x))), want)
    np.testing.assert_array_equal(np.asarray(m(tp.Tensor(x))), want)


def test_module_compiles_with_dynamic_batch(device):
    class MLP(tp.Module):
        def __init__(self):
            super().__init__()
            self.fc = tp.Linear(2, 8)
            self.proj = tp.Linear(8, 2)

        def __call__(self, x):
            return self.proj(tp.gelu(self.fc(x)))

    mlp = MLP()
    f = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 8), 2), tp.float32)])
    for n in (1, 5, 8):
        x = tp.iota((n, 2), dim=1)
        assert tp.allclose(f(x), mlp(x), rtol=1e-5, atol=1e-4)


def test_dimension_sizes_stay_symbolic_inside_compile(device):
    def f(x):
        n = x.shape[0]
        pad = tp.zeros((n + 1, x.shape[1]))
        return tp.concatenate([x, pad], dim=0), tp.reshape(x, (n * 3, -1))

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 5), 3), tp.float32)])
    for rows in (1, 4):
        a, b = exe(tp.ones((rows, 3)))
        assert a.shape == (2 * rows + 1, 3)
        assert b.shape == (rows * 3, 1)
        assert tp.sum(a).tolist() == rows * 3


def test_shape_entries_must_be_sizes(device):
    x = tp.Tensor([1.0, 2.0])
    with pytest.raises(tp.TripyException, match="not a known size"):
        tp.reshape(x, (tp.Tensor([2.0]),))


def test_flatten_and_slicing_work_on_dynamic_dims(device):
    f = tp.compile(lambda x: tp.flatten(x[:, 1:], 0), args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)])
    assert f(tp.iota((3, 3), dim=1)).tolist() == [1.0, 2.0] * 3


def test_dynamic_broadcast_is_checked_at_run_time(device):
    f = tp.compile(
        lambda a, b: a + b,  # the line the run-time error must show
        args=[tp.InputInfo(((1, 2, 4), 4), tp.float32), tp.InputInfo(((1, 2, 4), 4), tp.float32)],
    )
    assert f(tp.ones((3, 4)), tp.ones((1, 4))).shape == (3, 4)  # a size-1 dim broadcasts
    assert f(tp.ones((1, 4)), tp.ones((3, 4))).shape == (3, 4)
    with pytest.raises(tp.TripyException) as e:
        f(tp.ones((3, 4)), tp.ones((2, 4)))
    msg = str(e.value)
    assert "lambda a, b: a + b" in msg and "broadcastable" in msg and "2 and 3" in msg


def test_dynamic_concatenate_mismatch_names_the_arguments_at_run_time(device):
    f = tp.compile(
        lambda a, b: tp.concatenate([a, b], dim=0),  # the line the run-time error must show
        args=[tp.InputInfo((2, (1, 2, 3)), tp.float32), tp.InputInfo((2, (1, 2, 3)), tp.float32)],
    )
    np.testing.assert_array_equal(np.asarray(f(tp.ones((2, 3)), tp.zeros((2, 3)))), np.concatenate([np.ones((2, 3)), np.zeros((2, 3))]))
    with pytest.raises(tp.TripyException) as e:
        f(tp.ones((2, 2)), tp.ones((2, 3)))
    msg = str(e.value)
    # The user's arguments and line, not the kernel that would have joined them.
    assert "tp.concatenate([a, b], dim=0)" in msg and "input 1 differs from input 0 in dimension 1" in msg
    assert "3 and 2" in msg and "kernel" not in msg


def test_save_makes_missing_parent_directories(exe, tmp_path):
    # nvtripy's documented example saves into a directory that no longer exists.
    path = tmp_path / "made" / "here" / "exe.json"
    exe.save(path)
    assert tp.Executable.load(path) is not None


def test_a_function_of_constants_alone_compiles_to_an_executable_without_inputs(device, tmp_path):
    x = np.arange(4, dtype=np.float32)
    exe = tp.compile(lambda a, k: a * k + 1.0, args=[tp.Tensor(x), 3.0])
    np.testing.assert_array_equal(np.array(exe().tolist()), x * 3 + 1)
    exe.save(str(tmp_path / "c.tpy"))
    np.testing.assert_array_equal(np.array(tp.Executable.load(str(tmp_path / "c.tpy"))().tolist()), x * 3 + 1)
    assert tp.compile(lambda: tp.ones((2,)) * 2.0)().tolist() == [2.0, 2.0]


@pytest.mark.skipif(not tp._C.gpu_available(), reason="no GPU on this machine")
def test_first_gpu_compile_of_a_fresh_process_finishes():
    # cuDNN and cuBLASLt are first used on the compiler's warm-up thread. Once, cuDNN's first
    # handle waited on itself forever there, but only in a process that had not loaded torch first:
    # hence a new process, without torch, that runs this file's own code.
    code = (
        "import numpy as np, tripy as tp\n"
        "w = tp.Tensor(np.arange(8, dtype=np.float32).reshape(2, 4))\n"
        "exe = tp.compile(lambda x: tp.relu(x @ w), args=[tp.InputInfo((3, 2), dtype=tp.float32)])\n"
        "x = np.ones((3, 2), dtype=np.float32)\n"
        "print(np.array(exe(tp.Tensor(x)).tolist()).tolist())\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(root, "python"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    want = np.maximum(np.ones((3, 2), np.float32) @ np.arange(8, dtype=np.float32).reshape(2, 4), 0)
    assert ast.literal_eval(out.stdout.strip().splitlines()[-1]) == want.tolist()


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16])
def test_a_hand_written_rms_norm_is_one_kernel(device, dtype):
    # mean(..., keepdim=True) reshapes the row values; `+ eps` and rsqrt on them stay in the
    # reducing kernel all the same (no kernel of their own, no float32 copy of x in memory).
    def rms_norm(x, w):
        xf = tp.cast(x, tp.float32)
        normed = xf * tp.rsqrt(tp.mean(xf * xf, dim=-1, keepdim=True) + 1e-5)
        return tp.cast(normed, x.dtype) * w

    exe = tp.compile(rms_norm, args=[tp.InputInfo(((1, 3, 8), 64), dtype), tp.InputInfo((64,), dtype)])
    assert [k[0] for k in exe._impl.kernels] == ["fused"]
    rng = np.random.default_rng(0)
    np_dtype = np.float32 if dtype == tp.float32 else np.float16
    x, w = rng.standard_normal((5, 64)).astype(np_dtype), rng.standard_normal(64).astype(np_dtype)
    xf = x.astype(np.float64)
    want = (xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-5)) * w.astype(np.float64)
    got = np.asarray(exe(tp.Tensor(x), tp.Tensor(w))).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == tp.float32 else 2e-3, atol=1e-5 if dtype == tp.float32 else 2e-3)

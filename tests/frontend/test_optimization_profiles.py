"""tp.compile(..., optimization_profiles=[...]): one executable, one program per profile, each compiled
for its own ranges; a call runs the first profile whose ranges hold it. Checked against numpy and
against executables compiled for each profile alone."""

import os
import subprocess

import numpy as np
import pytest

import tripy as tp


class Block(tp.Module):
    """Linear + GELU + softmax over rows: a GEMM (tuned per profile on the GPU) and fused kernels."""

    def __init__(self):
        super().__init__()
        self.proj = tp.Linear(8, 8)

    def __call__(self, x):
        return tp.softmax(tp.gelu(self.proj(x)), dim=-1)


def _block():
    block = Block()
    rng = np.random.default_rng(0)
    block.load_state_dict(
        {"proj.weight": tp.Tensor(rng.standard_normal((8, 8), dtype=np.float32) / 4),
         "proj.bias": tp.Tensor(rng.standard_normal(8, dtype=np.float32) / 4)}
    )
    return block, rng


def _reference(block, x):
    from math import erf

    w, b = np.asarray(block.proj.weight), np.asarray(block.proj.bias)
    h = x @ w.T + b
    h = h * 0.5 * (1.0 + np.vectorize(erf)(h / np.sqrt(2.0)))
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


BATCH = tp.NamedDimension("batch", 1, 2, 16)
SEQ = tp.NamedDimension("seq", 1, 8, 64)
# Profile 0 fixes batch at 1 (decode-like, compiled with a constant batch), profile 1 takes the rest.
PROFILES = [
    [tp.NamedDimension("batch", 1, 1, 1), tp.NamedDimension("seq", 1, 4, 16)],
    [tp.NamedDimension("batch", 1, 8, 16), tp.NamedDimension("seq", 1, 32, 64)],
]


def _info(batch=BATCH, seq=SEQ):
    return tp.InputInfo((batch, seq, 8), dtype=tp.float32)


def test_two_profiles_match_numpy_and_each_profile_compiled_alone(device):
    block, rng = _block()
    exe = tp.compile(block, args=[_info()], optimization_profiles=PROFILES)
    alone = [tp.compile(block, args=[_info(*profile)]) for profile in PROFILES]
    for shape, profile in [((1, 3, 8), 0), ((1, 16, 8), 0), ((1, 17, 8), 1), ((5, 40, 8), 1), ((16, 64, 8), 1)]:
        x = rng.standard_normal(shape, dtype=np.float32)
        assert exe.optimization_profile_for(tp.Tensor(x)) == profile, shape
        got = np.asarray(tp.copy(exe(tp.Tensor(x)), tp.device("cpu")))
        want = np.asarray(tp.copy(alone[profile](tp.Tensor(x)), tp.device("cpu")))
        if device == "cpu":
            assert np.array_equal(got, want), shape
        else:  # each compile times its own GEMM algorithms
            assert np.allclose(got, want, rtol=1e-5, atol=1e-6), shape
        assert np.allclose(got, _reference(block, x), rtol=1e-4, atol=1e-5), shape
    # Each profile's program is the one compiled for that profile alone: profile 0's batch is a constant.
    for i, single in enumerate(alone):
        assert exe._impl.program_text_of(i) == single._impl.program_text
    assert exe._impl.program_text_of(0) != exe._impl.program_text_of(1)
    # Per-kernel timing names the kernels of the profile that ran.
    timed = exe.profile(tp.Tensor(rng.standard_normal((2, 20, 8), dtype=np.float32)))
    assert [row["name"] for row in timed.rows] == [name for _, name, _ in alone[1]._impl.kernels]


def test_the_first_profile_that_holds_a_call_runs():
    add = tp.compile(
        lambda x, n: x[:n] + 1.0,
        args=[tp.InputInfo((tp.NamedDimension("rows", 1, 4, 100),), dtype=tp.float32),
              tp.DimensionInputInfo((1, 2, 8))],
        optimization_profiles=[[tp.NamedDimension("rows", 1, 4, 8)], [tp.NamedDimension("rows", 4, 16, 32)],
                               [tp.NamedDimension("rows", 1, 64, 100)]],
    )
    for rows, profile in [(1, 0), (4, 0), (8, 0), (9, 1), (32, 1), (33, 2), (100, 2)]:
        assert add.optimization_profile_for(tp.ones((rows,)), 1) == profile
        assert add(tp.iota((rows,)), 1).tolist() == [1.0]
    assert [info["x"].shape_bounds.max for info in add.optimization_profiles] == [(8,), (32,), (100,)]
    assert repr(add.input_infos) == repr(add.optimization_profiles[0])
    assert str(add.optimization_profiles[2]["n"]) == "DimensionInputInfo(min=1, opt=2, max=8)"


def test_a_call_no_profile_holds_names_every_range_at_the_callers_line():
    exe = tp.compile(lambda x: x * 2.0, args=[_info()], optimization_profiles=PROFILES)
    with pytest.raises(tp.TripyException) as err:
        exe(tp.ones((2, 65, 8)))  # the line the error shows
    text = str(err.value)
    assert "exe(tp.ones((2, 65, 8)))  # the line the error shows" in text
    assert "No optimization profile of this executable covers this call" in text
    assert "profile 0: x: (1, 1..16, 8)" in text
    assert "Argument 'x': dimension 0 has size 2, which is outside the range [1, 1] of profile 0." in text
    assert "profile 1: x: (1..16, 1..64, 8)" in text
    assert "Argument 'x': dimension 1 has size 65, which is outside the range [1, 64] of profile 1." in text
    # What no profile changes is reported as it is.
    with pytest.raises(tp.TripyException, match="has rank 2, but this executable was compiled for rank 3"):
        exe(tp.ones((2, 8)))


@pytest.mark.parametrize(
    "profiles, message",
    [
        ([], "must be a non-empty list of profiles"),
        ([tp.NamedDimension("seq", 1, 2, 3)], "Optimization profile 0 must be a list of tp.NamedDimension"),
        ([[(1, 2, 3)]], "but it holds: \\(1, 2, 3\\)"),
        ([[tp.NamedDimension("seq", 1, 1, 1), tp.NamedDimension("seq", 2, 2, 2)]], "gives the dimension 'seq' twice"),
        ([[tp.NamedDimension("T", 1, 1, 1)]], "'T', which no input declares \\(the inputs' tp.NamedDimensions are: 'batch', 'seq'\\)"),
    ],
)
def test_bad_profiles_are_refused(profiles, message):
    with pytest.raises(tp.TripyException, match=message):
        tp.compile(lambda x: x, args=[_info()], optimization_profiles=profiles)


def _saved(tmp_path):
    exe = tp.compile(lambda x: tp.sum(x, dim=-1), args=[_info()], optimization_profiles=PROFILES)
    path = str(tmp_path / "two.tpy")
    exe.save(path)
    return exe, path


def test_save_and_load_keep_the_profiles(tmp_path):
    exe, path = _saved(tmp_path)
    loaded = tp.Executable.load(path)
    assert [{k: repr(v) for k, v in p.items()} for p in loaded.optimization_profiles] == [
        {k: repr(v) for k, v in p.items()} for p in exe.optimization_profiles
    ]
    for shape in [(1, 5, 8), (3, 50, 8)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        assert loaded.optimization_profile_for(tp.Tensor(x)) == exe.optimization_profile_for(tp.Tensor(x))
        assert np.array_equal(np.asarray(tp.copy(loaded(tp.Tensor(x)), tp.device("cpu"))), x.sum(axis=-1))


def test_a_corrupt_profile_table_is_refused(tmp_path):
    _, path = _saved(tmp_path)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    at = data.index(b'"profiles"') + len(b'"profiles"') + 10  # inside the table
    data[at] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(tp.TripyException, match="Corrupt executable"):
        tp.Executable.load(path)


def test_tripy_run_lists_each_profile_and_says_which_ran(tmp_path, tripy_run):
    _, path = _saved(tmp_path)
    x = np.ones((4, 20, 8), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([tripy_run, path, "--input", f"x={tmp_path / 'x.npy'}"], capture_output=True, text=True,
                         env=dict(os.environ, TRIPY_DEVICE="cpu"))
    assert out.returncode == 0, out.stderr
    assert "2 optimization profiles; a run uses the first whose ranges hold its inputs" in out.stdout
    assert "profile 0:\n  x: float32 [[1, 1, 1], [1, 4, 16], [8, 8, 8]]" in out.stdout
    assert "profile 1:\n  x: float32 [[1, 8, 16], [1, 32, 64], [8, 8, 8]]" in out.stdout
    assert "ran profile 1" in out.stdout
    assert "return: float32 (4, 20) = [8, 8, 8" in out.stdout
    zeros = subprocess.run([tripy_run, path, "--zeros", "--profile", "1"], capture_output=True, text=True)
    assert zeros.returncode == 0 and "ran profile 1" in zeros.stdout and "(8, 32)" in zeros.stdout, zeros.stdout

"""Eager mode's fast path: one op over evaluated tensors is found in the cache by its op signature
(op, attributes, the inputs' dtypes, shapes and which of them are the same tensor), and op calls
capture the user's frames once per call site. A hit must never hand back another signature's
program, and errors must still name the line that made the tensor."""

import inspect
import os
import math

import numpy as np
import pytest

import tripy as tp
from tripy import _C
from tripy.utils.stack_info import capture_user_frames


def _line():
    return inspect.currentframe().f_back.f_lineno


def _evaluated(array):
    t = tp.Tensor(array)
    t.eval()
    return t


def test_the_same_tensor_twice_and_two_tensors_get_their_own_programs():
    a = _evaluated(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = _evaluated(np.full((2, 3), 10.0, np.float32))
    # One program reads a single value twice, the other two values: in either order of first use.
    assert np.array_equal(np.asarray(a + a), 2 * np.asarray(a))
    assert np.array_equal(np.asarray(a + b), np.asarray(a) + 10.0)
    assert np.array_equal(np.asarray(b + a), np.asarray(a) + 10.0)
    assert np.array_equal(np.asarray(b + b), np.full((2, 3), 20.0, np.float32))


def test_signatures_that_differ_in_dtype_shape_or_attributes_do_not_share_a_program():
    x = _evaluated(np.arange(6, dtype=np.float32).reshape(2, 3))
    xt = _evaluated(np.arange(6, dtype=np.float32).reshape(3, 2))
    xi = _evaluated(np.arange(6, dtype=np.int32).reshape(2, 3))
    for _ in range(2):  # the second round is all cache hits
        assert (x + x).tolist() == (np.asarray(x) * 2).tolist()
        assert (xt + xt).tolist() == (np.asarray(xt) * 2).tolist()
        got = xi + xi
        assert got.dtype == tp.int32 and got.tolist() == (np.asarray(xi) * 2).tolist()
        assert tp.sum(x, dim=0).tolist() == [3.0, 5.0, 7.0]
        assert tp.sum(x, dim=1).tolist() == [3.0, 12.0]
        assert tp.sum(x, dim=1, keepdim=True).tolist() == [[3.0], [12.0]]


def test_a_repeated_op_is_compiled_once_even_with_a_nan_attribute():
    x = _evaluated(np.ones((3, 5), np.float32))
    (x * 3.0).eval()
    before = _C.eager_cache_size()
    for _ in range(5):
        assert (x * 3.0).tolist() == [[3.0] * 5] * 3
    nan = tp.full((3, 5), float("nan"))
    assert all(math.isnan(v) for row in nan.tolist() for v in row)
    after_nan = _C.eager_cache_size()
    for _ in range(3):
        assert all(math.isnan(v) for row in tp.full((3, 5), float("nan")).tolist() for v in row)
    # The literal 3.0 and the multiply hit each time; a NaN fill matches itself (by its bits).
    assert after_nan - before <= 1
    assert _C.eager_cache_size() == after_nan


def test_errors_name_each_call_site_of_one_function():
    a, c = tp.ones((2, 3)), tp.ones((4,))

    def first():
        return a + c

    def second():
        return a + c

    for make, name in ((first, "first"), (second, "second"), (first, "first")):
        with pytest.raises(tp.TripyException) as info:
            make()
        where = inspect.getsourcelines(make)[1] + 1
        assert f"test_eager_cache.py:{where} in {name}()" in str(info.value)


def test_one_line_run_twice_names_the_same_line_and_each_loop_its_own():
    a, c = tp.ones((2, 3)), tp.ones((4,))
    lines = []
    for _ in range(2):
        with pytest.raises(tp.TripyException) as info:
            lines.append(_line() + 1)
            a * c
        assert f"test_eager_cache.py:{lines[-1]}" in str(info.value)
    with pytest.raises(tp.TripyException) as info:
        line = _line() + 1
        a * c
    assert f"test_eager_cache.py:{line}" in str(info.value) and line != lines[0]


def test_the_core_captures_the_frames_that_capture_user_frames_gives():
    def inner():
        ours, theirs = _C._capture_source(), capture_user_frames()
        return ours, theirs

    ours, theirs = inner()
    assert len(ours) == len(theirs) > 1
    # The same frames (file, line, function) outward; columns differ only in the innermost, where
    # the two calls sit at different places of one line.
    assert [f[:3] for f in ours] == [f[:3] for f in theirs]
    assert ours[1:] == theirs[1:]
    assert ours[0][2] == "inner" and ours[1][2] == "test_the_core_captures_the_frames_that_capture_user_frames_gives"


def test_operators_take_numbers_on_either_side_and_refuse_lossy_ones():
    x = _evaluated(np.array([1.0, 2.0], np.float32))
    assert (x + 1).tolist() == [2.0, 3.0]
    assert (10 - x).tolist() == [9.0, 8.0]
    assert (2 ** x).tolist() == [2.0, 4.0]
    assert (x < 2).tolist() == [True, False]
    i = _evaluated(np.array([1, 2], np.int32))
    with pytest.raises(tp.TripyException, match="float literal 0.5") as info:
        line = _line() + 1
        i + 0.5
    assert f"test_eager_cache.py:{line}" in str(info.value)
    assert tp.Tensor.__add__.__name__ == "__add__"


def test_a_non_tensor_input_is_refused_at_the_users_line():
    from tripy.frontend.trace_call import make

    with pytest.raises(tp.TripyException, match="Expected a tripy.Tensor as an input of exp, but got an object of type 'list'") as info:
        line = _line() + 1
        make("exp", [[1.0]])
    assert f"test_eager_cache.py:{line}" in str(info.value)


def test_sizes_stay_dimension_sizes_through_operators():
    size = tp.DimensionSize(4) * 2 + 1
    assert isinstance(size, tp.DimensionSize) and int(size) == 9


def test_operator_results_are_plain_tensors_whatever_class_the_operands_are():
    class Named(tp.Tensor):  # a user's subclass: its node is read as an attribute, not a slot
        __slots__ = ("note",)

    x = _evaluated(np.array([1.0, 2.0], np.float32))
    sub = Named(np.array([3.0, 4.0], np.float32))
    sub.note = "mine"
    for result in (x + sub, sub + x, sub * 2.0, 1.0 - sub):
        assert type(result) is tp.Tensor and result.name is None
    assert (sub + x).tolist() == [4.0, 6.0] and (1.0 - sub).tolist() == [-2.0, -3.0]
    result = x + x
    result.name = "twice"  # a result's slots are the class's own: writable, and nothing else is
    assert result.name == "twice" and not hasattr(result, "__dict__")
    assert type(tp.DimensionSize(3) + 1) is tp.DimensionSize


def test_binary_ops_broadcast_and_compare_to_bool_on_the_fast_path():
    x = _evaluated(np.arange(6, dtype=np.float32).reshape(2, 3))
    row = _evaluated(np.array([10.0, 20.0, 30.0], np.float32))
    column = _evaluated(np.array([[1.0], [2.0]], np.float32))
    assert np.array_equal(np.asarray(x + row), np.asarray(x) + np.asarray(row))
    assert np.array_equal(np.asarray(column * row), np.asarray(column) * np.asarray(row))
    assert (x < 3.0).dtype == tp.bool and (x + x).dtype == tp.float32
    assert (x < 3.0).tolist() == [[True, True, True], [False, False, False]]
    with pytest.raises(tp.TripyException, match="cannot be broadcast") as info:
        line = _line() + 1
        x + _evaluated(np.ones((2, 2), np.float32))
    assert f"test_eager_cache.py:{line}" in str(info.value)


def test_a_static_executable_still_checks_every_call():
    exe = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((2, 3), tp.float32)])
    x = _evaluated(np.ones((2, 3), np.float32))
    for _ in range(3):  # the run-time shape checks pass once and are skipped after
        assert exe(x).tolist() == [[2.0] * 3] * 2
    with pytest.raises(tp.TripyException, match="dimension 0 has size 3"):
        exe(_evaluated(np.ones((3, 3), np.float32)))
    with pytest.raises(tp.TripyException, match="dtype"):
        exe(_evaluated(np.ones((2, 3), np.int32)))


def test_a_dynamic_executable_lays_out_each_shape_it_is_called_with():
    exe = tp.compile(lambda x, y: x * y + 1.0, args=[tp.InputInfo(((1, 4, 8), 3), tp.float32),
                                                     tp.InputInfo((1, 3), tp.float32)])
    rng = np.random.default_rng(0)
    y = rng.standard_normal((1, 3)).astype(np.float32)
    for rows in (3, 5, 3, 1, 8, 5):
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x), tp.Tensor(y))), x * y + 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_fused_kernels_reading_inputs_in_place_agree_with_numpy(dtype):
    # Rows longer than a tile (512 elements) and not a multiple of it; a slice read through its
    # window, a broadcast row, a reduction of a value read in place, and an output that is an input.
    rng = np.random.default_rng(1)
    x_np = rng.integers(-50, 50, size=(3, 1500)).astype(dtype)
    row_np = rng.integers(-50, 50, size=(1500,)).astype(dtype)
    x, row = _evaluated(x_np), _evaluated(row_np)
    np.testing.assert_array_equal(np.asarray(x * row + x), x_np * row_np + x_np)
    np.testing.assert_array_equal(np.asarray(x[:, 7:1207] - x[:, 0:1200]), x_np[:, 7:1207] - x_np[:, 0:1200])
    np.testing.assert_array_equal(np.asarray(tp.sum(x, dim=1)), x_np.sum(axis=1))
    np.testing.assert_array_equal(np.asarray(tp.max(x * row, dim=0)), (x_np * row_np).max(axis=0))
    np.testing.assert_array_equal(np.asarray(x[1:2, :]), x_np[1:2, :])
    np.testing.assert_array_equal(np.asarray(tp.cast(x, tp.float32) + 0.5), x_np.astype(np.float32) + 0.5)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident set from /proc")
def test_a_cached_eager_program_gives_back_a_large_arena_after_its_run():
    """An eager evaluation whose intermediates are large (here 256 MiB between the elementwise
    kernel and the matrix product) returns that memory when it is done, although its program stays
    cached; a compiled executable keeps its arena for the next call."""

    def resident_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    saved = tp.config.default_device
    tp.config.default_device = "cpu"  # host memory is what /proc shows
    try:
        _check_arena_given_back(resident_mib)
    finally:
        tp.config.default_device = saved


def _check_arena_given_back(resident_mib):
    x = _evaluated(np.ones((64, 1 << 20), np.float32))
    w = _evaluated(np.ones((1 << 20, 1), np.float32))
    before = resident_mib()
    y = (x * 2.0) @ w
    y.eval()
    np.testing.assert_array_equal(np.asarray(y), np.full((64, 1), 2.0 * (1 << 20), np.float32))
    assert resident_mib() - before < 64
    exe = tp.compile(lambda a, b: (a * 2.0) @ b, args=[tp.InputInfo((64, 1 << 20), tp.float32), tp.InputInfo((1 << 20, 1), tp.float32)])
    before = resident_mib()
    np.testing.assert_array_equal(np.asarray(exe(x, w)), np.asarray(y))
    assert resident_mib() - before > 200  # the measurement sees an arena that stays


@pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")
def test_a_cached_eager_program_runs_again_after_giving_back_its_scratch_on_the_gpu():
    """The GPU program gives back its arena and its library workspace after a large run; its next
    run (the same cached plan) must allocate both again, not hand cuBLASLt a freed workspace."""
    saved = tp.config.default_device
    tp.config.default_device = "gpu"
    try:
        rng = np.random.default_rng(7)
        x_np = rng.standard_normal((2048, 4096)).astype(np.float32)
        w_np = rng.standard_normal((4096, 2048)).astype(np.float32)
        x, w = _evaluated(x_np), _evaluated(w_np)
        want = (x_np * 2.0) @ w_np
        for _ in range(3):
            np.testing.assert_allclose(np.asarray((x * 2.0) @ w), want, rtol=1e-2, atol=1.0)
    finally:
        tp.config.default_device = saved

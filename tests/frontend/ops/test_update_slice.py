"""tp.update_slice: rows written at a start read at run time (numpy reference), in place in donated
inputs, and bad starts, updates and donations as errors naming the user's line."""

import contextlib
import time

import numpy as np
import pytest

import tripy as tp


def _gpu():
    from tripy import _C

    return _C.gpu_available()


@contextlib.contextmanager
def _gpu_default():
    old = tp.config.default_device
    tp.config.default_device = "gpu"
    try:
        yield
    finally:
        tp.config.default_device = old


def _np(t):
    return np.asarray(t)


def _want(base, dim, start, update):
    out = base.copy()
    index = [slice(None)] * base.ndim
    index[dim] = slice(start, start + update.shape[dim])
    out[tuple(index)] = update
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_update_slice_matches_numpy(device, dim, dtype):
    rng = np.random.default_rng(0)
    base = rng.integers(-9, 9, (3, 5, 4)).astype(dtype)
    shape = list(base.shape)
    shape[dim] = 2
    update = rng.integers(-9, 9, shape).astype(dtype)
    for start in (0, 1, base.shape[dim] - 2):
        for s in (start, tp.Tensor(np.array([start], np.int32)), tp.Tensor(np.array(start, np.int64))):
            got = tp.update_slice(tp.Tensor(base), dim, s, tp.Tensor(update))
            np.testing.assert_array_equal(_np(got), _want(base, dim % 3, start, update))


def test_update_slice_start_may_be_a_dimension_size(device):
    def append_row(x, n, row):
        return tp.update_slice(x, 0, n, row)[: n + 1]

    exe = tp.compile(append_row, args=[tp.InputInfo((6, 2), tp.float32), tp.DimensionInputInfo((0, 2, 5)),
                                       tp.InputInfo((1, 2), tp.float32)])
    base = np.zeros((6, 2), np.float32)
    got = exe(tp.Tensor(base), 3, tp.Tensor(np.full((1, 2), 7, np.float32)))
    np.testing.assert_array_equal(_np(got), [[0, 0], [0, 0], [0, 0], [7, 7]])


def _write(cache, pos, row):
    return tp.update_slice(cache, 1, pos, row)


def _compile_write(donate):
    return tp.compile(_write, args=[tp.InputInfo((2, 6, 3), tp.float32, donate=donate),
                                    tp.InputInfo((1,), tp.int32), tp.InputInfo((2, 1, 3), tp.float32)])


def _pos(p):
    return tp.Tensor(np.array([p], np.int32))


def test_a_donated_input_is_updated_in_place_and_returned(device):
    exe = _compile_write(donate=True)
    assert exe.input_infos["cache"].donate and not exe.input_infos["pos"].donate
    assert [kind for kind, _, _ in exe._impl.kernels] == ["update_slice"]  # no copy of the cache
    cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
    want = np.zeros((2, 6, 3), np.float32)
    out = cache
    for p in (0, 4, 2, 5):
        row = np.full((2, 1, 3), p + 1, np.float32)
        out = exe(out, _pos(p), tp.Tensor(row))
        want[:, p : p + 1] = row
        np.testing.assert_array_equal(_np(out), want)
    np.testing.assert_array_equal(_np(cache), want)  # the caller's tensor holds the result


def test_without_donation_the_argument_is_left_as_it_was(device):
    exe = _compile_write(donate=False)
    assert [kind for kind, _, _ in exe._impl.kernels] == ["update_slice"]
    cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
    out = exe(cache, _pos(1), tp.Tensor(np.ones((2, 1, 3), np.float32)))
    assert _np(out)[:, 1].min() == 1.0
    assert not _np(cache).any()


def test_a_donated_input_that_is_also_read_elsewhere_is_not_overwritten(device):
    def write_and_sum(cache, pos, row):
        return tp.update_slice(cache, 1, pos, row), tp.sum(cache)

    exe = tp.compile(write_and_sum, args=[tp.InputInfo((2, 6, 3), tp.float32, donate=True),
                                          tp.InputInfo((1,), tp.int32), tp.InputInfo((2, 1, 3), tp.float32)])
    cache = tp.Tensor(np.ones((2, 6, 3), np.float32))
    out, total = exe(cache, _pos(3), tp.Tensor(np.full((2, 1, 3), 5.0, np.float32)))
    assert float(_np(total)) == 36.0  # the old values
    assert _np(out)[:, 3].min() == 5.0 and _np(out).sum() == 36.0 + 6 * 4.0


def test_donated_executables_round_trip_through_a_file(device, tmp_path):
    path = tmp_path / "write.tpy"
    _compile_write(donate=True).save(path)
    exe = tp.Executable.load(path)
    assert exe.input_infos["cache"].donate
    cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
    exe(cache, _pos(5), tp.Tensor(np.ones((2, 1, 3), np.float32)))
    assert _np(cache)[:, 5].min() == 1.0 and _np(cache)[:, :5].max() == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_head_range_of_a_projection_is_written_without_a_copy(device, tmp_path, dtype):
    # A KV-cache write of kv heads 4..5 of a (B, T, 6, 8) projection: the update reads each of its
    # rows in place in the projection (no slice kernel), for every batch row, position and length,
    # before and after a round trip through a file. (On the GPU, rows of 16-byte multiples.)
    def write(cache, pos, qkv):
        return tp.update_slice(cache, 1, pos, qkv[:, :, 4:])

    T = tp.NamedDimension("T", 1, 2, 3)
    dt = getattr(tp, dtype)
    exe = tp.compile(write, args=[tp.InputInfo((2, 8, 2, 8), dt, donate=True), tp.InputInfo((1,), tp.int32),
                                  tp.InputInfo((2, T, 6, 8), dt)])
    assert [kind for kind, _, _ in exe._impl.kernels] == ["update_slice"]
    exe.save(tmp_path / "write.tpy")
    rng = np.random.default_rng(3)
    for run in (exe, tp.Executable.load(tmp_path / "write.tpy")):
        want = np.zeros((2, 8, 2, 8), dtype)
        cache = tp.Tensor(want.copy())
        for p, t in ((0, 1), (1, 3), (5, 2)):
            qkv = rng.standard_normal((2, t, 6, 8)).astype(dtype)
            cache = run(cache, _pos(p), tp.Tensor(qkv))
            want[:, p : p + t] = qkv[:, :, 4:]
            np.testing.assert_array_equal(_np(cache), want)


# --- bad input: a TripyException naming the user's line, never a wrong answer ----------------------
@pytest.mark.parametrize("start", [5, 6, -1, 100])
def test_a_start_past_the_end_is_an_error_of_the_call_and_writes_nothing(device, start):
    exe = _compile_write(donate=True)
    cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
    exe(cache, _pos(5), tp.Tensor(np.ones((2, 1, 3), np.float32)))  # the last row: fine
    before = _np(cache).copy()
    rows = tp.Tensor(np.full((2, 1, 3), 9.0, np.float32))
    if start == 5:
        exe(cache, _pos(start), rows)
        return
    # On the CPU the call raises; on the GPU the call returns at once and the error surfaces no
    # later than the read of its result (docs/robustness.md).
    with pytest.raises(tp.TripyException, match=r"the start must lie in \[0, 5\]") as e:
        _np(exe(cache, _pos(start), rows))
    assert "return tp.update_slice(cache, 1, pos, row)" in str(e.value)  # the user's line
    np.testing.assert_array_equal(_np(cache), before)


def test_a_gpu_error_surfaces_at_a_later_call_without_any_read():
    if not _gpu():
        pytest.skip("no GPU on this machine")
    with _gpu_default():
        exe = _compile_write(donate=True)
        cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
        rows = tp.Tensor(np.ones((2, 1, 3), np.float32))
        good, bad = _pos(1), _pos(9)
        exe(cache, bad, rows)  # returns at once; the kernel records the error
        # Later calls check the record without waiting: one of them raises once the failed call's
        # kernel has run (microseconds), naming the line of the update_slice.
        deadline = time.time() + 10
        with pytest.raises(tp.TripyException, match=r"writes 1 row\(s\) at 9 .* the start must lie in \[0, 5\]") as e:
            while time.time() < deadline:
                exe(cache, good, rows)
        assert "return tp.update_slice(cache, 1, pos, row)" in str(e.value)
        # Taken once: the executable is usable again.
        np.testing.assert_array_equal(_np(exe(cache, good, rows))[:, 1], 1.0)


def test_a_steady_state_gpu_call_never_waits_for_the_gpu():
    if not _gpu():
        pytest.skip("no GPU on this machine")
    from tripy import _C

    with _gpu_default():
        exe = _compile_write(donate=True)
        cache = tp.Tensor(np.zeros((2, 6, 3), np.float32))
        rows, pos = tp.Tensor(np.ones((2, 1, 3), np.float32)), _pos(2)
        for _ in range(3):  # planning, graph capture
            exe(cache, pos, rows)
        tp.default_stream().synchronize()
        before = _C._cuda_host_waits()
        for _ in range(20):
            exe(cache, pos, rows)
        assert _C._cuda_host_waits() == before  # the old path waited once per call
        _np(cache)  # reading the result is a wait, and the counter sees it
        assert _C._cuda_host_waits() > before


def test_an_eager_start_past_the_end_is_an_error():
    with pytest.raises(tp.TripyException, match="writes 2 row") as e:
        tp.update_slice(tp.zeros((4, 2)), 0, 3, tp.ones((2, 2))).eval()
    assert "tp.update_slice(tp.zeros((4, 2)), 0, 3, tp.ones((2, 2)))" in str(e.value)


def test_bad_updates_and_starts_are_errors_at_the_call():
    x = tp.zeros((4, 2))
    cases = [
        (lambda: tp.update_slice(x, 0, 0, tp.ones((1, 2), dtype=tp.float16)), "update has dtype float16"),
        (lambda: tp.update_slice(x, 0, 0, tp.ones((1, 3))), "does not fit into shape"),
        (lambda: tp.update_slice(x, 0, 0, tp.ones((5, 2))), "more rows than that dimension"),
        (lambda: tp.update_slice(x, 0, 0, tp.ones((2,))), "update has rank 1"),
        (lambda: tp.update_slice(x, 2, 0, tp.ones((1, 2))), "dim"),
        (lambda: tp.update_slice(x, 0, tp.ones((1,)), tp.ones((1, 2))), "start must be an int32 or int64 tensor"),
        (lambda: tp.update_slice(x, 0, tp.Tensor([0, 1]), tp.ones((1, 2))), "holding one value"),
        (lambda: tp.update_slice(x, 0, 1.5, tp.ones((1, 2))), "start must be an int"),
    ]
    for make, message in cases:
        with pytest.raises(tp.TripyException, match=message) as e:
            make()
        assert "tp.update_slice(x, " in str(e.value)


def test_a_donated_argument_must_not_share_memory_with_another(device):
    def write_twice(a, b, pos):
        return tp.update_slice(a, 0, pos, b[:1])

    exe = tp.compile(write_twice, args=[tp.InputInfo((4, 2), tp.float32, donate=True),
                                        tp.InputInfo((4, 2), tp.float32), tp.InputInfo((1,), tp.int32)])
    x = tp.Tensor(np.zeros((4, 2), np.float32))
    with pytest.raises(tp.TripyException, match="'a' is donated .* shares memory with argument 'b'") as e:
        exe(x, x, _pos(0))
    assert "exe(x, x, _pos(0))" in str(e.value)


def test_a_cache_of_the_wrong_shape_or_dtype_is_rejected(device):
    exe = _compile_write(donate=True)
    row = tp.Tensor(np.ones((2, 1, 3), np.float32))
    with pytest.raises(tp.TripyException, match="'cache': dimension 1 has size 7") as e:
        exe(tp.Tensor(np.zeros((2, 7, 3), np.float32)), _pos(0), row)
    assert "exe(tp.Tensor(np.zeros((2, 7, 3)" in str(e.value)
    with pytest.raises(tp.TripyException, match="'cache' has dtype float16"):
        exe(tp.Tensor(np.zeros((2, 6, 3), np.float16)), _pos(0), row)
    with pytest.raises(tp.TripyException, match="'pos' has dtype float32"):
        exe(tp.Tensor(np.zeros((2, 6, 3), np.float32)), tp.Tensor(np.zeros((1,), np.float32)), row)


def test_input_info_donate_must_be_a_bool():
    with pytest.raises(tp.TripyException, match="donate must be True or False"):
        tp.InputInfo((2,), tp.float32, donate=1)
    assert "donate=True" in repr(tp.InputInfo((2,), tp.float32, donate=True))


@pytest.mark.parametrize("start", [2**31, 2**40, -(2**40)])
def test_a_start_past_int32_is_reported_as_out_of_the_dimension(start):
    with pytest.raises(tp.TripyException, match=rf"writes 1 row\(s\) at {start} along dimension 0, but that dimension has size 4"):
        tp.update_slice(tp.ones((4,)), 0, start, tp.ones((1,))).eval()

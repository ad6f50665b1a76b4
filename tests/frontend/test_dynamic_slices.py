"""Slices to dynamic lengths: their sizes simplify under the symbols' bounds (so fusion sees equal
shapes), and fused kernels read them in place (no copy kernel), against numpy."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(3)


def _kinds(exe):
    return [k[0] for k in exe._impl.kernels]


def test_causal_mask_sliced_to_a_dynamic_length_fuses_with_its_users():
    # GPT-2's pattern: a 1024x1024 mask buffer sliced to the sequence length T <= 1024, applied to
    # scores, scaled. The mask's size min(T, 1024) is T under T's bounds, so one kernel does it all
    # and reads the mask in place.
    mask = np.tril(np.ones((1024, 1024), np.float32))
    bias = tp.Tensor(mask)

    def scores(att):
        T = att.shape[-1]
        return tp.where(bias[:T, :T] == 0.0, tp.full_like(att, -1e9), att) * 0.125

    T = tp.NamedDimension("T", 1, 16, 1024)
    exe = tp.compile(scores, args=[tp.InputInfo((T, T), dtype=tp.float32)])
    assert _kinds(exe) == ["fused"], exe._impl.program_text
    assert "window" in exe._impl.program_text
    for t in (1, 7, 33):
        x = RNG.standard_normal((t, t)).astype(np.float32)
        want = np.where(mask[:t, :t] == 0, -1e9, x) * 0.125
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-6)


def test_batched_scores_read_the_sliced_mask_without_a_copy():
    # Over (batch, T, T) the mask's compare is a (T, T) kernel of its own (fusion does not
    # broadcast a kernel's own values), but no slice is copied and the rest is one kernel.
    mask = np.tril(np.ones((1024, 1024), np.float32))
    bias = tp.Tensor(mask)

    def scores(att):
        T = att.shape[-1]
        return tp.where(bias[:T, :T] == 0.0, tp.full_like(att, -1e9), att) * 0.125

    T = tp.NamedDimension("T", 1, 16, 1024)
    exe = tp.compile(scores, args=[tp.InputInfo((2, T, T), dtype=tp.float32)])
    assert _kinds(exe) == ["fused", "fused"], exe._impl.program_text
    x = RNG.standard_normal((2, 5, 5)).astype(np.float32)
    want = np.where(mask[:5, :5] == 0, -1e9, x) * 0.125
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), want, rtol=1e-6)


def test_slice_of_a_runtime_input_is_read_in_place():
    def f(x, n):
        return x[1 : n + 1, 2:] * 2.0 + 1.0

    exe = tp.compile(f, args=[tp.InputInfo((8, 6), dtype=tp.float32), tp.DimensionInputInfo(value_bounds=(1, 3, 7))])
    assert _kinds(exe) == ["fused"], exe._impl.program_text
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    for n in (1, 4, 7):
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x), n)), x[1 : n + 1, 2:] * 2.0 + 1.0, rtol=1e-6)


def test_a_slice_that_is_an_output_is_copied_once():
    exe = tp.compile(lambda x: x[:, 1:3], args=[tp.InputInfo((4, 5), dtype=tp.float32)])
    assert len(exe._impl.kernels) == 1, exe._impl.program_text
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), x[:, 1:3])


@pytest.mark.parametrize("step", [2, -1])
def test_strided_and_reversed_slices_still_run(step):
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    exe = tp.compile(lambda a: a[::step] + 1.0, args=[tp.InputInfo((6, 4), dtype=tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), x[::step] + 1.0, rtol=1e-6)


# Python's slice rules (clamping, negative bounds counting from the end, reversed and empty
# ranges, any nonzero step) hold eagerly and compiled, on static and on dynamic dims.
SLICES = [
    (None, None, 1), (None, None, 2), (None, None, 3), (None, None, -1), (None, None, -2), (None, None, -3),
    (1, None, 2), (-3, None, None), (None, -2, None), (2, 5, None), (5, 2, None), (-1, -8, -1), (8, 2, -2),
    (2, 8, -1), (-100, 100, None), (100, -100, -1), (0, 0, None), (-1, None, -4), (None, 1, -1), (3, -3, 2),
    (-4, -1, 1), (7, None, -3), (None, -12, -1), (11, 0, -5),
]


def _ids(s):
    return "[" + ":".join("" if v is None else str(v) for v in s) + "]"


@pytest.mark.parametrize("start,stop,step", SLICES, ids=[_ids(s) for s in SLICES])
@pytest.mark.parametrize("mode", ["eager", "static", "dynamic"])
def test_slices_follow_python_rules(mode, start, stop, step, device):
    sl = slice(start, stop, step)
    f = lambda a: a[sl, 1:]  # noqa: E731
    sizes = (10,) if mode != "dynamic" else (1, 2, 10, 13)
    if mode == "static":
        f = tp.compile(f, args=[tp.InputInfo((10, 3), tp.float32)])
    elif mode == "dynamic":
        f = tp.compile(f, args=[tp.InputInfo(((1, 10, 13), 3), tp.float32)])
    for n in sizes:
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        out = f(tp.Tensor(x))
        assert out.shape == x[sl, 1:].shape, (n, out.shape)
        np.testing.assert_array_equal(np.array(out.tolist()).reshape(x[sl, 1:].shape), x[sl, 1:])


@pytest.mark.parametrize("step", [1, 2, -1, -2])
def test_slices_with_dimension_size_bounds_and_any_step(step, device):
    def f(x, n):
        return x[n::step] + 0.0, x[:n:step] + 0.0

    exe = tp.compile(f, args=[tp.InputInfo(((1, 6, 9), 2), tp.float32), tp.DimensionInputInfo(value_bounds=(0, 3, 12))])
    for rows, n in [(6, 0), (6, 3), (6, 6), (9, 12), (1, 0), (1, 5)]:
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        a, b = exe(tp.Tensor(x), n)
        np.testing.assert_array_equal(np.array(a.tolist()).reshape(x[n::step].shape), x[n::step])
        np.testing.assert_array_equal(np.array(b.tolist()).reshape(x[:n:step].shape), x[:n:step])


def test_a_tensor_step_is_an_error_naming_the_line():
    exe_args = [tp.InputInfo((4,), tp.float32), tp.DimensionInputInfo(value_bounds=(1, 1, 2))]
    with pytest.raises(tp.TripyException, match="step") as e:
        tp.compile(lambda x, n: x[::n], args=exe_args)
    assert f"{__file__.split('/')[-1]}:" in str(e.value) and "x[::n]" in str(e.value)


@pytest.mark.parametrize("pick", [0, 1, -1, -2, "last"])
def test_an_int_or_dimension_size_index_into_a_dynamic_dim_picks_that_row(pick):
    # x[:, -1] on a dynamic sequence dim (an LLM's last token) is a one-row symbolic slice.
    def last_rows(x):
        return x[:, x.shape[1] - 1] if pick == "last" else x[:, pick]

    exe = tp.compile(last_rows, args=[tp.InputInfo((2, (2, 3, 5), 4), tp.float32)])
    for T in (2, 3, 5):
        x = RNG.standard_normal((2, T, 4)).astype(np.float32)
        want = x[:, T - 1] if pick == "last" else x[:, pick]
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), want)


def test_an_int_index_past_a_dynamic_dim_is_an_error_of_the_call():
    exe = tp.compile(lambda x: x[:, 3], args=[tp.InputInfo((1, (1, 4, 5)), tp.float32)])
    assert np.asarray(exe(tp.ones((1, 4)))).shape == (1,)
    with pytest.raises(tp.TripyException):
        exe(tp.ones((1, 2)))

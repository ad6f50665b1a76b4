"""GEMMs of any shape: unaligned output rows (a vocabulary of 50257 at small scale), unaligned K,
tied and Linear weights read transposed in place, against numpy in float64, on each device. On the
GPU, wide products with unaligned rows read a weight padded with zero columns (a slice then reads the
result), and others run as row phases where the tactic timing finds them faster (see
core/src/backend/cuda/cuda_gemm_shape.h); the answer must not depend on that choice."""

import numpy as np
import pytest

import tripy as tp

RNG = np.random.default_rng(11)
TOL = {"float32": 2e-4, "float16": 2e-2}


def _kinds(exe):
    return [k[0] for k in exe._impl.kernels]


def _padded_on(device, dtype, depth, cols):
    """Whether the GPU pads the weight's columns (core/src/flat/passes/pad_dot_columns.cc): wide
    products with unaligned rows and aligned K; the dot then writes [.., padded] and a slice reads it."""
    per_16_bytes = 16 // np.dtype(dtype).itemsize
    return device.startswith("gpu") and cols >= 1024 and cols % per_16_bytes and depth % per_16_bytes == 0


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("rows,depth,cols", [(64, 64, 1001), (37, 48, 257), (130, 72, 50257 % 4099), (16, 24, 12)])
def test_tied_lm_head_with_unaligned_rows(device, dtype, rows, depth, cols):
    # x @ wte.T with the embedding table as a constant: the dot reads it transposed, no copy.
    wte = (RNG.standard_normal((cols, depth)) / np.sqrt(depth)).astype(dtype)
    x = RNG.standard_normal((rows, depth)).astype(dtype)
    W = tp.Tensor(wte)
    exe = tp.compile(lambda a: a @ tp.transpose(W, 0, 1), args=[tp.InputInfo((rows, depth), dtype=getattr(tp, dtype))])
    # Padded: the [.., :cols] view of the wider product is copied out (as a slice or a fused copy).
    want = [["dot", "slice"], ["dot", "fused"]] if _padded_on(device, dtype, depth, cols) else [["dot"]]
    assert _kinds(exe) in want, exe._impl.program_text
    assert "transpose_rhs" in exe._impl.program_text
    got = np.from_dlpack(tp.copy(exe(tp.Tensor(x)), "cpu")).astype(np.float64)
    want = x.astype(np.float64) @ wte.astype(np.float64).T
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_linear_with_an_odd_number_of_outputs_in_a_batch(device, dtype):
    lin = tp.Linear(40, 1003, dtype=getattr(tp, dtype))
    w = (RNG.standard_normal((1003, 40)) * 0.1).astype(dtype)
    b = (RNG.standard_normal((1003,)) * 0.1).astype(dtype)
    lin.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
    exe = tp.compile(lin, args=[tp.InputInfo((2, (1, 9, 17), 40), dtype=getattr(tp, dtype))])
    assert _kinds(exe) == ["dot"], exe._impl.program_text
    for t in (1, 9, 17):
        x = RNG.standard_normal((2, t, 40)).astype(dtype)
        got = np.from_dlpack(tp.copy(exe(tp.Tensor(x)), "cpu")).astype(np.float64)
        want = x.astype(np.float64) @ w.astype(np.float64).T + b
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want).max())


def test_mismatched_dynamic_batch_dims_are_a_user_error_at_the_matmul():
    def f(a, b):
        return a @ b

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 3), 3, 6), tp.float32), tp.InputInfo(((1, 3, 4), 6, 3), tp.float32)])
    assert exe(tp.ones((2, 3, 6)), tp.ones((1, 6, 3))).shape == (2, 3, 3)
    with pytest.raises(tp.TripyException) as e:
        exe(tp.ones((2, 3, 6)), tp.ones((3, 6, 3)))
    text = str(e.value)
    assert "batch dimension 0 must be broadcastable" in text and "return a @ b" in text
    assert "inconsistent" not in text  # not the runtime's internal net


def test_mismatched_dynamic_contracted_dims_name_the_matmul():
    def f(a, b):
        return a @ b

    exe = tp.compile(f, args=[tp.InputInfo((2, (1, 4, 8)), tp.float32), tp.InputInfo(((1, 4, 8), 3), tp.float32)])
    with pytest.raises(tp.TripyException, match="contracted dimensions differ") as e:
        exe(tp.ones((2, 4)), tp.ones((5, 3)))
    assert "return a @ b" in str(e.value)

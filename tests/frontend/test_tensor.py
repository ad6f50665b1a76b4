"""tp.Tensor: construction, devices, printing, the no-redundancy rule."""

import numpy as np
import pytest

import tripy as tp


def test_large_tensors_print_their_edges_only(device):
    x = np.arange(100 * 200, dtype=np.float32).reshape(100, 200)
    text = repr(tp.Tensor(x))
    assert "..." in text and "shape=(100, 200)" in text
    # The corners are there, the middle is not.
    for v in (x[0, 0], x[0, 2], x[0, -1], x[-1, -3], x[-1, -1]):
        assert f"{v:.4f}" in text
    assert f"{x[50, 100]:.4f}" not in text


def test_data_comes_in_and_out_through_dlpack():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = tp.Tensor(x, device=tp.device("cpu"))
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, x)


def test_a_lazy_op_sees_the_array_as_it_was_when_the_op_was_written(device):
    # Copy on import: writing to the numpy array afterwards changes neither the tensor nor the
    # ops built on it (before the fix, y read the array at evaluation: [200.0] * 4).
    a = np.ones(4, np.float32)
    x = tp.Tensor(a)
    y = x * 2.0
    a[:] = 100
    assert y.tolist() == [2.0] * 4
    assert x.tolist() == [1.0] * 4
    # And the other way: the tensor's memory is not the array's.
    b = np.zeros(3, np.int32)
    t = tp.Tensor(b, device=tp.device("cpu"))
    b[0] = 7
    assert t.tolist() == [0, 0, 0]


def test_non_contiguous_memory_is_rejected_with_a_fix():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(tp.TripyException, match="ascontiguousarray"):
        tp.Tensor(x)


def test_ragged_lists_and_lossy_literals_are_errors():
    with pytest.raises(tp.TripyException, match="ragged"):
        tp.Tensor([[1, 2], [3]])
    with pytest.raises(tp.TripyException, match="float literal"):
        tp.ones((2,), dtype=tp.int32) + 1.5


def test_tensors_are_not_iterable_and_bool_needs_one_element():
    with pytest.raises(TypeError):
        iter(tp.ones((2,)))
    with pytest.raises(tp.TripyException, match="ambiguous"):
        bool(tp.ones((2,)))
    assert bool(tp.ones((1, 1)))


def test_module_level_suggestions():
    with pytest.raises(AttributeError, match="Did you mean: 'tripy.float32'"):
        tp.float64


def test_numpy_asarray_reads_the_values():
    import numpy as np

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = np.asarray(tp.Tensor(x) * 2.0)
    assert got.shape == (2, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got, x * 2.0)
    np.testing.assert_array_equal(np.asarray(tp.Tensor([True, False])), [True, False])
    assert np.asarray(tp.Tensor([1, 2]), dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize(
    "array, name, target",
    [
        (np.ones((2,), np.float64), "float64", "float32"),
        (np.ones((2,), np.uint8), "uint8", "int32"),
        (np.ones((2,), np.int16), "int16", "int32"),
    ],
)
def test_unsupported_numpy_dtypes_are_named_with_a_conversion(array, name, target):
    with pytest.raises(tp.TripyException) as info:
        tp.Tensor(array)
    message = str(info.value)
    assert f"Unsupported data type: {name}." in message
    assert f"x.astype(numpy.{target})" in message
    assert "test_tensor.py" in message  # the user's line


def test_complex_input_is_named_without_a_conversion():
    with pytest.raises(tp.TripyException, match=r"Unsupported data type: complex128\. Tripy tensors hold"):
        tp.Tensor(np.ones((2,), np.complex128))


@pytest.mark.parametrize("scalar", [np.float32(0.5), np.int64(7), np.float16(2.0), np.bool_(True)])
def test_numpy_scalars_are_rank_0_tensors(scalar):
    t = tp.Tensor(scalar)
    assert t.shape == () and t.dtype.name == np.asarray(scalar).dtype.name
    assert t.tolist() == scalar.item()


def test_a_gpu_import_is_copied_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not tp._C.gpu_available():
        pytest.skip("no GPU")
    src = torch.ones(4, device="cuda")
    t = tp.Tensor(src)
    assert t.device.kind == "gpu"
    y = t * 2.0
    src.fill_(100.0)
    torch.cuda.synchronize()
    assert y.tolist() == [2.0] * 4 and t.tolist() == [1.0] * 4


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 4), (0,)])
def test_empty_bool_arrays_keep_their_shape(shape):
    # numpy < 1.25 exports no bool through DLPack; the list path must not drop trailing dims.
    t = tp.Tensor(np.zeros(shape, bool))
    assert t.shape == shape and t.dtype == tp.bool
    # and back: np.asarray of an empty bool result (a comparison) keeps them too
    out = np.asarray(t == t)
    assert out.shape == shape and out.dtype == np.bool_


def test_read_only_numpy_arrays_are_copied_and_values_kept():
    # numpy exports no read-only array through DLPack: broadcast views and frombuffer arrays.
    view = np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3))
    assert tp.Tensor(view).tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
    assert tp.Tensor(np.frombuffer(np.arange(4, dtype=np.int32).tobytes(), dtype=np.int32)).tolist() == [0, 1, 2, 3]
    assert tp.Tensor(np.broadcast_to(np.array([True, False]), (2, 2))).tolist() == [[True, False], [True, False]]


def test_a_broadcast_view_too_large_to_copy_is_an_error_not_an_exhausted_machine():
    huge = np.broadcast_to(np.float32(1), (10**6, 10**6))  # 4 TB as a copy; one float as a view
    with pytest.raises(tp.TripyException, match=r"shape \(1000000, 1000000\).*needs 4000000000000 bytes") as e:
        tp.Tensor(huge)
    assert "test_tensor.py" in str(e.value)


def test_a_torch_tensor_that_requires_grad_is_copied_like_any_other():
    torch = pytest.importorskip("torch")
    t = torch.arange(3, dtype=torch.float32).requires_grad_()
    assert tp.Tensor(t).tolist() == [0.0, 1.0, 2.0]

"""DFT against numpy's FFTs: complex and real input, forward and inverse, one-sided output, and the
inverse of a one-sided spectrum (numpy's irfft: real output, last dim 1), with and without a
dft_length input. ONNX's own conformance cases cover the forward forms at opset 17."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import tripy as tp  # noqa: E402
from onnx_files import load_model  # noqa: E402

RNG = np.random.default_rng(5)


def _dft(tmp_path, x_shape, out_shape, length=None, **attrs):
    inputs = ["x"] + ([""] if length is None else ["n"])
    inits = [] if length is None else [("n", np.array(length, np.int64))]
    return load_model(tmp_path, [helper.make_node("DFT", inputs, ["y"], **attrs)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], initializers=inits)


def _split(z):
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


@pytest.mark.parametrize("inverse", [0, 1])
def test_complex_dft_along_an_axis(tmp_path, inverse):
    z = RNG.standard_normal((2, 6, 5)) + 1j * RNG.standard_normal((2, 6, 5))
    model = _dft(tmp_path, [2, 6, 5, 2], [2, 6, 5, 2], axis=1, inverse=inverse)
    want = (np.fft.ifft if inverse else np.fft.fft)(z, axis=1)
    np.testing.assert_allclose(np.asarray(model(tp.Tensor(_split(z)))), _split(want), rtol=1e-4, atol=1e-4)


def test_one_sided_dft_of_a_real_signal(tmp_path):
    x = RNG.standard_normal((3, 8, 1)).astype(np.float32)
    model = _dft(tmp_path, [3, 8, 1], [3, 5, 2], axis=1, onesided=1)
    np.testing.assert_allclose(np.asarray(model(tp.Tensor(x))), _split(np.fft.rfft(x[..., 0], axis=1)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bins, length", [(6, None), (5, 8), (6, 11), (4, 9)])
def test_inverse_of_a_one_sided_spectrum_is_numpys_irfft(tmp_path, bins, length):
    spectrum = RNG.standard_normal((2, bins, 3)) + 1j * RNG.standard_normal((2, bins, 3))
    n = 2 * (bins - 1) if length is None else length
    model = _dft(tmp_path, [2, bins, 3, 2], [2, n, 3, 1], length=length, axis=1, onesided=1, inverse=1)
    got = np.asarray(model(tp.Tensor(_split(spectrum))))
    assert got.shape == (2, n, 3, 1)
    np.testing.assert_allclose(got[..., 0], np.fft.irfft(spectrum, n=n, axis=1), rtol=1e-4, atol=1e-5)

"""Streams and GPU data exchange (skipped where there is no GPU)."""

import numpy as np
import pytest

import tripy as tp
from tripy import _C

gpu = pytest.mark.skipif(not _C.gpu_available(), reason="no GPU on this machine")


def test_streams_need_a_gpu_where_there_is_none():
    if _C.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(tp.TripyException, match="GPU"):
        tp.Stream()


@gpu
def test_executable_runs_on_a_chosen_stream(monkeypatch):
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    exe = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((4,), tp.float32)])
    stream = tp.Stream()
    exe.stream = stream
    assert exe.stream == stream
    out = exe(tp.Tensor([1.0, 2.0, 3.0, 4.0]))
    stream.synchronize()
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0]


@gpu
def test_torch_gpu_tensors_round_trip_without_copies(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    t = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    x = tp.Tensor(t)
    assert x.device == tp.device("gpu:0")
    y = torch.from_dlpack(tp.exp(x))
    assert y.is_cuda
    np.testing.assert_allclose(y.cpu().numpy(), np.exp(np.arange(6, dtype=np.float32)).reshape(2, 3), rtol=1e-6)

"""RNN, GRU and LSTM (unrolled by the converter) against torch's modules exported by
``torch.onnx.export``: two layers, bidirectional, batch-first, with initial states (torch writes
GRU with linear_before_reset=1); and the settings torch does not export (reverse, clip, other
activations, layout=1, sequence_lens) against a numpy step loop. Skipped where torch is missing."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402
from onnx_files import torch_export  # noqa: E402

RNG = np.random.default_rng(3)
CPU = tp.device("cpu")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_torch_recurrent_layers_match_torch(tmp_path, kind):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(input_size=6, hidden_size=5, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(3, 7, 6)
    h0 = torch.randn(4, 3, 5)
    state = (h0, torch.randn(4, 3, 5)) if kind == "LSTM" else h0
    path = str(tmp_path / "m.onnx")
    with torch.no_grad():
        expected, _ = module(x, state)
        torch_export(torch, module, (x, state), path, opset_version=17, input_names=["x", "h0"] + (["c0"] if kind == "LSTM" else []))
    inputs = [x, *state] if kind == "LSTM" else [x, h0]
    model = tp.onnx.load(path, device="cpu")
    out = model(*[tp.Tensor(t.numpy(), device=CPU) for t in inputs])
    out = out[0] if isinstance(out, tuple) else out
    np.testing.assert_allclose(np.asarray(out), expected.numpy(), rtol=1e-4, atol=1e-5)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_gru_reverse_with_clip_and_hard_sigmoid_matches_numpy(tmp_path):
    seq, batch, inp, hidden = 4, 2, 3, 5
    x = RNG.standard_normal((batch, seq, inp)).astype(np.float32)  # layout=1
    w = RNG.standard_normal((1, 3 * hidden, inp)).astype(np.float32)
    r = RNG.standard_normal((1, 3 * hidden, hidden)).astype(np.float32)
    b = RNG.standard_normal((1, 6 * hidden)).astype(np.float32)
    node = helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "y_h"], hidden_size=hidden, direction="reverse",
                            layout=1, clip=1.5, activations=["HardSigmoid", "Tanh"], activation_alpha=[0.3],
                            activation_beta=[0.4])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in ("y", "y_h")],
                              initializer=[numpy_helper.from_array(v, k) for k, v in (("w", w), ("r", r), ("b", b))])
    path = str(tmp_path / "gru.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    y, y_h = tp.onnx.load(path, device="cpu")(tp.Tensor(x, device=CPU))

    f = lambda v: np.clip(0.3 * np.clip(v, -1.5, 1.5) + 0.4, 0, 1)  # noqa: E731
    g = lambda v: np.tanh(np.clip(v, -1.5, 1.5))  # noqa: E731
    wz, wr, wh = np.split(w[0], 3)
    rz, rr, rh = np.split(r[0], 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b[0], 6)
    h = np.zeros((batch, hidden), np.float32)
    expected = np.zeros((batch, seq, 1, hidden), np.float32)
    for t in reversed(range(seq)):
        xt = x[:, t]
        z = f(xt @ wz.T + h @ rz.T + wbz + rbz)
        reset = f(xt @ wr.T + h @ rr.T + wbr + rbr)
        candidate = g(xt @ wh.T + (reset * h) @ rh.T + rbh + wbh)
        h = (1 - z) * candidate + z * h
        expected[:, t, 0] = h
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(y_h), h[:, None], rtol=1e-4, atol=1e-5)


def test_rnn_sequence_lens_hold_the_state_past_each_length(tmp_path):
    seq, batch, inp, hidden = 5, 3, 2, 4
    x = RNG.standard_normal((seq, batch, inp)).astype(np.float32)
    w = RNG.standard_normal((1, hidden, inp)).astype(np.float32)
    r = RNG.standard_normal((1, hidden, hidden)).astype(np.float32) * 0.5
    lens = np.array([5, 2, 3], np.int32)
    node = helper.make_node("RNN", ["x", "w", "r", "", "lens"], ["y", "y_h"], hidden_size=hidden)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in ("y", "y_h")],
                              initializer=[numpy_helper.from_array(v, k) for k, v in (("w", w), ("r", r), ("lens", lens))])
    path = str(tmp_path / "rnn.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    y, y_h = tp.onnx.load(path, device="cpu")(tp.Tensor(x, device=CPU))
    h = np.zeros((batch, hidden), np.float32)
    expected = np.zeros((seq, 1, batch, hidden), np.float32)
    for t in range(seq):
        new = np.tanh(x[t] @ w[0].T + h @ r[0].T)
        valid = (t < lens)[:, None]
        expected[t, 0] = np.where(valid, new, 0)
        h = np.where(valid, new, h)
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(y_h), h[None], rtol=1e-4, atol=1e-5)

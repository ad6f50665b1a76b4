"""Small ONNX models the tests write: a graph of nodes saved at one opset, then loaded by tp.onnx.
Import after ``pytest.importorskip("onnx")``."""

import numpy as np
import onnx
from onnx import helper, numpy_helper

import tripy as tp


def load_model(tmp_path, nodes, inputs, outputs, initializers=(), opset=17):
    """The model of ``nodes`` loaded on the CPU. ``inputs`` and ``outputs``: ValueInfoProtos;
    ``initializers``: (name, array) pairs."""
    graph = helper.make_graph(nodes, "g", list(inputs), list(outputs),
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in initializers])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return tp.onnx.load(path, device="cpu")


def torch_export(torch, *args, **kwargs):
    """``torch.onnx.export`` by its TorchScript exporter, the only one torch 1.13 (Debian's) has and
    not the default from torch 2.9 on: the same ONNX graph whichever torch runs the tests. Where
    that exporter's tracer fails on a module (torch 2.11's traces TransformerEncoderLayer's
    ``is_causal`` as a tensor), the default exporter."""
    import inspect

    if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        return torch.onnx.export(*args, **kwargs)
    try:
        return torch.onnx.export(*args, dynamo=False, **kwargs)
    except TypeError:
        return torch.onnx.export(*args, **kwargs)

"""The ONNX importer's GELU and SiLU chain rewrites (tripy/onnx/patterns.py) where one condition
fails: another operand, another constant or op, an inner value read elsewhere. The chain stays as
its nodes and computes what they say, against numpy."""

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402

RNG = np.random.default_rng(9)
ERF = np.vectorize(math.erf)
CONSTS = {"sqrt2": math.sqrt(2), "one": 1.0, "half": 0.5, "quarter": 0.25}


def _load(tmp_path, nodes, outputs):
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in CONSTS.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, (4, 6)) for n in "xy"],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              initializer=inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return tp.onnx.load(path, device="cpu")


def _gelu_nodes(add="Add", half="half"):
    return [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node(add, ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", half], ["g"])]


@pytest.mark.parametrize("case", ["control", "sub_one", "quarter", "divided_also_output"])
def test_a_gelu_chain_one_step_off_stays_its_nodes(tmp_path, case):
    x = RNG.standard_normal((4, 6)).astype(np.float32) * 3
    y = np.zeros_like(x)
    nodes = _gelu_nodes(add="Sub" if case == "sub_one" else "Add", half="quarter" if case == "quarter" else "half")
    outputs = ["g", "d"] if case == "divided_also_output" else ["g"]
    model = _load(tmp_path, nodes, outputs)
    kinds = [n.op_type for n in model._graph.nodes]
    assert ("Gelu" in kinds) == (case == "control"), kinds
    e = ERF(x / math.sqrt(2))
    inner = e - 1 if case == "sub_one" else e + 1
    want = x * inner * (0.25 if case == "quarter" else 0.5)
    got = model(tp.Tensor(x, device=tp.device("cpu")), tp.Tensor(y, device=tp.device("cpu")))
    got = got if isinstance(got, (tuple, list)) else [got]
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["control", "other_operand", "sigmoid_also_output"])
def test_a_silu_chain_one_step_off_stays_its_nodes(tmp_path, case):
    x, y = (RNG.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    partner = "y" if case == "other_operand" else "x"
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", [partner, "s"], ["z"])]
    model = _load(tmp_path, nodes, ["z", "s"] if case == "sigmoid_also_output" else ["z"])
    kinds = [n.op_type for n in model._graph.nodes]
    assert ("Silu" in kinds) == (case == "control"), kinds
    s = 1 / (1 + np.exp(-x))
    got = model(tp.Tensor(x, device=tp.device("cpu")), tp.Tensor(y, device=tp.device("cpu")))
    got = got if isinstance(got, (tuple, list)) else [got]
    np.testing.assert_allclose(np.asarray(got[0]), (y if case == "other_operand" else x) * s, rtol=1e-5, atol=1e-6)

"""Converters that ONNX's backend cases leave untested (Einsum's are all float64), and the graph
rewrites onto Tripy's fused ops (LayerNormalization, InstanceNormalization, GELU and SiLU chains,
Resize as tp.resize), each against numpy."""

import math
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402
from tripy import _C  # noqa: E402

RNG = np.random.default_rng(11)


def _model(tmp_path, nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in initializers])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return tp.onnx.load(path, device="cpu")


def _run(model, *arrays):
    out = model(*[tp.Tensor(a, device=tp.device("cpu")) for a in arrays])
    return np.asarray(out)


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->bi", [(2, 3, 3)]),
    ("i,i", [(5,), (5,)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ij->", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk->...ik", [(2, 2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk->kj", [(2, 3, 4)]),
])
def test_einsum_matches_numpy(tmp_path, equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    expected = np.einsum(equation, *arrays)
    model = _model(tmp_path, [helper.make_node("Einsum", names, ["y"], equation=equation)],
                   list(zip(names, shapes)), [("y", None)])
    np.testing.assert_allclose(_run(model, *arrays), expected, rtol=1e-4, atol=1e-5)


def test_an_einsum_the_equation_cannot_describe_names_the_node(tmp_path):
    model = _model(tmp_path, [helper.make_node("Einsum", ["a"], ["y"], name="bad", equation="ij,jk->ik")],
                   [("a", (2, 2))], [("y", None)])
    with pytest.raises(tp.TripyException, match="node 'bad' .*2 operands, but the node has 1 inputs"):
        _run(model, np.ones((2, 2), np.float32))


def _kinds(model, **infos):
    exe = tp.compile(model, kwargs=infos)
    return exe, [kind for kind, _, _ in exe._impl.kernels]


def test_layer_normalization_is_tripys_fused_layernorm(tmp_path):
    scale = RNG.standard_normal(16).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    model = _model(tmp_path, [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)],
                   [("x", ("n", 5, 16))], [("y", ("n", 5, 16))], [("s", scale), ("b", bias)])
    x = RNG.standard_normal((3, 5, 16)).astype(np.float32)
    mean = x.mean(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-3) * scale + bias
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-4, atol=1e-5)
    ops = _trace_ops(model, x)
    assert ops.count("layernorm") == 1 and "mean" not in ops and "sqrt" not in ops, ops
    exe = tp.compile(model, kwargs=model.input_infos({"n": (1, 2, 4)}))
    np.testing.assert_allclose(np.asarray(exe(x=tp.Tensor(x, device=tp.device("cpu")))), expected, rtol=1e-4, atol=1e-5)


def _trace_ops(model, *arrays):
    """The Trace op names of the graph the model builds (from the printed Trace of its output)."""
    out = model(*[tp.Tensor(a, device=tp.device("cpu")) for a in arrays])
    text = _C.trace_str(out._node)
    return [line.rsplit("= ", 1)[1].split("(")[0] for line in text.splitlines() if "= " in line]


def test_gelu_and_silu_chains_become_tripys_ops(tmp_path):
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["g"]),
        helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["y"]),
    ]
    consts = [("sqrt2", np.array(math.sqrt(2), np.float32)), ("one", np.array(1.0, np.float32)),
              ("half", np.array(0.5, np.float32))]
    model = _model(tmp_path, nodes, [("x", (4, 6))], [("y", (4, 6))], consts)
    assert [n.op_type for n in model._graph.nodes] == ["Gelu", "Silu"]
    x = RNG.standard_normal((4, 6)).astype(np.float32) * 3
    erf = np.vectorize(math.erf)
    g = x * 0.5 * (1 + erf(x / math.sqrt(2)))
    np.testing.assert_allclose(_run(model, x), g / (1 + np.exp(-g)), rtol=1e-5, atol=1e-6)


def test_a_chain_whose_inner_value_is_used_elsewhere_is_left_as_it_is(tmp_path):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"]),
             helper.make_node("Add", ["y", "s"], ["z"])]
    model = _model(tmp_path, nodes, [("x", (5,))], [("z", (5,))])
    assert [n.op_type for n in model._graph.nodes] == ["Sigmoid", "Mul", "Add"]
    x = RNG.standard_normal(5).astype(np.float32)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(_run(model, x), x * s + s, rtol=1e-5, atol=1e-6)


def test_a_gelu_chain_with_other_constants_is_not_gelu(tmp_path):
    nodes = [
        helper.make_node("Div", ["x", "c"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    consts = [("c", np.array(2.0, np.float32)), ("one", np.array(1.0, np.float32)), ("half", np.array(0.5, np.float32))]
    model = _model(tmp_path, nodes, [("x", (4,))], [("y", (4,))], consts)
    assert "Gelu" not in [n.op_type for n in model._graph.nodes]
    x = RNG.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(_run(model, x), x * 0.5 * (1 + np.vectorize(math.erf)(x / 2)), rtol=1e-5, atol=1e-6)


def test_instance_normalization_is_tripys_fused_instancenorm(tmp_path):
    scale = RNG.standard_normal(3).astype(np.float32)
    bias = RNG.standard_normal(3).astype(np.float32)
    model = _model(tmp_path, [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
                   [("x", (2, 3, 4, 5))], [("y", (2, 3, 4, 5))], [("s", scale), ("b", bias)])
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    mean = x.mean((2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean((2, 3), keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-4) * scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-4, atol=1e-5)
    assert _trace_ops(model, x).count("instancenorm") == 1


def _resize_model(tmp_path, dims, sizes, **attrs):
    sizes_init = ("sizes", np.array(sizes, np.int64))
    return _model(tmp_path, [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)],
                  [("x", dims)], [("y", None)], [sizes_init], opset=13)


def test_bilinear_resize_is_tp_resize_and_matches_torchs_rule(tmp_path):
    """torch.onnx.export's bilinear upsampling (linear, half_pixel) runs as tp.resize."""
    model = _resize_model(tmp_path, (2, 2, 3, 4), [2, 2, 6, 7], mode="linear",
                          coordinate_transformation_mode="half_pixel")
    x = RNG.standard_normal((2, 2, 3, 4)).astype(np.float32)

    def axis(n_in, n_out):
        src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0)
        lo = np.floor(src).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        w = src - lo
        m = np.zeros((n_out, n_in))
        m[np.arange(n_out), lo] += 1 - w
        m[np.arange(n_out), hi] += w
        return m

    expected = np.einsum("oh,nchw,pw->ncop", axis(3, 6), x, axis(4, 7))
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-5, atol=1e-5)
    assert _trace_ops(model, x).count("resize") == 1


def test_nearest_resize_with_other_rounding_is_gathered(tmp_path):
    """round_prefer_ceil with asymmetric coordinates is not tp.resize's rule: per-dim gathers."""
    model = _resize_model(tmp_path, (1, 1, 2, 3), [1, 1, 5, 7], mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="round_prefer_ceil")
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)

    def index(n_in, n_out):
        src = np.arange(n_out) * n_in / n_out
        return np.minimum(np.where(src - np.floor(src) == 0.5, np.ceil(src), np.floor(src + 0.5)), n_in - 1).astype(int)

    expected = x[:, :, index(2, 5)][:, :, :, index(3, 7)]
    np.testing.assert_array_equal(_run(model, x), expected)
    assert "resize" not in _trace_ops(model, x)


def test_torchs_expand_to_minus_one_stays_symbolic_under_a_dynamic_batch(tmp_path):
    """x.expand(batch, -1, -1) as torch exports it: the target shape is Where(shape == -1, 1, shape)
    over shape values, which must not become data-dependent tensors."""
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "zero1"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_ones"], ["target"], axis=0),
        helper.make_node("Reshape", ["target", "minus_one"], ["target2"]),
        helper.make_node("Shape", ["target2"], ["rank"]),
        helper.make_node("ConstantOfShape", ["rank"], ["ones"], value=numpy_helper.from_array(i64(1))),
        helper.make_node("Mul", ["ones", "minus_one"], ["negs"]),
        helper.make_node("Equal", ["target2", "negs"], ["is_neg"]),
        helper.make_node("Where", ["is_neg", "ones", "target2"], ["sizes"]),
        helper.make_node("Expand", ["token", "sizes"], ["expanded"]),
        helper.make_node("Concat", ["expanded", "x"], ["y"], axis=1),
    ]
    token = RNG.standard_normal((1, 1, 4)).astype(np.float32)
    consts = [("zero", np.array(0, np.int64)), ("zero1", i64(0)), ("minus_ones", i64(-1, -1)), ("minus_one", i64(-1)),
              ("token", token)]
    model = _model(tmp_path, nodes, [("x", ("batch", 3, 4))], [("y", ("batch", 4, 4))], consts)
    exe = tp.compile(model, kwargs=model.input_infos({"batch": (1, 2, 4)}))
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 3, 4)).astype(np.float32)
        expected = np.concatenate([np.broadcast_to(token, (batch, 1, 4)), x], 1)
        np.testing.assert_array_equal(np.asarray(exe(x=tp.Tensor(x, device=tp.device("cpu")))), expected)

"""ONNX's If, Loop, Scan and SequenceMap (``tripy/onnx/control_flow.py``) against numpy, eagerly
and under ``tp.compile``: a known condition takes its branch, an unknown one picks with
``tp.where``, loops unroll over counts known while the graph is built; and each refusal with its
reason."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402
from tripy.onnx import control_flow  # noqa: E402

RNG = np.random.default_rng(7)
CPU = tp.device("cpu")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _info(name, shape=None, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name + "_v"))


def _graph(nodes, inputs, outputs, name="body"):
    return helper.make_graph(nodes, name, inputs, outputs)


def _model(tmp_path, nodes, inputs, outputs, opset=17):
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(_graph(nodes, inputs, outputs, "g"), opset_imports=[helper.make_opsetid("", opset)]),
              path)
    return tp.onnx.load(path, device="cpu")


def _t(a):
    return tp.Tensor(np.asarray(a), device=CPU)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---- If -------------------------------------------------------------------------------------------


def _if_model(tmp_path, then_nodes, else_nodes, then_shape=(3,), else_shape=(3,)):
    """y = If(cond) with branches reading the outer x (shape [3])."""
    then_g = _graph(then_nodes, [], [_info("t", list(then_shape))], "then")
    else_g = _graph(else_nodes, [], [_info("e", list(else_shape))], "else")
    return _model(tmp_path, [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
                  [_info("cond", [], B), _info("x", [3])], [_info("y")])


def test_if_runs_the_branch_of_its_condition(tmp_path):
    model = _if_model(tmp_path, [helper.make_node("Relu", ["x"], ["t"])], [helper.make_node("Neg", ["x"], ["e"])])
    x = _x(3)
    np.testing.assert_array_equal(np.asarray(model(_t(True), _t(x))), np.maximum(x, 0))
    np.testing.assert_array_equal(np.asarray(model(_t(False), _t(x))), -x)


def test_if_on_a_runtime_condition_compiles_to_a_where(tmp_path):
    model = _if_model(tmp_path, [helper.make_node("Relu", ["x"], ["t"])], [helper.make_node("Neg", ["x"], ["e"])])
    exe = tp.compile(model, kwargs=model.input_infos())
    x = _x(3)
    for cond in (True, False):
        np.testing.assert_array_equal(np.asarray(exe(cond=_t(cond), x=_t(x))), np.where(cond, np.maximum(x, 0), -x))


def test_if_on_a_known_condition_takes_one_branch_of_any_shape(tmp_path):
    then_g = _graph([_const("t", np.ones(2, np.float32))], [], [_info("t", [2])], "then")
    else_g = _graph([_const("e", np.zeros(5, np.float32))], [], [_info("e", [5])], "else")
    model = _model(tmp_path, [_const("c", np.array(False)),
                              helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                   [_info("x", [3])], [_info("y")])
    exe = tp.compile(model, kwargs=model.input_infos())
    assert np.asarray(exe(x=_t(_x(3)))).tolist() == [0.0] * 5


def test_if_of_branches_of_other_shapes_on_a_runtime_condition_is_refused(tmp_path):
    model = _if_model(tmp_path, [_const("t", np.ones(2, np.float32))], [helper.make_node("Neg", ["x"], ["e"])],
                      then_shape=(2,))
    with pytest.raises(tp.TripyException, match=r"(?s)'if'.*branches give output 'y' different dtypes, shapes or "
                                                r"kinds \(float32\[2\] and float32\[3\]\)"):
        tp.compile(model, kwargs=model.input_infos())


def test_a_fused_chain_keeps_a_value_a_branch_reads(tmp_path):
    """x * sigmoid(x) is not fused into SiLU where a branch also reads sigmoid(x)."""
    then_g = _graph([helper.make_node("Identity", ["s"], ["t"])], [], [_info("t", [3])], "then")
    else_g = _graph([helper.make_node("Identity", ["m"], ["e"])], [], [_info("e", [3])], "else")
    model = _model(tmp_path, [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["m"]),
                              helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)],
                   [_info("cond", [], B), _info("x", [3])], [_info("y")])
    x = _x(3)
    np.testing.assert_allclose(np.asarray(model(_t(True), _t(x))), 1 / (1 + np.exp(-x)), rtol=1e-6)


# ---- Loop -----------------------------------------------------------------------------------------


def _loop_body(extra_nodes=(), cond_out="cond_in"):
    """Body of (i, cond, y): y + x[i] (x outer, [5, 2]); scan output y; the condition passed on."""
    return _graph([helper.make_node("Identity", [cond_out], ["cond_out"]),
                   helper.make_node("Gather", ["x", "i"], ["row"]),
                   helper.make_node("Add", ["y_in", "row"], ["y_out"]),
                   helper.make_node("Identity", ["y_out"], ["scan"]), *extra_nodes],
                  [_info("i", [], I64), _info("cond_in", [], B), _info("y_in", [2])],
                  [_info("cond_out", [], B), _info("y_out", [2]), _info("scan", [2])])


def test_loop_with_a_constant_trip_count_unrolls(tmp_path):
    model = _model(tmp_path, [_const("n", np.array(3, np.int64)),
                              helper.make_node("Loop", ["n", "", "y0"], ["y", "ys"], body=_loop_body())],
                   [_info("x", [5, 2]), _info("y0", [2])], [_info("y", [2]), _info("ys", [3, 2])])
    x, y0 = _x(5, 2), _x(2)
    ref_scan = y0 + np.cumsum(x[:3], 0)
    for run in (model, tp.compile(model, kwargs=model.input_infos())):
        y, ys = run(x=_t(x), y0=_t(y0))
        np.testing.assert_allclose(np.asarray(y), ref_scan[-1], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(ys), ref_scan, rtol=1e-6)


def test_loop_ends_when_its_body_gives_false(tmp_path):
    """A while loop: the body passes on i + 1 < 4, read after each step (eagerly)."""
    body = _loop_body([_const("four", np.array(4, np.int64)), _const("one", np.array(1, np.int64)),
                       helper.make_node("Add", ["i", "one"], ["next"]),
                       helper.make_node("Less", ["next", "four"], ["go"])], cond_out="go")
    model = _model(tmp_path, [helper.make_node("Loop", ["", "c0", "y0"], ["y", "ys"], body=body)],
                   [_info("x", [5, 2]), _info("c0", [], B), _info("y0", [2])], [_info("y", [2]), _info("ys")])
    x, y0 = _x(5, 2), _x(2)
    y, ys = model(_t(x), _t(True), _t(y0))
    np.testing.assert_allclose(np.asarray(ys), y0 + np.cumsum(x[:4], 0), rtol=1e-6)
    y, ys_none = model(_t(x), _t(False), _t(y0))  # no step: the scan output is [0, 2], as the body declares
    np.testing.assert_array_equal(np.asarray(y), y0)
    assert np.asarray(ys_none).shape == (0, 2)


def test_loop_with_a_trip_count_from_a_runtime_input_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("Loop", ["n", "", "y0"], ["y", "ys"], name="loop", body=_loop_body())],
                   [_info("x", [5, 2]), _info("n", [], I64), _info("y0", [2])], [_info("y", [2]), _info("ys")])
    x, y0 = _x(5, 2), _x(2)
    np.testing.assert_allclose(np.asarray(model(_t(x), _t(np.array(2, np.int64)), _t(y0))[0]), y0 + x[0] + x[1],
                               rtol=1e-6)  # eagerly the count is read when the model runs
    with pytest.raises(tp.TripyException, match=r"(?s)'loop'.*the trip count depends on a runtime input's values"):
        tp.compile(model, kwargs=model.input_infos())


def test_loop_past_its_step_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(control_flow, "MAX_STEPS", 3)
    model = _model(tmp_path, [_const("n", np.array(5, np.int64)),
                              helper.make_node("Loop", ["n", "", "y0"], ["y", "ys"], name="loop", body=_loop_body())],
                   [_info("x", [5, 2]), _info("y0", [2])], [_info("y", [2]), _info("ys")])
    with pytest.raises(tp.TripyException, match=r"(?s)'loop'.*the loop runs past 3 steps"):
        model(_t(_x(5, 2)), _t(_x(2)))


def test_loop_of_no_step_with_an_undeclared_scan_output_is_refused(tmp_path):
    body = _loop_body()
    body.output[2].type.tensor_type.ClearField("shape")
    model = _model(tmp_path, [_const("n", np.array(0, np.int64)),
                              helper.make_node("Loop", ["n", "", "y0"], ["y", "ys"], name="loop", body=body)],
                   [_info("x", [5, 2]), _info("y0", [2])], [_info("y", [2]), _info("ys")])
    with pytest.raises(tp.TripyException, match=r"(?s)'loop'.*the loop ran no step, and the body's output 'scan'"):
        model(_t(_x(5, 2)), _t(_x(2)))


def test_a_body_op_tripy_lacks_is_refused_at_load_under_the_loop(tmp_path):
    body = _graph([helper.make_node("Identity", ["c"], ["c_out"]),
                   helper.make_node("RandomNormalLike", ["v"], ["r"], name="r"),
                   helper.make_node("Identity", ["v"], ["v_out"])],
                  [_info("i", [], I64), _info("c", [], B), _info("v", [2])], [_info("c_out", [], B), _info("v_out", [2])])
    with pytest.raises(tp.TripyException, match=r"node 'loop' \(Loop, opset 17\), its body: node 'r' \(RandomNormalLike"):
        _model(tmp_path, [helper.make_node("Loop", ["n", "", "v0"], ["v"], name="loop", body=body)],
               [_info("n", [], I64), _info("v0", [2])], [_info("v", [2])])


# ---- Scan -----------------------------------------------------------------------------------------


def _sum_body():
    return _graph([helper.make_node("Add", ["s_in", "step"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["out"])],
                  [_info("s_in", [2]), _info("step", [2])], [_info("s_out", [2]), _info("out", [2])])


def test_scan_runs_reversed_along_an_axis(tmp_path):
    model = _model(tmp_path, [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=_sum_body(), num_scan_inputs=1,
                                               scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])],
                   [_info("s0", [2]), _info("x", [2, 4])], [_info("s", [2]), _info("ys", [2, 4])])
    s0, x = _x(2), _x(2, 4)
    ref = s0[:, None] + np.cumsum(x[:, ::-1], 1)
    s, ys = model(_t(s0), _t(x))
    np.testing.assert_allclose(np.asarray(s), ref[:, -1], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ys), ref, rtol=1e-5)


def test_scan_over_a_dynamic_length_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="scan", body=_sum_body(),
                                               num_scan_inputs=1)],
                   [_info("s0", [2]), _info("x", ["n", 2])], [_info("s", [2]), _info("ys")])
    with pytest.raises(tp.TripyException, match=r"(?s)'scan'.*lengths static and equal, but they are \[dynamic\]"):
        tp.compile(model, kwargs=model.input_infos({"n": (1, 2, 4)}))


def test_scan_over_length_zero_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="scan", body=_sum_body(),
                                               num_scan_inputs=1)],
                   [_info("s0", [2]), _info("x", [0, 2])], [_info("s", [2]), _info("ys")])
    with pytest.raises(tp.TripyException, match=r"(?s)'scan'.*Scan over sequences of length 0"):
        model(_t(_x(2)), _t(np.zeros((0, 2), np.float32)))


def test_scan8_with_sequence_lens_is_refused_at_load(tmp_path):
    with pytest.raises(tp.TripyException, match=r"sequence_lens is not supported"):
        _model(tmp_path, [helper.make_node("Scan", ["lens", "s0", "x"], ["s", "ys"], body=_sum_body(), num_scan_inputs=1)],
               [_info("lens", [1], I64), _info("s0", [1, 2]), _info("x", [1, 3, 2])], [_info("s"), _info("ys")], opset=8)


# ---- SequenceMap ----------------------------------------------------------------------------------


def test_sequence_maps_of_other_lengths_are_refused(tmp_path):
    body = _graph([helper.make_node("Add", ["a", "b"], ["c"])], [_info("a"), _info("b")], [_info("c")])
    seqs = [helper.make_tensor_sequence_value_info(k, F, None) for k in ("p", "q")]
    model = _model(tmp_path, [helper.make_node("SequenceMap", ["p", "q"], ["r"], name="map", body=body)], seqs,
                   [helper.make_tensor_sequence_value_info("r", F, None)])
    x = _x(2)
    out = model([_t(x), _t(x)], [_t(x), _t(2 * x)])
    np.testing.assert_allclose([np.asarray(t) for t in out], [2 * x, 3 * x], rtol=1e-6)
    with pytest.raises(tp.TripyException, match=r"(?s)'map'.*its sequences must have one length, not \[1, 2\]"):
        model([_t(x)], [_t(x), _t(x)])

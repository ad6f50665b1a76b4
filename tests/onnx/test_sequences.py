"""ONNX's sequence and optional ops (``tripy/onnx/sequences.py``) against numpy: sequences as lists
of tensors, positions read while the graph is built, and each refusal with its reason."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_files import load_model  # noqa: E402

import tripy as tp  # noqa: E402

RNG = np.random.default_rng(11)
CPU = tp.device("cpu")


def _seq_info(name, shape=None):
    return helper.make_tensor_sequence_value_info(name, TensorProto.FLOAT, shape)


def _tensor_info(name, shape=None, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


_model = load_model


def _t(a):
    return tp.Tensor(np.asarray(a), device=CPU)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_construct_insert_at_erase_and_length(tmp_path):
    a, b, c = _x(2, 3), _x(2, 3), _x(2, 3)
    model = _model(tmp_path, [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
        helper.make_node("SequenceInsert", ["s", "c", "front"], ["s2"]),  # [c, a, b]
        helper.make_node("SequenceErase", ["s2", "minus_one"], ["s3"]),   # [c, a]
        helper.make_node("SequenceAt", ["s3", "minus_one"], ["last"]),    # a
        helper.make_node("SequenceLength", ["s2"], ["n"]),
    ], [_tensor_info(k, [2, 3]) for k in "abc"],
        [_seq_info("s3"), _tensor_info("last"), _tensor_info("n", [], TensorProto.INT64)],
        [("front", np.array(0, np.int64)), ("minus_one", np.array(-1, np.int64))])
    s3, last, n = model(_t(a), _t(b), _t(c))
    assert [np.asarray(t).tolist() for t in s3] == [c.tolist(), a.tolist()]
    np.testing.assert_array_equal(np.asarray(last), a)
    assert np.asarray(n).tolist() == 3


def test_a_sequence_input_and_output_pass_as_lists(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceInsert", ["s", "x"], ["out"])],
                   [_seq_info("s"), _tensor_info("x", [2])], [_seq_info("out")])
    x, y = _x(2), _x(3)
    out = model([_t(y)], _t(x))
    assert [np.asarray(t).tolist() for t in out] == [y.tolist(), x.tolist()]


@pytest.mark.parametrize("new_axis", [0, 1])
def test_concat_from_sequence_concatenates_or_stacks(tmp_path, new_axis):
    parts = [_x(2, 3) for _ in range(3)]
    model = _model(tmp_path, [helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=new_axis)],
                   [_seq_info("s")], [_tensor_info("y")])
    ref = np.stack(parts, 1) if new_axis else np.concatenate(parts, 1)
    np.testing.assert_array_equal(np.asarray(model([_t(p) for p in parts])), ref)


@pytest.mark.parametrize("split, keepdims, sizes", [(None, 1, [1] * 5), (None, 0, [1] * 5),
                                                    (np.array(2, np.int64), 1, [2, 2, 1]),
                                                    (np.array([1, 4], np.int64), 1, [1, 4])])
def test_split_to_sequence(tmp_path, split, keepdims, sizes):
    x = _x(3, 5)
    inputs = ["x"] if split is None else ["x", "split"]
    model = _model(tmp_path, [helper.make_node("SplitToSequence", inputs, ["s"], axis=1, keepdims=keepdims)],
                   [_tensor_info("x", [3, 5])], [_seq_info("s")], [] if split is None else [("split", split)])
    out = [np.asarray(t) for t in model(_t(x))]
    refs = np.split(x, np.cumsum(sizes)[:-1], 1)
    refs = refs if keepdims or split is not None else [r[:, 0] for r in refs]
    assert len(out) == len(refs)
    for o, r in zip(out, refs):
        np.testing.assert_array_equal(o, r)


def test_optional_has_and_get_element(tmp_path):
    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    model = _model(tmp_path, [helper.make_node("OptionalHasElement", ["o"], ["has"]),
                              helper.make_node("Optional", ["x"], ["wrapped"]),
                              helper.make_node("OptionalGetElement", ["wrapped"], ["y"])],
                   [opt, _tensor_info("x", [2])], [_tensor_info("has", [], TensorProto.BOOL), _tensor_info("y", [2])],
                   opset=15)
    x = _x(2)
    has, y = model(None, _t(x))
    assert np.asarray(has).tolist() is False
    np.testing.assert_array_equal(np.asarray(y), x)
    has, _ = model(_t(x), _t(x))
    assert np.asarray(has).tolist() is True


# ---- refusals -------------------------------------------------------------------------------------


def test_get_element_of_an_empty_optional_is_refused(tmp_path):
    empty = helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    model = _model(tmp_path, [empty, helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")], [],
                   [_tensor_info("y", [2])], opset=15)
    with pytest.raises(tp.TripyException, match=r"(?s)'get'.*the optional 'o' is empty"):
        model()


def test_a_position_outside_the_sequence_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceAt", ["s", "i"], ["y"], name="at")],
                   [_seq_info("s")], [_tensor_info("y")], [("i", np.array(2, np.int64))])
    with pytest.raises(tp.TripyException, match=r"(?s)'at'.*position 2 lies outside the sequence of 2 tensors"):
        model([_t(_x(2)), _t(_x(2))])


def test_a_position_from_a_runtime_input_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
                              helper.make_node("SequenceAt", ["s", "i"], ["y"], name="at")],
                   [_tensor_info("x", [2]), _tensor_info("i", [], TensorProto.INT64)], [_tensor_info("y", [2])])
    assert np.asarray(model(_t(np.ones(2, np.float32)), _t(np.array(1, np.int64)))).tolist() == [1.0, 1.0]  # eager
    with pytest.raises(tp.TripyException, match=r"(?s)'at'.*needs the values of 'i' while the graph is built"):
        tp.compile(model, kwargs=model.input_infos())


def test_erasing_from_an_empty_sequence_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceEmpty", [], ["s"]),
                              helper.make_node("SequenceErase", ["s"], ["t"], name="erase"),
                              helper.make_node("SequenceLength", ["t"], ["n"])],
                   [], [_tensor_info("n", [], TensorProto.INT64)])
    with pytest.raises(tp.TripyException, match=r"(?s)'erase'.*the sequence is empty"):
        model()


def test_concat_of_an_empty_sequence_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceEmpty", [], ["s"]),
                              helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")],
                   [], [_tensor_info("y")])
    with pytest.raises(tp.TripyException, match=r"(?s)'cat'.*the sequence is empty, so the output's dtype and shape"):
        model()


def test_split_into_equal_parts_of_a_dynamic_dim_is_refused_under_compile(tmp_path):
    model = _model(tmp_path, [helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
                              helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                   [_tensor_info("x", ["n", 2])], [_tensor_info("y")])
    with pytest.raises(tp.TripyException, match=r"(?s)'split'.*splitting dim 0 into equal parts needs it static"):
        tp.compile(model, kwargs=model.input_infos({"n": (1, 2, 4)}))


def test_split_sizes_that_miss_the_dim_are_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("SplitToSequence", ["x", "split"], ["s"], name="split")],
                   [_tensor_info("x", [5])], [_seq_info("s")], [("split", np.array([3], np.int64))])
    with pytest.raises(tp.TripyException, match=r"(?s)'split'.*the split sizes \[3\] do not add up to dim 0's size 5"):
        model(_t(_x(5)))


def test_a_tensor_where_a_sequence_is_needed_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceLength", ["x"], ["n"], name="len")],
                   [_tensor_info("x", [2])], [_tensor_info("n", [], TensorProto.INT64)])
    with pytest.raises(tp.TripyException, match=r"(?s)'len'.*input 0 \('x'\) must be a sequence, but it is a tensor"):
        model(_t(_x(2)))


def test_a_sequence_where_a_tensor_is_needed_is_refused(tmp_path):
    model = _model(tmp_path, [helper.make_node("Relu", ["s"], ["y"], name="relu")], [_seq_info("s")],
                   [_tensor_info("y")])
    with pytest.raises(tp.TripyException, match=r"(?s)'relu'.*'s' is a sequence, where a tensor is needed"):
        model([_t(_x(2))])


def test_a_sequence_input_takes_a_list_and_compiles_no_input_info(tmp_path):
    model = _model(tmp_path, [helper.make_node("SequenceLength", ["s"], ["n"])], [_seq_info("s")],
                   [_tensor_info("n", [], TensorProto.INT64)])
    with pytest.raises(tp.TripyException, match=r"input 's' is a sequence: it takes a list of tensors, not Tensor"):
        model(_t(_x(2)))
    with pytest.raises(tp.TripyException, match=r"(?s)'s' .* is a sequence, not a tensor"):
        model.input_infos()


def test_a_map_input_is_refused_at_load(tmp_path):
    kind = onnx.TypeProto()
    kind.map_type.key_type = TensorProto.INT64
    kind.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    m = helper.make_value_info("m", kind)
    with pytest.raises(tp.TripyException, match=r"input 'm': a map, which Tripy does not have"):
        _model(tmp_path, [helper.make_node("Identity", ["m"], ["y"])], [m], [_tensor_info("y")])

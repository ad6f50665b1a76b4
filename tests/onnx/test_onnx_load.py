"""tp.onnx.load: models run eagerly and compiled against numpy; named dims shared by inputs; one
error listing every node Tripy cannot run; damaged and hostile files refused with TripyException."""

import os
import random
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, initializers=(), opset=17, name="model.onnx", **kwargs):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = str(tmp_path / name)
    onnx.save(model, path, **kwargs)
    return path


def _info(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _mlp(tmp_path, rng, **save_kwargs):
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal((8,)).astype(np.float32)
    w2 = rng.standard_normal((3, 8)).astype(np.float32)  # Gemm with transB
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "w2"], ["logits"], name="fc2", transB=1, alpha=0.5),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))]
    path = _save(tmp_path, nodes, [_info("x", ["batch", 4])], [_info("y", ["batch", 3])], inits, **save_kwargs)

    def reference(x):
        logits = 0.5 * (np.maximum(x @ w1 + b1, 0) @ w2.T)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return path, reference


def test_mlp_runs_eagerly_and_compiled_against_numpy(tmp_path):
    rng = np.random.default_rng(0)
    path, reference = _mlp(tmp_path, rng)
    model = tp.onnx.load(path, device="cpu")
    assert model.input_names == ["x"] and model.output_names == ["y"] and model.dim_names == ["batch"]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(model(tp.Tensor(x, device="cpu"))), reference(x), rtol=1e-5, atol=1e-6)

    exe = tp.compile(model, kwargs=model.input_infos({"batch": (1, 3, 5)}))
    for batch in (1, 5):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(x=tp.Tensor(x))), reference(x), rtol=1e-5, atol=1e-6)


def test_named_dim_shared_by_two_inputs_is_one_size(tmp_path):
    nodes = [helper.make_node("Mul", ["a", "b"], ["c"])]
    path = _save(tmp_path, nodes, [_info("a", ["n", 2]), _info("b", ["n", 2])], [_info("c", ["n", 2])])
    model = tp.onnx.load(path)
    infos = model.input_infos({"n": (1, 2, 6)})
    assert infos["a"].dimension_names == {0: "n"} and infos["b"].dimension_names == {0: "n"}
    exe = tp.compile(model, kwargs=infos)
    a, b = np.arange(12, dtype=np.float32).reshape(6, 2), np.full((6, 2), 2.0, np.float32)
    np.testing.assert_array_equal(np.asarray(exe(a=tp.Tensor(a), b=tp.Tensor(b))), a * b)
    with pytest.raises(tp.TripyException):
        exe(a=tp.Tensor(a), b=tp.Tensor(b[:3]))
    with pytest.raises(tp.TripyException, match="range for the named dim 'n'"):
        model.input_infos({})


def test_shape_arithmetic_stays_symbolic_under_dynamic_dims(tmp_path):
    # x.reshape(batch, -1) written as exporters write it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Constant", [], ["minus1"], value=numpy_helper.from_array(np.array([-1], np.int64))),
        helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    path = _save(tmp_path, nodes, [_info("x", ["batch", 2, 3])], [_info("y", ["batch", 6])])
    model = tp.onnx.load(path)
    exe = tp.compile(model, kwargs=model.input_infos({"batch": (1, 2, 8)}))
    x = np.arange(7 * 6, dtype=np.float32).reshape(7, 2, 3)
    np.testing.assert_array_equal(np.asarray(exe(x=tp.Tensor(x))), x.reshape(7, 6))


def test_one_error_lists_every_unsupported_node_and_the_file(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="fine"),
        helper.make_node("RandomUniformLike", ["r"], ["u"], name="random"),
        helper.make_node("TopK", ["r", "k"], ["v", "i"], name="unsorted", sorted=0),
        helper.make_node("FusedThing", ["r"], ["f"], name="vendor", domain="com.example"),
        helper.make_node("Relu", ["r"], ["z"], name="odd_attr", bogus=3),
    ]
    k = numpy_helper.from_array(np.array([1], np.int64), "k")
    path = _save(tmp_path, nodes, [_info("x", [4])], [_info("z", [4])], [k], name="several.onnx")
    with pytest.raises(tp.TripyException) as e:
        tp.onnx.load(path)
    text = str(e.value)
    assert "several.onnx" in text and "4 problem(s)" in text
    assert "'random' (RandomUniformLike, opset 17): the op type RandomUniformLike is not supported" in text
    assert "'unsorted' (TopK, opset 17): sorted=0 is not supported" in text
    assert "'vendor' (FusedThing, opset 17): the op domain 'com.example' is not supported" in text
    assert "'odd_attr' (Relu, opset 17): attribute(s) bogus not supported" in text
    assert "'fine'" not in text


def test_unsupported_dtypes_and_opsets_are_listed(tmp_path):
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="abs"), helper.make_node("Add", ["a", "a"], ["y"], name="add")]
    path = _save(tmp_path, nodes, [_info("x", [2], TensorProto.DOUBLE)], [_info("y", [2], TensorProto.DOUBLE)], opset=5)
    with pytest.raises(tp.TripyException) as e:
        tp.onnx.load(path)
    text = str(e.value)
    assert "'add' (Add, opset 5): Tripy's converter covers opsets 7 to 22" in text and "'abs'" not in text
    assert "input 'x': dtype DOUBLE" in text and "output 'y': dtype DOUBLE" in text


def test_external_data_inside_the_folder_is_read(tmp_path):
    rng = np.random.default_rng(1)
    path, reference = _mlp(tmp_path, rng, save_as_external_data=True, all_tensors_to_one_file=True,
                           location="weights.bin", size_threshold=0)
    assert os.path.getsize(tmp_path / "weights.bin") > 0
    x = rng.standard_normal((3, 4)).astype(np.float32)
    out = tp.onnx.load(path, device="cpu")(tp.Tensor(x, device="cpu"))
    np.testing.assert_allclose(np.asarray(out), reference(x), rtol=1e-5, atol=1e-6)


def _tensor(name, dims, raw=None, floats=None):
    """A FLOAT TensorProto written field by field (onnx.helper refuses the inconsistent ones)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    if floats is not None:
        t.float_data.extend(floats)
    return t


def _external_model(tmp_path, location, offset=0, length=16):
    t = _tensor("w", [4])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "g", [_info("x", [4])], [_info("y", [4])], initializer=[t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_external_data_outside_the_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    for location in ("../secret.bin", str(secret)):
        with pytest.raises(tp.TripyException, match="not a path inside the model's folder"):
            tp.onnx.load(_external_model(tmp_path, location))
    os.symlink(secret, tmp_path / "model" / "link.bin")
    with pytest.raises(tp.TripyException, match="lies outside the model's folder"):
        tp.onnx.load(_external_model(tmp_path, "link.bin"))


def test_external_data_past_the_end_or_missing_is_refused(tmp_path):
    path = _external_model(tmp_path, "w.bin", offset=8, length=16)
    (tmp_path / "model" / "w.bin").write_bytes(bytes(16))
    with pytest.raises(tp.TripyException, match="reads past the end of its external data file"):
        tp.onnx.load(path)
    with pytest.raises(tp.TripyException, match="cannot be opened"):
        tp.onnx.load(_external_model(tmp_path, "absent.bin"))


def _raw_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize(
    "case, message",
    [
        ("truncated", "damaged"),
        ("cycle", "cycle"),
        ("dangling", "reads 'ghost', which no graph input, initializer or node defines"),
        ("twice", "already defined"),
        ("short_raw_data", "has 8 bytes of raw_data, but its dims (4,) of FLOAT need 16 bytes"),
        ("typed_count", "holds 3 values, but its dims (4,) have 4 elements"),
        ("huge", "more than 2^40 elements"),
        ("negative_dim", "negative dim"),
        ("undefined_output", "graph output 'nowhere' is not defined"),
        ("empty", "no graph"),
        ("nested_types", "the type of 's' nests more than 16 deep"),
    ],
)
def test_damaged_files_are_tripy_exceptions(tmp_path, case, message):
    x, y = [_info("x", [4])], [_info("y", [4])]
    if case == "truncated":
        data = _raw_model([helper.make_node("Relu", ["x"], ["y"])], x, y)[:-7]
    elif case == "cycle":
        data = _raw_model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                           helper.make_node("Relu", ["a"], ["y"])], x, y)
    elif case == "dangling":
        data = _raw_model([helper.make_node("Add", ["x", "ghost"], ["y"])], x, y)
    elif case == "twice":
        data = _raw_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])], x, y)
    elif case == "short_raw_data":
        w = _tensor("w", [4], raw=bytes(8))
        data = _raw_model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [w])
    elif case == "typed_count":
        w = _tensor("w", [4], floats=[1.0, 2.0, 3.0])
        data = _raw_model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [w])
    elif case == "huge":
        w = _tensor("w", [1 << 30, 1 << 30], raw=bytes(8))
        data = _raw_model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [w])
    elif case == "negative_dim":
        w = _tensor("w", [-4], raw=b"")
        data = _raw_model([helper.make_node("Add", ["x", "w"], ["y"])], x, y, [w])
    elif case == "nested_types":  # a sequence of a sequence of ... (the reader recurses into each)
        kind = helper.make_tensor_type_proto(TensorProto.FLOAT, [4])
        for _ in range(20):
            kind = helper.make_sequence_type_proto(kind)
        data = _raw_model([helper.make_node("Identity", ["s"], ["y"])], [helper.make_value_info("s", kind)], y)
    elif case == "undefined_output":
        data = _raw_model([helper.make_node("Relu", ["x"], ["y"])], x, [_info("nowhere", [4])])
    else:
        data = b""
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(data)
    with pytest.raises(tp.TripyException, match=re.escape(message)) as e:
        tp.onnx.load(str(path))
    assert f"{case}.onnx" in str(e.value)


def test_a_directory_or_missing_file_is_refused(tmp_path):
    with pytest.raises(tp.TripyException, match="not a regular file"):
        tp.onnx.load(str(tmp_path))
    with pytest.raises(tp.TripyException, match="No such file"):
        tp.onnx.load(str(tmp_path / "absent.onnx"))


def test_mutated_files_load_or_raise_tripy_exceptions(tmp_path):
    rng = np.random.default_rng(2)
    path, _ = _mlp(tmp_path, rng)
    data = bytearray(open(path, "rb").read())
    rand = random.Random(3)
    target = tmp_path / "mutated.onnx"
    loaded = refused = 0
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rand.randint(1, 4)):
            mutated[rand.randrange(len(mutated))] = rand.randrange(256)
        target.write_bytes(bytes(mutated[: rand.randint(len(mutated) // 2, len(mutated))] if rand.random() < 0.3 else mutated))
        try:
            tp.onnx.load(str(target))
            loaded += 1
        except tp.TripyException:
            refused += 1
    assert loaded + refused == 300 and refused > 0


def test_the_constants_of_a_call_go_where_the_weights_are_not_to_the_default_device(tmp_path, monkeypatch):
    # Gather makes constants of its own (negative indices wrap by the axis' size); a model loaded on
    # the CPU keeps them there while the default device is elsewhere.
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"])]
    path = _save(tmp_path, nodes, [_info("x", [3, 2]), _info("i", [2], TensorProto.INT64)], [_info("y", [2, 2])])
    model = tp.onnx.load(path, device="cpu")
    monkeypatch.setattr(tp.config, "default_device", "gpu")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    i = np.array([-1, 0], np.int64)
    y = model(tp.Tensor(x, device=tp.device("cpu")), tp.Tensor(i, device=tp.device("cpu")))
    assert model.device == tp.device("cpu") and y.device == tp.device("cpu")
    np.testing.assert_array_equal(np.asarray(y), x[[2, 0]])

"""tripy-compile (python -m tripy.onnx): ONNX files compiled for the ranges given on the command line,
the saved executables loaded by tp.Executable.load and tripy-run and checked against numpy, and every
bad file or shape an error of one message with exit status 1, never a traceback."""

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tripy as tp  # noqa: E402
from tripy.onnx.__main__ import main  # noqa: E402

VENV_COMMAND = os.path.join(sys.prefix, "bin", "tripy-compile")
COMMAND = [VENV_COMMAND] if os.path.exists(VENV_COMMAND) else [sys.executable, "-m", "tripy.onnx"]
RNG = np.random.default_rng(3)
W1 = RNG.standard_normal((6, 16)).astype(np.float32)
B1 = RNG.standard_normal(16).astype(np.float32)
W2 = RNG.standard_normal((16, 4)).astype(np.float32)
CONV_W = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)


def _save(tmp_path, name, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in initializers])
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture
def mlp(tmp_path):
    """softmax(relu(x @ W1 + B1) @ W2 + skip) over a dim named 'batch' shared by x and skip."""
    return _save(
        tmp_path, "mlp",
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
         helper.make_node("Add", ["o", "skip"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6]),
         helper.make_tensor_value_info("skip", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [("w1", W1), ("b1", B1), ("w2", W2)])


def _mlp_reference(x, skip):
    s = np.maximum(x @ W1 + B1, 0) @ W2 + skip
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def conv(tmp_path):
    """A 3x3 convolution (padding 1) with an unnamed batch dim and a ReLU."""
    return _save(
        tmp_path, "conv",
        [helper.make_node("Conv", ["img", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, [None, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4, 5, 5])],
        [("w", CONV_W)])


def _conv_reference(img):
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((img.shape[0], 4, 5, 5), np.float32)
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 5, j:j + 5], CONV_W[:, :, i, j])
    return np.maximum(out, 0)


def _cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_venv_has_tripy_compile_beside_tripy_run():
    if os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".venv")):
        pytest.skip("not the project's .venv")
    assert os.access(VENV_COMMAND, os.X_OK) and os.path.exists(os.path.join(sys.prefix, "bin", "tripy-run"))


def test_help_describes_every_option():
    out = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for option in ("--shapes NAME=MIN,OPT,MAX", "--min-shapes", "--opt-shapes", "--max-shapes", "--minShapes",
                   "--save PATH", "--time N", "--device {cpu,gpu}", "--optimization-level"):
        assert option in out.stdout


def test_named_ranges_compile_save_and_load_against_numpy(mlp, tmp_path, capsys):
    saved = tmp_path / "mlp.tpy"
    code, out, err = _cli(capsys, mlp, "--shapes", "batch=1,4,16", "--save", saved, "--device", "cpu")
    assert code == 0, err
    assert "6 nodes: 2 MatMul, 2 Add, 1 Relu, 1 Softmax" in out
    assert "input x: float32 [1..4..16, 6]" in out and "input skip: float32 [1..4..16, 4]" in out
    assert "compiled for cpu in" in out and "kernels (" in out and f"saved: {saved}" in out
    exe = tp.Executable.load(str(saved))
    info = exe.input_infos["x"]
    assert (info.shape_bounds.min, info.shape_bounds.opt, info.shape_bounds.max) == ((1, 6), (4, 6), (16, 6))
    for batch in (1, 7, 16):
        x = RNG.standard_normal((batch, 6)).astype(np.float32)
        skip = RNG.standard_normal((batch, 4)).astype(np.float32)
        got = np.asarray(exe(x=tp.Tensor(x, device=tp.device("cpu")), skip=tp.Tensor(skip, device=tp.device("cpu"))))
        np.testing.assert_allclose(got, _mlp_reference(x, skip), rtol=1e-4, atol=1e-5)


def test_trtexec_shapes_and_tripy_run_against_numpy(conv, tmp_path, tripy_run):
    saved = tmp_path / "conv.tpy"
    out = subprocess.run([*COMMAND, str(conv), "--minShapes", "img:1x2x5x5", "--opt-shapes", "img:2x2x5x5",
                          "--max-shapes", "img:3x2x5x5", "--save", str(saved), "--device", "cpu", "--time", "3"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "input img: float32 [1..2..3, 2, 5, 5]" in out.stdout
    assert "timing: 3 runs at the opt shapes (img [2, 2, 5, 5])" in out.stdout and "median" in out.stdout
    img = RNG.standard_normal((3, 2, 5, 5)).astype(np.float32)
    np.save(tmp_path / "img.npy", img)
    run = subprocess.run([tripy_run, str(saved), "--input", f"img={tmp_path / 'img.npy'}"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "img: float32 [[1, 2, 3], [2, 2, 2], [5, 5, 5], [5, 5, 5]]" in run.stdout
    shown = run.stdout.rsplit("= [", 1)[1].split("]")[0].replace("...", "").split(",")
    values = np.array([v for v in shown if v.strip()], np.float32)
    np.testing.assert_allclose(values, _conv_reference(img).ravel()[: len(values)], rtol=1e-4, atol=1e-4)
    # and in Python: every value
    exe = tp.Executable.load(str(saved))
    np.testing.assert_allclose(np.asarray(exe(img=tp.Tensor(img, device=tp.device("cpu")))), _conv_reference(img),
                               rtol=1e-4, atol=1e-4)


def test_an_unnamed_dim_takes_its_range_by_input_and_index(conv, capsys):
    code, out, err = _cli(capsys, conv, "--shapes", "img[0]=2", "--device", "cpu")
    assert code == 0, err
    assert "input img: float32 [2, 2, 5, 5]" in out


def test_an_input_without_a_declared_shape_takes_the_given_shapes(tmp_path, capsys):
    path = _save(tmp_path, "noshape", [helper.make_node("Neg", ["x"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    saved = tmp_path / "neg.tpy"
    code, out, err = _cli(capsys, path, "--min-shapes", "x:1x3", "--max-shapes", "x:5x3", "--save", saved,
                          "--device", "cpu")
    assert code == 0, err
    assert "input x: float32 [1..5..5, 3]" in out
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    got = tp.Executable.load(str(saved))(tp.Tensor(x, device=tp.device("cpu")))
    np.testing.assert_array_equal(np.asarray(got), -x)


@pytest.mark.parametrize("args, message", [
    ([], "the named dim 'batch' needs a range: --shapes batch=MIN,OPT,MAX"),
    (["--shapes", "batch=4,2,1"], "the range of the dim 'batch' must satisfy 0 <= min <= opt <= max"),
    (["--shapes", "batch=2", "--shapes", "seq=3"], "--shapes names ['seq'], which name no dim"),
    (["--min-shapes", "x:1x6", "--max-shapes", "x:8x6,skip:4x4"], "is the named dim 'batch', given 1,8,8 already"),
    (["--min-shapes", "x:1x5"], "dim 1 of the input 'x' is 6 in the model"),
    (["--min-shapes", "x:1x6x1"], "the input 'x' has rank 2"),
    (["--min-shapes", "y:1x6"], "the model has no input 'y'"),
    (["--min-shapes", "x:1x6", "--max-shapes", "x:4"], "have different ranks"),
])
def test_shapes_that_do_not_fit_are_one_line_errors(mlp, capsys, args, message):
    code, out, err = _cli(capsys, mlp, "--device", "cpu", *args)
    assert code == 1
    assert err.startswith("tripy-compile: error: ") and message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("args", [["--shapes", "batch"], ["--shapes", "batch=1,2"], ["--min-shapes", "x1x6"],
                                  ["--time", "0"]])
def test_malformed_options_are_usage_errors(mlp, capsys, args):
    with pytest.raises(SystemExit) as e:
        main([str(mlp), *args])
    assert e.value.code == 2
    assert "tripy-compile: error: argument" in capsys.readouterr().err


def test_bad_files_are_errors_without_tracebacks(mlp, tmp_path):
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(mlp.read_bytes()[:60])
    unsupported = _save(tmp_path, "rand", [helper.make_node("RandomUniformLike", ["x"], ["y"], name="rand")],
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    for path, message in ((tmp_path / "missing.onnx", "No such file"), (truncated, "damaged"),
                          (unsupported, "node 'rand' (RandomUniformLike, opset 17): the op type RandomUniformLike "
                                        "is not supported")):
        out = subprocess.run([*COMMAND, str(path), "--device", "cpu"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 1
        assert out.stderr.startswith("tripy-compile: error: ") and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and "-->" not in out.stderr

"""tp.plugin and tp.register_plugin: the built-in CustomGeluPluginDynamic against numpy (float64)
in both precisions, eagerly and compiled with a dynamic batch; a user plugin with a CPU
implementation, symbolic shapes under compile, save/load, and a fresh process where it is not
registered; every bad call names the user's line."""

import ast
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tripy as tp
from tripy.frontend.device import default_device

RNG = np.random.default_rng(11)


def _gelu_tanh(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _dev(x):
    return tp.Tensor(x, device=default_device())


def _gelu(x, type_id):
    return tp.plugin("CustomGeluPluginDynamic", [x], output_info=[(x.rank, x.dtype)], type_id=type_id)


@pytest.mark.parametrize("np_dtype, type_id, tol", [(np.float32, 0, 1e-6), (np.float16, 1, 2e-3)])
def test_builtin_gelu_matches_numpy(np_dtype, type_id, tol, device):
    x = (RNG.standard_normal((3, 5, 7)) * 3).astype(np_dtype)
    out = _gelu(_dev(x), type_id)
    assert out.dtype == (tp.float32 if type_id == 0 else tp.float16) and out.shape == x.shape
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), _gelu_tanh(x), rtol=tol, atol=tol)


def test_builtin_gelu_compiled_with_a_dynamic_batch(device):
    exe = tp.compile(lambda x: _gelu(x * 2.0, 0) + 1.0, args=[tp.InputInfo(((1, 2, 6), 4), dtype=tp.float32)])
    for rows in (1, 6):
        x = RNG.standard_normal((rows, 4)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(_dev(x))), _gelu_tanh(x * 2) + 1, rtol=1e-5, atol=1e-6)


def test_documented_example():
    inp = tp.iota((2, 1, 4))
    out = tp.plugin(name="CustomGeluPluginDynamic", inputs=[inp], output_info=[(inp.rank, inp.dtype)], type_id=0)
    assert tp.allclose(out, tp.gelu(inp), rtol=1e-2)


def _pairsum_rule(inputs, axis):
    x = inputs[0]
    shape = list(x.shape)
    shape[axis] = shape[axis] // 2
    return shape, x.dtype


def _pairsum_cpu(inputs, output, axis):
    x = inputs[0]
    assert not x.flags.writeable
    even = np.take(x, range(0, x.shape[axis] - 1, 2), axis=axis)
    odd = np.take(x, range(1, x.shape[axis], 2), axis=axis)
    output[...] = even + odd


@pytest.fixture(scope="module")
def pairsum():
    # Sums neighbouring pairs along an axis: the output shape depends on a field and a size.
    tp.register_plugin("PairSum", _pairsum_rule, cpu=_pairsum_cpu, namespace="tests", version="2")
    return lambda x, axis: tp.plugin(
        "PairSum", [x], output_info=[(x.rank, x.dtype)], version="2", namespace="tests", axis=axis
    )


def _pairsum_ref(x, axis):
    n = x.shape[axis] // 2 * 2
    x = np.take(x, range(n), axis=axis)
    return np.take(x, range(0, n, 2), axis=axis) + np.take(x, range(1, n, 2), axis=axis)


def test_user_plugin_runs_eagerly(pairsum):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(pairsum(tp.Tensor(x, device="cpu"), 1)), _pairsum_ref(x, 1))
    ints = np.arange(10, dtype=np.int32).reshape(5, 2)
    out = pairsum(tp.Tensor(ints, device="cpu"), 0)
    assert out.dtype == tp.int32
    np.testing.assert_array_equal(np.asarray(out), _pairsum_ref(ints, 0))


def test_user_plugin_output_shape_is_symbolic_under_compile(pairsum, tmp_path):
    from tripy import config

    previous, config.default_device = config.default_device, "cpu"
    try:
        exe = tp.compile(lambda x: pairsum(x, 0) * 10, args=[tp.InputInfo(((2, 4, 9), 3), dtype=tp.float32)])
    finally:
        config.default_device = previous
    for rows in (2, 5, 9):
        x = RNG.standard_normal((rows, 3)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x, device="cpu"))), _pairsum_ref(x, 0) * 10, rtol=1e-6)
    path = str(tmp_path / "pairsum.tpy")
    exe.save(path)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(tp.Executable.load(path)(tp.Tensor(x, device="cpu"))), _pairsum_ref(x, 0) * 10,
                               rtol=1e-6)

    # Like a TensorRT plugin library, the CPU implementation must be registered in the process
    # that runs the executable; registering it there makes the same file run.
    script = textwrap.dedent(f"""
        import numpy as np, tripy as tp
        x = tp.Tensor(np.ones((4, 3), np.float32), device="cpu")
        exe = tp.Executable.load({path!r})
        try:
            exe(x)
        except tp.TripyException as e:
            print("REFUSED:", "is not registered in this process" in str(e))
        tp.register_plugin("PairSum", lambda i, axis: None, namespace="tests", version="2",
                           cpu=lambda inputs, output, axis: output.__setitem__(Ellipsis, inputs[0][0::2] + inputs[0][1::2]))
        print("RAN:", np.asarray(exe(x)).tolist())
    """)
    env = dict(os.environ, TRIPY_DEVICE="cpu")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "REFUSED: True" in result.stdout
    assert "RAN: [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0]]" in result.stdout


def test_output_a_cpu_implementation_leaves_unwritten_is_zero(monkeypatch):
    # An implementation that writes half its output (or nothing) leaves zeros there, never what
    # the memory held before: the compiled program's arena held other kernels' values.
    def first_half(inputs, output):
        output[: output.shape[0] // 2] = inputs[0][: output.shape[0] // 2]

    tp.register_plugin("FirstHalf", lambda inputs: (list(inputs[0].shape), inputs[0].dtype), cpu=first_half,
                       namespace="tests", version="1")
    tp.register_plugin("WritesNothing", lambda inputs: (list(inputs[0].shape), inputs[0].dtype),
                       cpu=lambda inputs, output: None, namespace="tests", version="1")
    call = lambda name, x: tp.plugin(name, [x], output_info=[(1, x.dtype)], version="1", namespace="tests")
    monkeypatch.setattr(tp.config, "default_device", "cpu")
    exe = tp.compile(lambda x: call("FirstHalf", tp.exp(x) * 3.0 + 7.0) + call("WritesNothing", x * 5.0 - 1.0),
                     args=[tp.InputInfo((64,), tp.float32)])
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    want = np.exp(x) * 3.0 + 7.0
    want[32:] = 0.0
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x, device="cpu"))), want, rtol=1e-6)
        eager = call("WritesNothing", tp.Tensor(x, device="cpu") * 3.0)
        np.testing.assert_array_equal(np.asarray(eager), np.zeros(64, np.float32))


def test_cpu_implementation_errors_name_the_call(pairsum):
    def broken(inputs, output, **fields):
        raise ValueError("no luck")

    tp.register_plugin("Broken", lambda inputs: (inputs[0].shape, inputs[0].dtype), cpu=broken)
    with pytest.raises(tp.TripyException) as info:
        tp.plugin("Broken", [tp.Tensor(np.ones(2, np.float32), device="cpu")], [(1, tp.float32)]).eval()
    message = str(info.value)
    assert "plugin '::Broken/1': its CPU implementation raised ValueError: no luck" in message
    assert "test_plugin.py" in message


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x: _gelu(x, 1), "type_id 1 does not fit an input of dtype float32"),
        (lambda x: tp.plugin("Nope", [x], [(2, tp.float32)]), "no plugin is registered as 'Nope'"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [x], [(3, tp.float32)], type_id=0),
         "output_info says the output has rank 3 and dtype float32, but plugin 'CustomGeluPluginDynamic' gives rank 2"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [x], [(2, tp.float32), (2, tp.float32)], type_id=0),
         "Tripy plugins have one output"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [x], [(2, tp.float32)], type_id=object()),
         "Plugin field 'type_id' must be a number"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [x], [(2, tp.float32)], type_id=0, bias=1.0),
         "takes the field type_id only"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [np.ones(2)], [(2, tp.float32)]), "input 0 must be a tripy.Tensor"),
        (lambda x: tp.plugin("CustomGeluPluginDynamic", [x], 3), "output_info must be a list of"),
    ],
)
def test_bad_calls_name_the_users_line(call, match):
    x = tp.ones((2, 3))
    with pytest.raises(tp.TripyException, match=match) as info:
        call(x)
    assert "test_plugin.py" in str(info.value)


def test_register_plugin_validates_its_arguments():
    with pytest.raises(tp.TripyException, match="give a CPU implementation"):
        tp.register_plugin("X", lambda inputs: None)
    with pytest.raises(tp.TripyException, match="cuda_source and cuda_entry go together"):
        tp.register_plugin("X", lambda inputs: None, cuda_source="")
    with pytest.raises(tp.TripyException, match="block_size must be an int in"):
        tp.register_plugin("X", lambda inputs: None, cpu=lambda *a: None, block_size=0)


def test_gpu_only_plugin_is_refused_on_the_cpu():
    # (On a GPU the same plugin compiles: the C++ CudaPlugin tests and the GPU test below.)
    tp.register_plugin("GpuOnly", lambda inputs: (inputs[0].shape, inputs[0].dtype), cuda_entry="k",
                       cuda_source='extern "C" __global__ void k(PluginArgs a) {}')
    with pytest.raises(tp.TripyException, match="has no CPU implementation; run it on a GPU"):
        tp.plugin("GpuOnly", [tp.Tensor(np.ones(2, np.float32), device="cpu")], [(1, tp.float32)]).eval()


_AXPB_SOURCE = """
extern "C" __global__ void axpb(PluginArgs args) {
  const float* x = (const float*)args.inputs[0].data;
  const float* b = (const float*)args.inputs[1].data;
  const i64 cols = args.inputs[1].shape[0];
  i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
  if (i < args.n) ((float*)args.output.data)[i] = x[i] * TRIPY_FIELD_a + b[i % cols];
}
"""


@pytest.mark.skipif(not tp._C.gpu_available(), reason="needs a CUDA GPU")
def test_cuda_plugin_runs_compiled_and_its_saved_code_needs_no_registry(tmp_path):
    tp.register_plugin("Axpb", lambda inputs, a: (inputs[0].shape, inputs[0].dtype), cuda_source=_AXPB_SOURCE,
                       cuda_entry="axpb", block_size=128)
    b = RNG.standard_normal(5).astype(np.float32)
    gpu = tp.device("gpu")
    f = lambda x: tp.plugin("Axpb", [x, tp.Tensor(b, device=gpu)], [(2, tp.float32)], a=1.5)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(f(tp.Tensor(x, device=gpu))), x * 1.5 + b, rtol=1e-5, atol=1e-6)  # the GPU fuses the multiply-add
    exe = tp.compile(f, args=[tp.InputInfo(((1, 3, 700), 5), dtype=tp.float32)])
    for rows in (1, 700):  # 700 x 5 elements: several blocks of 128
        x = RNG.standard_normal((rows, 5)).astype(np.float32)
        for _ in range(3):  # the second call on replays a CUDA graph
            np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x, device=gpu))), x * 1.5 + b, rtol=1e-5, atol=1e-6)  # the GPU fuses the multiply-add
    path = str(tmp_path / "axpb.tpy")
    exe.save(path)
    script = f"""
import numpy as np, tripy as tp
x = np.ones((2, 5), np.float32)
print("OUT:", np.asarray(tp.Executable.load({path!r})(tp.Tensor(x, device=tp.device("gpu")))).tolist())
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = ast.literal_eval(result.stdout.split("OUT:")[1].strip())
    np.testing.assert_allclose(out, np.ones((2, 5)) * 1.5 + b, rtol=1e-6)


_FIRST_HALF_SOURCE = """
extern "C" __global__ void first_half(PluginArgs args) {
  const float* x = (const float*)args.inputs[0].data;
  i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
  if (i < args.n / 2) ((float*)args.output.data)[i] = x[i];
}
"""


@pytest.mark.skipif(not tp._C.gpu_available(), reason="needs a CUDA GPU")
def test_output_a_cuda_kernel_leaves_unwritten_is_zero():
    # As on the CPU: a kernel that writes half its output (or nothing) leaves zeros there, never
    # what the program's arena held before (other kernels' values).
    tp.register_plugin("FirstHalfGpu", lambda inputs: (inputs[0].shape, inputs[0].dtype), cuda_source=_FIRST_HALF_SOURCE,
                       cuda_entry="first_half", namespace="tests", version="1")
    tp.register_plugin("WritesNothingGpu", lambda inputs: (inputs[0].shape, inputs[0].dtype),
                       cuda_source='extern "C" __global__ void nothing(PluginArgs a) {}', cuda_entry="nothing",
                       namespace="tests", version="1")
    call = lambda name, x: tp.plugin(name, [x], output_info=[(1, x.dtype)], version="1", namespace="tests")
    gpu = tp.device("gpu")
    exe = tp.compile(lambda x: call("FirstHalfGpu", tp.exp(x) * 3.0 + 7.0) + call("WritesNothingGpu", x * 5.0 - 1.0),
                     args=[tp.InputInfo((4096,), tp.float32)])
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    want = np.exp(x) * 3.0 + 7.0
    want[2048:] = 0.0
    for _ in range(3):  # the second call on replays a CUDA graph
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x, device=gpu))), want, rtol=1e-5)
    eager = call("WritesNothingGpu", tp.Tensor(x, device=gpu) * 3.0)
    np.testing.assert_array_equal(np.asarray(eager), np.zeros(4096, np.float32))


@pytest.mark.skipif(not hasattr(tp._C, "_plugin_ptx"), reason="built without CUDA headers")
def test_cuda_sources_compile_with_nvrtc():
    # No GPU needed: NVRTC checks the device code users and the docs write.
    tp.register_plugin("AxpbCompileCheck", lambda inputs, a: (inputs[0].shape, inputs[0].dtype),
                       cuda_source=_AXPB_SOURCE, cuda_entry="axpb")
    ptx = tp._C._plugin_ptx("::AxpbCompileCheck/1", '{"a": 2.0}', 90)
    if ptx is None:
        pytest.skip("NVRTC is not available here")
    assert ".entry axpb" in ptx
    gelu16 = tp._C._plugin_ptx("::CustomGeluPluginDynamic/1", '{"type_id": 1}', 90)
    assert ".entry custom_gelu" in gelu16 and "cvt.f32.f16" in gelu16

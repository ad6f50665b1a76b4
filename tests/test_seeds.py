"""The seed documents' code, run as written, printing what the seeds show.

The seeds print ``loc=gpu:0``; on a machine without a GPU tensors live on the CPU, so the expected
text takes its ``loc`` from where tensors actually are.
"""

import math
import os
import re
import time

import numpy as np
import pytest

import tripy as tp


@pytest.fixture(scope="module")
def loc():
    return f"loc={tp.Tensor([0.0]).device}"


def printed(capsys):
    return capsys.readouterr().out


def seed_text(text, loc):
    return text.replace("loc=gpu:0", loc)


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


# ---- 01-introduction.md ----------------------------------------------------------------------


def test_intro_add(capsys, loc):
    # doc: no-print-locals
    a = tp.ones((2, 3))
    b = tp.ones((2, 3))
    c = a + b
    print(c)
    assert tp.equal(c, tp.full((2, 3), 2.0))  # doc: omit

    assert printed(capsys) == seed_text(
        "tensor(\n"
        "    [[2.0000, 2.0000, 2.0000],\n"
        "     [2.0000, 2.0000, 2.0000]],\n"
        "    dtype=float32, loc=gpu:0, shape=(2, 3))\n",
        loc,
    )


class MLP(tp.Module):
    def __init__(self, embd_size, dtype=tp.float32):
        super().__init__()
        self.c_fc = tp.Linear(embd_size, 4 * embd_size, bias=True, dtype=dtype)
        self.c_proj = tp.Linear(4 * embd_size, embd_size, bias=True, dtype=dtype)

    def __call__(self, x):
        x = self.c_fc(x)
        x = tp.gelu(x)
        x = self.c_proj(x)
        return x


def mlp_reference(x, embd_size):
    # The same MLP in numpy, with the placeholder parameters (arange reshaped).
    hidden = 4 * embd_size
    w_fc = np.arange(hidden * embd_size, dtype=np.float64).reshape(hidden, embd_size)
    w_proj = np.arange(embd_size * hidden, dtype=np.float64).reshape(embd_size, hidden)
    h = gelu(x @ w_fc.T + np.arange(hidden))
    return h @ w_proj.T + np.arange(embd_size)


def test_intro_module_usage():
    # doc: no-print-locals mlp
    mlp = MLP(embd_size=2)

    inp = tp.iota(shape=(1, 2), dim=1, dtype=tp.float32)
    out = mlp(inp)

    assert inp.tolist() == [[0.0, 1.0]]
    assert np.allclose(out.tolist(), mlp_reference(np.array([[0.0, 1.0]]), 2), rtol=1e-5)


def test_intro_compile():
    mlp = MLP(embd_size=2)
    inp = tp.iota(shape=(1, 2), dim=1, dtype=tp.float32)

    # doc: no-print-locals
    fast_mlp = tp.compile(
        mlp,
        # We must indicate which parameters are runtime inputs.
        # MLP takes 1 input tensor for which we specify shape and datatype:
        args=[tp.InputInfo(shape=(1, 2), dtype=tp.float32)],
    )

    out = fast_mlp(inp)

    assert isinstance(fast_mlp, tp.Executable)
    assert np.allclose(out.tolist(), mlp(inp).tolist(), rtol=1e-5)


def test_intro_eager_timing(capsys, loc):
    # doc: no-print-locals
    start = time.time()
    a = tp.gelu(tp.ones((2, 8)))
    end = time.time()

    # `a` has not been evaluated yet - this time is not what we want!
    define_time = end - start  # doc: omit
    print(f"Defined `a` in: {(end - start) * 1000:.3f} ms.")

    start = time.time()
    # `a` is used (and thus evaluated) for the first time:
    print(a)
    end = time.time()

    # This includes compilation time, not just execution time!
    print(f"Compiled and evaluated `a` in: {(end - start) * 1000:.3f} ms.")
    # (Which time is larger is not asserted: an earlier test may have compiled the same structure,
    # and the eager cache then makes evaluation as quick as definition on a loaded machine.)
    assert define_time >= 0  # doc: omit

    lines = printed(capsys).splitlines()
    assert re.fullmatch(r"Defined `a` in: \d+\.\d{3} ms\.", lines[0])
    assert re.fullmatch(r"Compiled and evaluated `a` in: \d+\.\d{3} ms\.", lines[-1])
    row = "[" + ", ".join(["0.8413"] * 8) + "]"  # 16 values: small enough to print whole
    assert "\n".join(lines[1:-1]) == seed_text(
        f"tensor(\n    [{row},\n     {row}],\n    dtype=float32, loc=gpu:0, shape=(2, 8))", loc
    )


# ---- 02-compiler.md --------------------------------------------------------------------------


class GEGLU(tp.Module):
    def __init__(self, in_dim, out_dim):
        self.proj = tp.Linear(in_dim, out_dim * 2)
        self.out_dim = out_dim

    def __call__(self, x):
        proj = self.proj(x)
        x, gate = tp.split(proj, 2, proj.rank - 1)
        return x * tp.gelu(gate)


@pytest.fixture
def layer():
    return GEGLU(in_dim=2, out_dim=1)


def test_compiler_static(layer, capsys, loc):
    # GEGLU has one parameter, which needs to be a runtime input:
    inp_info = tp.InputInfo(shape=(1, 2), dtype=tp.float32)
    fast_geglu = tp.compile(layer, args=[inp_info])

    inp = tp.ones((1, 2))
    out = fast_geglu(inp)

    print(repr(inp))
    print(repr(out))
    assert printed(capsys) == seed_text(
        "tensor(\n"
        "    [[1.0000, 1.0000]],\n"
        "    dtype=float32, loc=gpu:0, shape=(1, 2))\n"
        "tensor([[6.0000]], dtype=float32, loc=gpu:0, shape=(1, 1))\n",
        loc,
    )


def test_compiler_dynamic_shapes(layer, capsys, loc):
    inp = tp.ones((1, 2))

    inp_info = tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)
    print(repr(inp_info))
    assert printed(capsys) == "InputInfo(min=[1, 2], opt=[2, 2], max=[4, 2], dtype=float32)\n"

    fast_geglu = tp.compile(layer, args=[inp_info])

    # Use the input created previously, of shape: (1, 2)
    out0 = fast_geglu(inp)

    # Now use an input with a different shape: (2, 2):
    inp1 = tp.Tensor([[1.0, 2.0], [2.0, 3.0]], dtype=tp.float32)
    out1 = fast_geglu(inp1)

    print(repr(out0))
    print(repr(inp1))
    print(repr(out1))
    assert printed(capsys) == seed_text(
        "tensor([[6.0000]], dtype=float32, loc=gpu:0, shape=(1, 1))\n"
        "tensor(\n"
        "    [[1.0000, 2.0000],\n"
        "     [2.0000, 3.0000]],\n"
        "    dtype=float32, loc=gpu:0, shape=(2, 2))\n"
        "tensor(\n"
        "    [[18.0000],\n"
        "     [42.0000]],\n"
        "    dtype=float32, loc=gpu:0, shape=(2, 1))\n",
        loc,
    )


def test_compiler_save_and_load(layer, capsys, loc, tmp_path):
    out_dir = str(tmp_path)
    inp = tp.ones((1, 2))
    fast_geglu = tp.compile(layer, args=[tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)])

    executable_file_path = os.path.join(out_dir, "executable.json")
    fast_geglu.save(executable_file_path)

    loaded_fast_geglu = tp.Executable.load(executable_file_path)

    out = loaded_fast_geglu(inp)

    print(repr(out))
    assert printed(capsys) == seed_text("tensor([[6.0000]], dtype=float32, loc=gpu:0, shape=(1, 1))\n", loc)


# ---- 03-design-decisions.md ------------------------------------------------------------------


def test_no_api_redundancy():
    with pytest.raises(AttributeError) as info:
        tp.Tensor([1, 2, 3]).softmax
    assert str(info.value) == (
        "Module: 'tripy.Tensor' does not have attribute: 'softmax'. Did you mean: 'tripy.softmax'?"
    )


def test_module_attribute_suggestions():
    expected = r"^Module: 'tripy' does not have attribute: 'float64'\. Did you mean: 'tripy\.float32'\?$"
    with pytest.raises(AttributeError, match=expected):
        tp.float64
    with pytest.raises(AttributeError, match=r"Did you mean: 'tripy\.int32'\?$"):
        tp.int16


def add(a, b):
    return a + b


def _source_line(lineno):
    with open(__file__) as f:
        return f.read().splitlines()[lineno - 1]


def _lineno_of(text):
    with open(__file__) as f:
        return next(index + 1 for index, line in enumerate(f.read().splitlines()) if line.strip() == text)


def _carets_under(message, lineno, expression):
    """True when ``message`` shows line ``lineno`` with carets exactly under ``expression``."""
    source = _source_line(lineno)
    code = source.strip()
    indent = len(source) - len(source.lstrip())
    wanted = list(range(source.index(expression), source.index(expression) + len(expression)))
    lines = message.splitlines()
    for index, line in enumerate(lines[:-1]):
        line = line.rstrip()
        # The source may be shown with or without its indentation; map display columns back.
        if not line.endswith(code) or str(lineno) not in line[: len(line) - len(code)]:
            continue
        shift = len(line) - len(code) - indent
        marked = [column - shift for column, char in enumerate(lines[index + 1]) if char == "^"]
        if marked == wanted:
            return True
    return False


def test_error_shows_user_lines_with_carets():
    a = tp.ones((3, 4))
    b = tp.ones((3, 3))
    with pytest.raises(tp.TripyException) as info:
        print(add(a, b))
    message = str(info.value)

    add_line = _lineno_of("return a + b")
    assert f"{__file__}:{add_line} in add()" in message
    assert _carets_under(message, add_line, "a + b"), message
    assert _carets_under(message, _lineno_of("a = tp.ones((3, 4))"), "tp.ones((3, 4))"), message
    assert _carets_under(message, _lineno_of("b = tp.ones((3, 3))"), "tp.ones((3, 3))"), message
    assert re.search(r"broadcast the right operand.*\(3, 4\)", message, re.DOTALL), message


def test_error_with_inputs_made_on_the_calling_line():
    with pytest.raises(tp.TripyException) as info:
        print(add(tp.ones((3, 4)), tp.ones((3, 3))))
    message = str(info.value)

    call_line = _lineno_of("print(add(tp.ones((3, 4)), tp.ones((3, 3))))")
    add_line = _lineno_of("return a + b")
    assert f"{__file__}:{add_line} in add()" in message
    assert f"{__file__}:{call_line} in test_error_with_inputs_made_on_the_calling_line()" in message
    assert _carets_under(message, add_line, "a + b"), message
    # Both inputs come from one line; the carets tell them apart.
    assert _carets_under(message, call_line, "tp.ones((3, 4))"), message
    assert _carets_under(message, call_line, "tp.ones((3, 3))"), message
    assert re.search(r"broadcast the right operand.*\(3, 4\)", message, re.DOTALL), message

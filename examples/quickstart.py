"""A walk through Tripy's basics, on the default device (gpu:0 where a GPU is
present, else cpu): eager tensors, modules, compiling with static and dynamic shapes, saving and
loading executables, the no-redundancy rule and an error pointing at user code.

Run: python examples/quickstart.py
"""

import os
import tempfile
import time

import tripy as tp


def section(title):
    print(f"\n=== {title} ===")


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


class GEGLU(tp.Module):
    def __init__(self, in_dim, out_dim):
        self.proj = tp.Linear(in_dim, out_dim * 2)
        self.out_dim = out_dim

    def __call__(self, x):
        proj = self.proj(x)
        x, gate = tp.split(proj, 2, proj.rank - 1)
        return x * tp.gelu(gate)


def add(a, b):
    return a + b


def eager():
    section("Eager tensors")
    a = tp.ones((2, 3))
    b = tp.ones((2, 3))
    c = a + b
    print(c)
    assert tp.equal(c, tp.full((2, 3), 2.0))


def modules():
    section("Modules")
    mlp = MLP(embd_size=2)
    print(mlp)
    inp = tp.iota(shape=(1, 2), dim=1, dtype=tp.float32)
    out = mlp(inp)
    print("mlp(inp) =", out)

    section("Compiling a module")
    fast_mlp = tp.compile(mlp, args=[tp.InputInfo(shape=(1, 2), dtype=tp.float32)])
    print(fast_mlp)
    print("fast_mlp(inp) =", fast_mlp(inp))


def timing():
    section("Timing in eager mode")
    start = time.time()
    a = tp.gelu(tp.ones((2, 8)))
    end = time.time()
    # `a` has not been evaluated yet - this time is not what we want!
    print(f"Defined `a` in: {(end - start) * 1000:.3f} ms.")

    start = time.time()
    # `a` is used (and thus evaluated) for the first time:
    print(a)
    end = time.time()
    # This includes compilation time, not just execution time!
    print(f"Compiled and evaluated `a` in: {(end - start) * 1000:.3f} ms.")


def compiler(out_dir):
    section("Compiling GEGLU")
    layer = GEGLU(in_dim=2, out_dim=1)
    inp_info = tp.InputInfo(shape=(1, 2), dtype=tp.float32)
    fast_geglu = tp.compile(layer, args=[inp_info])
    inp = tp.ones((1, 2))
    out = fast_geglu(inp)
    print("inp =", repr(inp))
    print("out =", repr(out))

    section("Dynamic shapes")
    inp_info = tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)
    print("inp_info =", repr(inp_info))
    fast_geglu = tp.compile(layer, args=[inp_info])
    out0 = fast_geglu(inp)
    inp1 = tp.Tensor([[1.0, 2.0], [2.0, 3.0]], dtype=tp.float32)
    out1 = fast_geglu(inp1)
    print("out0 =", repr(out0))
    print("inp1 =", repr(inp1))
    print("out1 =", repr(out1))

    section("Saving and loading executables")
    executable_file_path = os.path.join(out_dir, "executable.json")
    fast_geglu.save(executable_file_path)
    loaded_fast_geglu = tp.Executable.load(executable_file_path)
    out = loaded_fast_geglu(inp)
    print(f"saved {os.path.getsize(executable_file_path)} bytes to {executable_file_path}")
    print("out =", repr(out))


def design_decisions():
    section("One way to do each thing")
    try:
        tp.Tensor([1, 2, 3]).softmax
    except AttributeError as err:
        print(f"{type(err).__name__}: {err}")
    print(tp.softmax(tp.Tensor([1.0, 2.0, 3.0]), dim=0))

    section("Errors point at your code")
    a = tp.ones((3, 4))
    b = tp.ones((3, 3))
    try:
        print(add(a, b))
    except tp.TripyException as err:
        print(err)


def main():
    out_dir = tempfile.mkdtemp()
    print(f"Default device: {tp.Tensor([0.0]).device}")
    eager()
    modules()
    timing()
    compiler(out_dir)
    design_decisions()


if __name__ == "__main__":
    main()

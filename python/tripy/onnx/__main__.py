"""tripy-compile (``python -m tripy.onnx``): an ONNX model and the ranges of its dynamic dims in, a
compiled executable out, like ``trtexec --onnx ... --minShapes/--optShapes/--maxShapes --saveEngine``.

Dynamic dims take ranges by name (``--shapes batch=1,4,32``: a dim_param of the model) or per input,
as trtexec does (``--min-shapes x:1x3x224x224`` and ``--opt-shapes``/``--max-shapes``). It prints a
summary (the model's nodes, the executable's kernels, the compile time), saves the executable with
``--save`` (for ``tp.Executable.load`` and ``tripy-run``) and times runs on random inputs with
``--time N``. Errors are printed as one message, never a traceback; the exit status is then 1.
"""

import argparse
import collections
import os
import re
import statistics
import sys
import time

import numpy as np

import tripy as tp
from tripy import _C
from tripy.frontend import dtypes
from tripy.frontend.input_info import InputInfo, NamedDimension
from tripy.onnx.graph import dtype_of
from tripy.onnx.model import load

# The lines of an error's message that show where it was raised ("--> file:line", source, carets):
# from the shell they would point into this module.
_LOCATION = re.compile(r"^\s*(-->|\d*\s*\|)")
_KINDS = ("min", "opt", "max")

DESCRIPTION = """Compiles an ONNX model for the ranges given to its dynamic dims, prints a summary (the model's nodes,
the executable's kernels, the compile time), saves the executable (--save: for tp.Executable.load and
tripy-run) and times it on random inputs (--time)."""
EPILOG = """examples:
  tripy-compile resnet.onnx --shapes batch=1,8,32 --save resnet.tpy
  tripy-compile model.onnx --min-shapes x:1x3x224x224 --opt-shapes x:8x3x224x224 \\
      --max-shapes x:32x3x224x224 --save model.tpy --time 20
  tripy-run resnet.tpy --zeros
exit status: 0 on success, 1 with the error on stderr otherwise (2 for a malformed option)."""


class UsageError(Exception):
    """A shape range or option that does not fit the model: printed as the error, exit status 1."""


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _named_range(text):
    """``NAME=MIN,OPT,MAX`` or ``NAME=N`` -> (name, (min, opt, max))."""
    name, eq, values = text.rpartition("=")
    try:
        bounds = [int(v) for v in values.split(",")]
    except ValueError:
        bounds = []
    if not eq or not name or len(bounds) not in (1, 3):
        raise argparse.ArgumentTypeError(f"expected NAME=MIN,OPT,MAX or NAME=SIZE, got {text!r}")
    return name, tuple(bounds * 3 if len(bounds) == 1 else bounds)


def _input_shapes(text):
    """``x:1x3x224x224,y:1x5`` -> {"x": [1, 3, 224, 224], "y": [1, 5]} (a scalar input: ``y:``)."""
    shapes = {}
    for item in text.split(","):
        name, colon, dims = item.rpartition(":")
        try:
            shape = [int(d) for d in dims.split("x")] if dims else []
        except ValueError:
            shape = None
        if not colon or not name or shape is None:
            raise argparse.ArgumentTypeError(f"expected INPUT:D0xD1x...[,INPUT:...], got {item!r}")
        shapes[name] = shape
    return shapes


def _parser():
    parser = argparse.ArgumentParser(
        prog="tripy-compile", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("--shapes", type=_named_range, action="append", default=[], metavar="NAME=MIN,OPT,MAX",
                        help="the range of a named dim (an ONNX dim_param), or NAME=SIZE for one size; repeat once "
                             "per name; a dim the model leaves unnamed is named INPUT[i] (input name, dim index)")
    for kind in _KINDS:
        parser.add_argument(f"--{kind}-shapes", f"--{kind}Shapes", dest=f"{kind}_shapes", type=_input_shapes,
                            action="append", default=[], metavar="INPUT:D0xD1x...",
                            help=f"per input, as trtexec's --{kind}Shapes: the {kind} shape of each input named "
                                 "(comma-separated)")
    parser.add_argument("--save", metavar="PATH", help="write the executable there (for tp.Executable.load and tripy-run)")
    parser.add_argument("--time", type=_positive_int, metavar="N", help="time N runs on random inputs of the opt shapes")
    parser.add_argument("--device", choices=["cpu", "gpu"], help="where it runs (default: the GPU where present)")
    parser.add_argument("--optimization-level", type=int, choices=range(6), default=3, metavar="{0..5}",
                        help="tp.compile's optimization_level (default 3)")
    return parser


def _per_input_ranges(args):
    """{input: (min shape, opt shape, max shape)}, each shape missing from the options taken from the
    nearest one given (opt from max, else min; min and max from opt, else the other)."""
    given = {kind: {} for kind in _KINDS}
    for kind in _KINDS:
        for shapes in getattr(args, f"{kind}_shapes"):
            given[kind].update(shapes)
    ranges = {}
    for name in dict.fromkeys(n for kind in _KINDS for n in given[kind]):
        lo, opt, hi = (given[kind].get(name) for kind in _KINDS)
        opt = opt if opt is not None else (hi if hi is not None else lo)
        lo = lo if lo is not None else opt
        hi = hi if hi is not None else opt
        if not len(lo) == len(opt) == len(hi):
            raise UsageError(f"the min, opt and max shapes of the input {name!r} have different ranks "
                             f"({len(lo)}, {len(opt)}, {len(hi)}).")
        ranges[name] = (lo, opt, hi)
    return ranges


def _check_range(bounds, what):
    lo, opt, hi = bounds
    if lo < 0 or not lo <= opt <= hi:
        raise UsageError(f"the range of {what} must satisfy 0 <= min <= opt <= max, but it is {lo},{opt},{hi}.")


def input_infos(model, named, per_input):
    """The ``tp.InputInfo`` of each of ``model``'s inputs (by parameter name) from the named ranges
    (name -> (min, opt, max)) and the per-input shapes (input -> (min, opt, max) shapes), checked
    against the model's declared shapes; raises UsageError naming what does not fit."""
    graph = model._graph
    params = dict(zip(model.input_names, model._parameters))
    by_param = {p: n for n, p in params.items()}
    dims = dict(named)
    for key, bounds in named.items():
        _check_range(bounds, f"the dim {key!r}")
    unknown = [name for name in per_input if name not in params and name not in by_param]
    if unknown:
        raise UsageError(f"the model has no input {unknown[0]!r} (its inputs: {model.input_names}).")
    per_input = {by_param.get(name, name): ranges for name, ranges in per_input.items()}
    direct = {}
    for name, elem, shape in graph.inputs:
        if name not in per_input:
            continue
        lo, opt, hi = per_input[name]
        if shape is not None and len(shape) != len(lo):
            raise UsageError(f"the input {name!r} has rank {len(shape)} (shape {_shape_text(shape)}), but the "
                             f"shapes given for it have rank {len(lo)}.")
        entries = []
        for i, bounds in enumerate(zip(lo, opt, hi)):
            _check_range(bounds, f"dim {i} of the input {name!r}")
            declared = None if shape is None else shape[i]
            if isinstance(declared, int):
                if bounds != (declared,) * 3:
                    raise UsageError(f"dim {i} of the input {name!r} is {declared} in the model, but the shapes "
                                     f"given for it make it {','.join(map(str, bounds))}.")
                continue
            if declared is None and shape is None:
                entries.append(bounds[0] if bounds[0] == bounds[2] else bounds)
                continue
            key = declared if isinstance(declared, str) else f"{name}[{i}]"
            if key in dims and tuple(dims[key]) != bounds:
                raise UsageError(f"dim {i} of the input {name!r} is the named dim {key!r}, given "
                                 f"{','.join(map(str, dims[key]))} already, but here {','.join(map(str, bounds))}.")
            dims[key] = bounds
        if shape is None:
            direct[name] = entries
    used = set()
    infos = {}
    for name, elem, shape in graph.inputs:
        if name in graph.containers:
            raise UsageError(f"the input {name!r} is a {graph.containers[name]}, not a tensor; tripy-compile "
                             "compiles models of tensor inputs.")
        dtype = dtype_of(elem)
        if dtype is None:
            raise UsageError(f"the input {name!r} has the dtype {_C.onnx_elem_type_name(elem)}, which Tripy does not have.")
        if shape is None:
            if name not in direct:
                raise UsageError(f"the input {name!r} has no declared shape: give its shapes with --min-shapes, "
                                 f"--opt-shapes and --max-shapes ({name}:D0xD1x...).")
            infos[params[name]] = InputInfo(tuple(direct[name]), dtype=dtype)
            continue
        entries = []
        for i, d in enumerate(shape):
            if isinstance(d, int):
                entries.append(d)
                continue
            key = d if isinstance(d, str) else f"{name}[{i}]"
            if key not in dims:
                what = f"the named dim {key!r}" if isinstance(d, str) else f"dim {i} of the input {name!r} (unnamed)"
                raise UsageError(f"{what} needs a range: --shapes {key}=MIN,OPT,MAX (or the input's shapes with "
                                 "--min-shapes/--opt-shapes/--max-shapes).")
            used.add(key)
            bounds = tuple(dims[key])
            entries.append(NamedDimension(key, *bounds) if isinstance(d, str) else bounds)
        infos[params[name]] = InputInfo(tuple(entries), dtype=dtype)
    extra = sorted(set(named) - used)
    if extra:
        raise UsageError(f"--shapes names {extra}, which name no dim of the model's inputs "
                         f"(its named dims: {model.dim_names}).")
    return infos


def _shape_text(shape):
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _range_text(info):
    bounds = info.shape_bounds
    parts = []
    for lo, opt, hi in zip(bounds.min, bounds.opt, bounds.max):
        parts.append(str(lo) if lo == hi else f"{lo}..{opt}..{hi}")
    return "[" + ", ".join(parts) + "]"


def random_inputs(infos, device, seed=0):
    """Inputs of the opt shapes: floats from a standard normal, integers and bools zero (a safe
    index for any Gather)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, info in infos.items():
        shape = tuple(info.shape_bounds.opt)
        if issubclass(info.dtype, dtypes.floating):
            t = tp.Tensor(rng.standard_normal(shape).astype(np.float32), device=device)
            out[name] = t if info.dtype == tp.float32 else tp.cast(t, info.dtype)
        else:
            np_dtype = {tp.bool: np.bool_, tp.int8: np.int8, tp.int32: np.int32, tp.int64: np.int64}.get(info.dtype)
            if np_dtype is None:
                raise UsageError(f"--time cannot make random inputs of {info.dtype} (the input {name!r}).")
            out[name] = tp.Tensor(np.zeros(shape, np_dtype), device=device)
    return out


def _plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def _counts(items):
    return ", ".join(f"{n} {k}" for k, n in collections.Counter(items).most_common())


def _size_text(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def compile_model(args, out=None):
    """Loads, compiles, saves and times as the parsed options ask, printing the summary to ``out``
    (standard output when None)."""
    out = out or sys.stdout
    device = args.device or ("gpu" if _C.gpu_available() else "cpu")
    if device == "gpu" and not _C.gpu_available():
        raise UsageError("--device gpu: no CUDA GPU is available here.")
    named = dict(args.shapes)
    per_input = _per_input_ranges(args)
    model = load(args.model, device=device)
    ops = [n.op_type for n in model._graph.nodes]
    print(f"model: {args.model} (opset {model.opset}, {_plural(len(ops), 'node')}: {_counts(ops)})", file=out)
    infos = input_infos(model, named, per_input)
    for (name, param), info in zip(zip(model.input_names, model._parameters), infos.values()):
        shown = name if name == param else f"{name} (argument {param})"
        print(f"  input {shown}: {info.dtype} {_range_text(info)}", file=out)
    print(f"  outputs: {', '.join(model.output_names)}", file=out)

    start = time.perf_counter()
    exe = tp.compile(model, optimization_level=args.optimization_level, kwargs=infos)
    seconds = time.perf_counter() - start
    kinds = [kind for kind, _, _ in exe._impl.kernels]
    print(f"compiled for {device} in {seconds:.3f} s (optimization level {args.optimization_level}): "
          f"{_plural(len(kinds), 'kernel')} ({_counts(kinds)})", file=out)
    if args.save:
        exe.save(args.save)
        print(f"saved: {args.save} ({_size_text(os.path.getsize(args.save))})", file=out)
    if args.time:
        inputs = random_inputs(infos, device)
        sync = exe.stream.synchronize if device == "gpu" else (lambda: None)
        for _ in range(2):
            exe(**inputs)
        sync()
        samples = []
        for _ in range(args.time):
            t0 = time.perf_counter()
            exe(**inputs)
            sync()
            samples.append((time.perf_counter() - t0) * 1e3)
        shapes = ", ".join(f"{n} {list(i.shape_bounds.opt)}" for n, i in infos.items())
        print(f"timing: {_plural(args.time, 'run')} at the opt shapes ({shapes}) on random inputs: median "
              f"{statistics.median(samples):.3f} ms, min {min(samples):.3f} ms, mean {statistics.mean(samples):.3f} ms",
              file=out)
    return exe


def main(argv=None):
    """The command: parses ``argv`` (the process's arguments when None), compiles, returns the exit status."""
    args = _parser().parse_args(argv)
    previous_device = tp.config.default_device
    try:
        if args.device:
            tp.config.default_device = args.device
        compile_model(args)
    except UsageError as e:
        print(f"tripy-compile: error: {e}", file=sys.stderr)
        return 1
    except tp.TripyException as e:
        lines = [line for line in str(e).splitlines() if not _LOCATION.match(line)]
        print("tripy-compile: error: " + "\n".join(lines).strip(), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"tripy-compile: error: {e}", file=sys.stderr)
        return 1
    finally:
        tp.config.default_device = previous_device
    return 0


if __name__ == "__main__":
    sys.exit(main())

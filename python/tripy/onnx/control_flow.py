"""ONNX's If, Loop, Scan and SequenceMap, whose subgraphs run while the graph is built: a Tripy
program is one dataflow graph, so a branch is chosen, or a loop unrolled, before it runs.

- If takes the branch its condition names where the condition is known while the graph is built
  (a constant, a shape value, or, eagerly, an input's value). Otherwise, under ``tp.compile``, it
  runs both branches and picks with ``tp.where``, which needs each output pair to agree: tensors
  of one dtype and one shape (static sizes equal), or sequences of such tensors of one length, or
  both empty optionals; other pairs are refused, naming the output.
- Loop unrolls its body while its trip count and its condition are known (read after each step);
  a count or a condition that depends on a runtime input's values under ``tp.compile`` is refused,
  and so is a loop past ``MAX_STEPS`` steps. Scan outputs are the steps' values stacked.
- Scan unrolls over its scan inputs' static length along their axes (forward or reverse).
- SequenceMap runs its body once per position of its sequences.

A subgraph reads the values of the graphs around it (``Context.run_subgraph``). Their rows join
the converter table in ``converters.py``; ``problems_of`` checks the subgraphs as it checks the
graph."""

from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.shape_ops import concatenate, gather, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.onnx.graph import Dims, Sequence, _axis, _dims, _flat, _static, as_tensor, dtype_of
from tripy.onnx.rows import Row

# The most steps a Loop is unrolled to: each step adds its body's ops to the program.
MAX_STEPS = 10000


def _known(value):
    """The one number ``value`` holds if it can be read while the graph is built, else None."""
    if isinstance(value, Dims):
        entries = list(value)
    elif isinstance(value, Tensor):
        try:
            entries = _flat(value.tolist())
        except TripyException:
            return None
    else:
        return None
    return entries[0] if len(entries) == 1 and isinstance(entries[0], (bool, int, float)) else None


def _read(value, n, what):
    """The number ``value`` holds, which ``n`` needs while the graph is built."""
    if isinstance(value, Tensor) and value.rank > 1 or isinstance(value, (Sequence, type(None))):
        _raise_here(f"ONNX {n.describe()}: {what} must be a one-element tensor.")
    number = _known(value)
    if number is None:
        _raise_here(f"ONNX {n.describe()}: {what} depends on a runtime input's values (or shape), which Tripy only "
                    "knows when the executable runs; Tripy unrolls loops and picks branches while the graph is built.")
    return number


# ---- If -------------------------------------------------------------------------------------------


def _same_shape(a, b):
    """Whether two tensors have one shape for certain: equal ranks and equal static sizes (a
    dynamic size only against the same size object)."""
    return a.rank == b.rank and all(p == q if isinstance(p, int) and isinstance(q, int) else p is q
                                    for p, q in zip(a.shape, b.shape))


def _select(cond, a, b, n, out):
    """where(cond, a, b) over one output pair of the branches, or a refusal naming the output."""
    if a is None and b is None:
        return None
    if isinstance(a, Sequence) and isinstance(b, Sequence) and len(a) == len(b):
        return Sequence(_select(cond, p, q, n, out) for p, q in zip(a, b))
    if a is not None and b is not None and not isinstance(a, Sequence) and not isinstance(b, Sequence):
        a, b = as_tensor(a), as_tensor(b)
        if a.dtype == b.dtype and _same_shape(a, b):
            return where(cond, a, b)
    _raise_here(f"ONNX {n.describe()}: its condition depends on a runtime input's values, and its branches give "
                f"output {out!r} different dtypes, shapes or kinds ({_kind(a)} and {_kind(b)}), so tp.where cannot "
                "pick between them.")


def _kind(v):
    if v is None:
        return "an empty optional"
    if isinstance(v, Sequence):
        return f"a sequence of {len(v)}"
    v = as_tensor(v)
    return f"{v.dtype.name}{_sizes(v.shape)}"


def _if(ctx, n):
    cond_value = ctx.get(n.inputs[0])
    then_graph, else_graph = n.attr("then_branch"), n.attr("else_branch")
    taken = _known(cond_value)
    if taken is not None:
        return ctx.run_subgraph(then_graph if taken else else_graph, [])
    cond = as_tensor(cond_value)
    if cond.rank:
        cond = cond[(0,) * cond.rank]
    outs_then, outs_else = ctx.run_subgraph(then_graph, []), ctx.run_subgraph(else_graph, [])
    return [_select(cond, a, b, n, out) for a, b, out in zip(outs_then, outs_else, n.outputs)]


# ---- Loop -----------------------------------------------------------------------------------------


def _stack(steps, axis=0):
    parts = [unsqueeze(as_tensor(s), axis) for s in steps]
    return concatenate(parts, axis) if len(parts) > 1 else parts[0]


def _empty_scan_output(body, index, n):
    """A scan output of a loop that ran no step: [0, ...] from the body's declared output."""
    name, elem, dims = body.outputs[index]
    if dtype_of(elem) is None or dims is None or not _static(dims):
        _raise_here(f"ONNX {n.describe()}: the loop ran no step, and the body's output {name!r} declares no static "
                    "shape and dtype for the empty scan output.")
    return full([0] + list(dims), 0, dtype_of(elem))


def _loop(ctx, n):
    body = n.attr("body")
    count = None if n.input(0) is None else _read(ctx.get(n.inputs[0]), n, "the trip count")
    cond = True if n.input(1) is None else _read(ctx.get(n.inputs[1]), n, "the condition")
    carried = [ctx.get(name) for name in n.inputs[2:]]
    scans = [[] for _ in range(len(body.outputs) - 1 - len(carried))]
    step = 0
    while (count is None or step < count) and cond:
        if step == MAX_STEPS:
            _raise_here(f"ONNX {n.describe()}: the loop runs past {MAX_STEPS} steps; Tripy unrolls a loop into the "
                        "program, step by step.")
        outs = ctx.run_subgraph(body, [_dims([step], scalar=True), _dims([bool(cond)], scalar=True)] + carried)
        cond = _read(outs[0], n, "the condition its body gives")
        carried = outs[1:1 + len(carried)]
        for steps, value in zip(scans, outs[1 + len(carried):]):
            steps.append(value)
        step += 1
    finals = [_stack(s) if s else _empty_scan_output(body, 1 + len(carried) + i, n) for i, s in enumerate(scans)]
    return tuple(carried + finals)


# ---- Scan -----------------------------------------------------------------------------------------


def _sizes(sizes):
    return "[" + ", ".join(str(s) if isinstance(s, int) else "dynamic" for s in sizes) + "]"


def _scan_steps(ctx, n, states, xs, in_axes, in_reverse, out_axes, out_reverse):
    """Scan's steps over tensors ``xs`` sliced along ``in_axes``: the final states and the stacked
    scan outputs."""
    body = n.attr("body")
    lengths = [x.shape[a] for x, a in zip(xs, in_axes)]
    if not all(isinstance(size, int) for size in lengths) or len(set(lengths)) != 1:
        _raise_here(f"ONNX {n.describe()}: Scan needs its scan inputs' lengths static and equal, but they are "
                    f"{_sizes(lengths)}.")
    length = lengths[0]
    if length == 0:
        _raise_here(f"ONNX {n.describe()}: Scan over sequences of length 0 is not supported.")
    scans = [[] for _ in range(len(body.outputs) - len(states))]
    for t in range(length):
        slices = [gather(x, a, Tensor(length - 1 - t if rev else t, dtype=dtypes.int64))
                  for x, a, rev in zip(xs, in_axes, in_reverse)]
        outs = ctx.run_subgraph(body, states + slices)
        states = outs[:len(states)]
        for steps, value in zip(scans, outs[len(states):]):
            steps.append(value)
    stacked = []
    for steps, axis, rev in zip(scans, out_axes, out_reverse):
        steps = steps[::-1] if rev else steps
        stacked.append(_stack(steps, _axis(axis, as_tensor(steps[0]).rank + 1)))
    return [as_tensor(s) for s in states], stacked


def _scan(ctx, n):
    body = n.attr("body")
    m = n.attr("num_scan_inputs")
    first = 1 if n.opset < 9 else 0  # opset 8: sequence_lens, then a batch dim on every input
    values = [ctx.tensor(name) for name in n.inputs[first:]]
    states, xs = values[:len(values) - m], values[len(values) - m:]
    k = len(body.outputs) - len(states)
    if n.opset < 9:
        in_reverse = list(n.attr("directions", [0] * m))
        batch = [v.shape[0] for v in values]
        if not all(isinstance(size, int) for size in batch) or len(set(batch)) != 1:
            _raise_here(f"ONNX {n.describe()}: Scan (opset 8) needs one static batch size, not "
                        f"{_sizes(batch)}.")
        results = []
        for b in range(batch[0]):
            pick = lambda v: gather(v, 0, Tensor(b, dtype=dtypes.int64))
            results.append(_scan_steps(ctx, n, [pick(s) for s in states], [pick(x) for x in xs], [0] * m, in_reverse,
                                       [0] * k, [0] * k))
        finals = [_stack([r[0][i] for r in results]) for i in range(len(states))]
        return tuple(finals + [_stack([r[1][i] for r in results]) for i in range(k)])
    in_axes = [_axis(a, x.rank) for a, x in zip(n.attr("scan_input_axes", [0] * m), xs)]
    finals, stacked = _scan_steps(ctx, n, states, xs, in_axes, list(n.attr("scan_input_directions", [0] * m)),
                                  list(n.attr("scan_output_axes", [0] * k)), list(n.attr("scan_output_directions", [0] * k)))
    return tuple(finals + stacked)


# ---- SequenceMap ----------------------------------------------------------------------------------


def _sequence_map(ctx, n):
    body = n.attr("body")
    inputs = [ctx.get(name) for name in n.inputs]
    lengths = {len(v) for v in inputs if isinstance(v, Sequence)}
    if len(lengths) != 1:
        _raise_here(f"ONNX {n.describe()}: its sequences must have one length, not {sorted(lengths)}.")
    outs = [Sequence() for _ in body.outputs]
    for i in range(lengths.pop()):
        step = ctx.run_subgraph(body, [v[i] if isinstance(v, Sequence) else v for v in inputs])
        for seq, value in zip(outs, step):
            seq.append(value)
    return tuple(outs)


def _scan8_sequence_lens(n):
    if n.opset < 9 and n.input(0) is not None:
        return "sequence_lens is not supported (every batch entry must scan the whole length)"
    return None


ROWS = {
    "If": Row(_if, ("then_branch", "else_branch")),
    "Loop": Row(_loop, ("body",)),
    "Scan": Row(_scan, ("body", "num_scan_inputs", "directions", "scan_input_axes", "scan_input_directions",
                        "scan_output_axes", "scan_output_directions"), first=8, check=_scan8_sequence_lens),
    "SequenceMap": Row(_sequence_map, ("body",), first=17),
}

"""ONNX's RNN, GRU and LSTM as Tripy ops, unrolled over a static sequence length: the input
projection of every step in one matrix product, then per step the recurrent product and the gates
(ONNX's gate orders: LSTM i, o, f, c; GRU z, r, h), forward, reverse or both. ``sequence_lens``
masks the steps past each batch entry's length (forward only). Their rows join the converter table
in ``converters.py``."""

from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.creation import full
from tripy.frontend.ops.elementwise import exp, log, maximum, minimum, relu, sigmoid, tanh, where
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import concatenate, permute, split, unsqueeze
from tripy.onnx.graph import _as_dtype_of
from tripy.onnx.rows import Row, attr_is


def _hard_sigmoid(x, a, b):
    return minimum(maximum(x * a + b, _as_dtype_of(0.0, x)), _as_dtype_of(1.0, x))


# name -> (function of x, alpha, beta; default alpha; default beta); ONNX's activation list
_ACTIVATIONS = {
    "sigmoid": (lambda x, a, b: sigmoid(x), None, None),
    "tanh": (lambda x, a, b: tanh(x), None, None),
    "relu": (lambda x, a, b: relu(x), None, None),
    "hardsigmoid": (_hard_sigmoid, 0.2, 0.5),
    "leakyrelu": (lambda x, a, b: where(x < 0, x * a, x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: where(x > a, x, _as_dtype_of(0.0, x)), 1.0, None),
    "scaledtanh": (lambda x, a, b: tanh(x * b) * a, 1.0, 1.0),
    "affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "elu": (lambda x, a, b: where(x < 0, (exp(x) - 1.0) * a, x), 1.0, None),
    "softsign": (lambda x, a, b: x / (abs(x) + 1.0), None, None),
    "softplus": (lambda x, a, b: log(exp(x) + 1.0), None, None),
}
_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activations(n, directions):
    """One list of activation functions per direction, their alpha and beta read in order."""
    names = n.attr("activations") or _DEFAULTS[n.op_type] * directions
    names = [v.decode() if isinstance(v, bytes) else v for v in names]
    alphas, betas = list(n.attr("activation_alpha", [])), list(n.attr("activation_beta", []))
    fns = []
    for name in names:
        fn, a, b = _ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if a is not None and alphas else a
        b = betas.pop(0) if b is not None and betas else b
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(_DEFAULTS[n.op_type])
    return [fns[d * per:(d + 1) * per] for d in range(directions)]


def _cell(kind, n, f, x_proj, h, c, r, rb, p, clip):
    """One step: the new (h, c) from the step's input projection (bias included) and the state."""
    def clipped(t):
        return t if clip is None else minimum(maximum(t, _as_dtype_of(-clip, t)), _as_dtype_of(clip, t))

    if kind == "RNN":
        return f[0](clipped(x_proj + matmul(h, r) + rb)), None
    if kind == "GRU":
        xz, xr, xh = split(x_proj, 3, 1)
        rz, rr, rh = split(r, 3, 1)
        bz, br, bh = split(rb, 3, 0)
        z = f[0](clipped(xz + matmul(h, rz) + bz))
        reset = f[0](clipped(xr + matmul(h, rr) + br))
        if n.attr("linear_before_reset", 0):
            candidate = f[1](clipped(xh + reset * (matmul(h, rh) + bh)))
        else:
            candidate = f[1](clipped(xh + matmul(reset * h, rh) + bh))
        return (1.0 - z) * candidate + z * h, None
    gates = x_proj + matmul(h, r) + rb
    gi, go, gf, gc = split(gates, 4, 1)
    pi, po, pf = (None, None, None) if p is None else split(p, 3, 0)
    i = f[0](clipped(gi if pi is None else gi + pi * c))
    forget = f[0](clipped(gf if pf is None else gf + pf * c))
    if n.attr("input_forget", 0):
        forget = 1.0 - i
    c = forget * c + i * f[1](clipped(gc))
    o = f[0](clipped(go if po is None else go + po * c))
    return o * f[2](c), c


def _recurrent(ctx, n):
    kind = n.op_type
    x, w, r = (ctx.tensor(i) for i in n.inputs[:3])
    b, lens, h0 = ctx.opt_tensor(n, 3), ctx.opt_tensor(n, 4), ctx.opt_tensor(n, 5)
    c0 = ctx.opt_tensor(n, 6) if kind == "LSTM" else None
    peep = ctx.opt_tensor(n, 7) if kind == "LSTM" else None
    batchwise = n.attr("layout", 0) == 1
    if batchwise:  # [batch, seq, ...] -> [seq, batch, ...]; states [batch, dirs, hidden] -> [dirs, batch, hidden]
        x = permute(x, [1, 0, 2])
        h0, c0 = (None if t is None else permute(t, [1, 0, 2]) for t in (h0, c0))
    steps, batch = x.shape[0], x.shape[1]
    if not isinstance(steps, int):
        _raise_here(f"ONNX {n.describe()}: {kind} is unrolled over its steps, which needs a static sequence length, "
                    f"but it is dynamic.")
    hidden = n.attr("hidden_size") or r.shape[-1]
    direction = n.attr("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    if lens is not None and direction != "forward":
        _raise_here(f"ONNX {n.describe()}: sequence_lens is supported with direction='forward' only.")
    fns = _activations(n, directions)
    gates = _GATES[kind]
    clip = n.attr("clip")
    ys, hs, cs = [], [], []
    for d in range(directions):
        wd, rd = permute(w[d], [1, 0]), permute(r[d], [1, 0])  # [input, G*hidden], [hidden, G*hidden]
        if b is not None:
            wb, rb = split(b[d], 2, 0)
        else:
            wb = rb = full([gates * hidden], 0.0, x.dtype)
        projected = matmul(x, wd) + wb  # [seq, batch, G*hidden]; the recurrent bias is the cell's
        h = h0[d] if h0 is not None else full([batch, hidden], 0.0, x.dtype)
        c = c0[d] if c0 is not None else full([batch, hidden], 0.0, x.dtype)
        p = peep[d] if peep is not None else None
        order = range(steps) if d == 0 and direction != "reverse" else range(steps - 1, -1, -1)
        outs = [None] * steps
        for t in order:
            new_h, new_c = _cell(kind, n, fns[d], projected[t], h, c, rd, rb, p, clip)
            if lens is not None:
                valid = unsqueeze(cast(lens, dtypes.int64) > t, 1)
                outs[t] = where(valid, new_h, _as_dtype_of(0.0, new_h))
                h = where(valid, new_h, h)
                c = where(valid, new_c, c) if new_c is not None else c
            else:
                outs[t], h, c = new_h, new_h, (new_c if new_c is not None else c)
        ys.append(concatenate([unsqueeze(o, 0) for o in outs], 0))  # [seq, batch, hidden]
        hs.append(unsqueeze(h, 0))
        cs.append(unsqueeze(c, 0))
    y = concatenate([unsqueeze(v, 1) for v in ys], 1)  # [seq, dirs, batch, hidden]
    y_h, y_c = concatenate(hs, 0), concatenate(cs, 0)
    if batchwise:
        y = permute(y, [2, 0, 1, 3])
        y_h, y_c = permute(y_h, [1, 0, 2]), permute(y_c, [1, 0, 2])
    return [y, y_h, y_c][: len(n.outputs)]


def _known_activations(n):
    for name in n.attr("activations") or []:
        name = name.decode() if isinstance(name, bytes) else name
        if name.lower() not in _ACTIVATIONS:
            return f"the activation {name!r} is not supported (supported: {', '.join(sorted(_ACTIVATIONS))})"
    return None


_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")
_DIRECTIONS = attr_is("direction", ("forward", "reverse", "bidirectional"), "forward")


def _checks(n):
    return _DIRECTIONS(n) or _known_activations(n)


ROWS = {
    "GRU": Row(_recurrent, _ATTRS + ("linear_before_reset",), check=_checks),
    "LSTM": Row(_recurrent, _ATTRS + ("input_forget",), check=_checks),
    "RNN": Row(_recurrent, _ATTRS, check=_checks),
}

"""Exporters' spellings of ops Tripy has as one primitive, found in a loaded graph and replaced by
it: ``torch.onnx.export`` writes GELU as ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (five nodes) and
SiLU as ``x * sigmoid(x)``; as ``tp.gelu`` and ``tp.silu`` they are what GEMM and convolution
epilogues take. A chain is replaced only where its inner values feed nothing else (and are no
graph output) and its constants are the expected scalars; the graph was checked whole before this
runs, so a replaced node never hides a problem."""

import math

from tripy.exception import TripyException
from tripy.frontend.ops.elementwise import gelu, silu

_SQRT2 = math.sqrt(2.0)


class FusedNode:
    """A node standing for a chain of the graph's nodes (their names in ``names``), run by ``fn``
    on the chain's input."""

    def __init__(self, op_type, fn, input, output, nodes):
        self.op_type = op_type
        self.fn = fn
        self.inputs = [input]
        self.outputs = [output]
        self.names = [n.name for n in nodes]
        self.name = nodes[-1].name
        self.opset = nodes[-1].opset

    def run(self, ctx):
        return self.fn(ctx.tensor(self.inputs[0]))

    def describe(self):
        return f"nodes {self.names!r} (fused into {self.op_type})"


class _Graph:
    """Who produces and who consumes each value, and the scalar value of constants."""

    def __init__(self, graph, scalar_of):
        self.producer = {}
        self.consumers = {}
        for n in graph.nodes:
            for o in n.outputs:
                self.producer[o] = n
            reads = [i for i in n.inputs if i]
            for _, sub in graph.subgraphs(n):
                reads += sorted(sub.reads() - set(reads))  # a branch or body reads the values around it
            for i in reads:
                self.consumers.setdefault(i, []).append(n)
        self.outputs = {name for name, _, _ in graph.outputs}
        self.scalar_of = scalar_of

    def only_use(self, name, node):
        """Whether ``node`` is the one consumer of ``name`` (and ``name`` no graph output)."""
        return name not in self.outputs and self.consumers.get(name, []) == [node]

    def single(self, name, op_type):
        """The one consumer of ``name`` if it is of ``op_type``."""
        users = self.consumers.get(name, [])
        if len(users) == 1 and users[0].op_type == op_type and name not in self.outputs:
            return users[0]
        return None

    def other(self, node, name):
        """The other input of a two-input node, or None."""
        if len(node.inputs) != 2 or name not in node.inputs:
            return None
        a, b = node.inputs
        return b if a == name else a

    def is_scalar(self, name, value, rel=1e-4):
        v = self.scalar_of(name)
        return v is not None and abs(v - value) <= rel * abs(value)


def _gelu_chain(g, erf):
    """[div, erf, add, mul, mul] of x * 0.5 * (1 + erf(x / sqrt(2))) around ``erf``, and x; or None.
    The halving may come first (``(x * 0.5) * (1 + erf(...))``) or last."""
    scaled = g.producer.get(erf.inputs[0])
    if scaled is None or scaled.op_type not in ("Div", "Mul") or not g.only_use(scaled.outputs[0], erf):
        return None
    x = scaled.inputs[0]
    factor = _SQRT2 if scaled.op_type == "Div" else 1.0 / _SQRT2
    if len(scaled.inputs) != 2 or not g.is_scalar(scaled.inputs[1], factor):
        return None
    add = g.single(erf.outputs[0], "Add")
    if add is None or not g.is_scalar(g.other(add, erf.outputs[0]), 1.0):
        return None
    mul = g.single(add.outputs[0], "Mul")
    if mul is None:
        return None
    partner = g.other(mul, add.outputs[0])
    if partner == x:  # x * (1 + erf) then * 0.5
        half = g.single(mul.outputs[0], "Mul")
        if half is None or not g.is_scalar(g.other(half, mul.outputs[0]), 0.5):
            return None
        return [scaled, erf, add, mul, half], x, half.outputs[0]
    pre = g.producer.get(partner)  # (x * 0.5) * (1 + erf)
    if (pre is not None and pre.op_type == "Mul" and g.only_use(partner, mul) and x in pre.inputs
            and g.is_scalar(g.other(pre, x), 0.5)):
        return [scaled, erf, add, pre, mul], x, mul.outputs[0]
    return None


def _silu_chain(g, sigmoid):
    x = sigmoid.inputs[0]
    mul = g.single(sigmoid.outputs[0], "Mul")
    if mul is None or g.other(mul, sigmoid.outputs[0]) != x:
        return None
    return [sigmoid, mul], x, mul.outputs[0]


_PATTERNS = {"Erf": ("Gelu", gelu, _gelu_chain), "Sigmoid": ("Silu", silu, _silu_chain)}


def fuse(graph, scalar_of):
    """``graph.nodes`` with each chain found replaced by one ``FusedNode`` (in the place of the
    chain's last node, where every input of the chain is ready). ``scalar_of(name)`` is a value's
    number if it is a one-element constant, else None."""
    g = _Graph(graph, scalar_of)
    replaced = {}  # id of a chain's node -> the FusedNode (at its last node) or None (dropped)
    for n in graph.nodes:
        pattern = _PATTERNS.get(n.op_type)
        if pattern is None or id(n) in replaced:
            continue
        op_type, fn, match = pattern
        try:
            found = match(g, n)
        except TripyException:
            found = None
        if found is None:
            continue
        chain, x, out = found
        if any(id(c) in replaced for c in chain):
            continue
        for c in chain:
            replaced[id(c)] = None
        replaced[id(max(chain, key=graph.nodes.index))] = FusedNode(op_type, fn, x, out, chain)
    if not replaced:
        return graph.nodes
    nodes = []
    for n in graph.nodes:
        if id(n) not in replaced:
            nodes.append(n)
        elif replaced[id(n)] is not None:
            nodes.append(replaced[id(n)])
    return nodes

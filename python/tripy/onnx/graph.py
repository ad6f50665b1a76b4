"""A loaded ONNX graph (``Graph``: its nodes and their attributes, subgraphs included) and the
values of a run (``Context``): tensors, or ``Dims``, shapes kept as Python ints and
``tp.DimensionSize`` values so that shape arithmetic stays symbolic under dynamic shapes; an ONNX
sequence is a ``Sequence`` (a Python list of values) and an empty optional is ``None``
(``sequences.py``); the readers the converters share."""

import collections
import math

from tripy import _C
from tripy.exception import TripyException
from tripy.frontend import dtypes
from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.shape_ops import concatenate, reshape
from tripy.frontend.tensor import DimensionSize, Tensor


# The opsets of the standard domain the converters are written for (opset 22 changed no op's
# meaning: it let many ops take bfloat16).
OPSET_MIN, OPSET_MAX = 7, 22
STANDARD_DOMAINS = ("", "ai.onnx")

# ONNX element types (TensorProto.DataType) Tripy has.
_DTYPES = {1: dtypes.float32, 3: dtypes.int8, 6: dtypes.int32, 7: dtypes.int64, 9: dtypes.bool, 10: dtypes.float16,
           16: dtypes.bfloat16, 17: dtypes.float8}
# AttributeProto types.
_ATTR_TENSOR, _ATTR_GRAPH, _ATTR_GRAPHS = 4, 5, 10
# A slice bound meaning "to the end" (ONNX writes INT64_MAX).
_BIG = 1 << 62


def dtype_of(elem_type):
    """The Tripy dtype of an ONNX element type, or None."""
    return _DTYPES.get(elem_type)


def _elem_name(elem_type):
    return _C.onnx_elem_type_name(elem_type)


class Dims(list):
    """A 1-D int64 value known while the graph is built (a shape or part of one): ints and
    ``tp.DimensionSize`` entries. ``scalar`` marks a 0-d value (one entry)."""

    scalar = False


class Sequence(list):
    """An ONNX sequence: a list of values (tensors, or ``Dims``) known while the graph is built."""


def _dims(values, scalar=False):
    d = Dims(values)
    d.scalar = scalar
    return d


class Node:
    """One node: its op type, inputs, outputs and attributes (name -> (type, value))."""

    def __init__(self, raw, opset):
        self.name, self.op_type, self.domain, self.inputs, self.outputs, self.attrs = raw
        self.opset = opset
        self.graph = None  # set by Graph

    def has(self, name):
        return name in self.attrs

    def attr(self, name, default=None):
        if name not in self.attrs:
            return default
        kind, value = self.attrs[name]
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def input(self, i):
        """The name of input ``i``, or None where it is omitted."""
        return self.inputs[i] if i < len(self.inputs) and self.inputs[i] else None

    def describe(self):
        return f"node {self.name!r} ({self.op_type}, opset {self.opset})"


class Graph:
    """A loaded graph: its opset, inputs and outputs ((name, elem type, dims)), initializers and nodes.
    ``containers`` names the inputs and outputs that are no tensors ("sequence", "optional",
    "optional sequence"; their elem type and dims are the tensors' inside). A node's graph
    attributes (an If's branches, a Loop's body) are ``Graph`` values too."""

    def __init__(self, opset, domains, graph):
        self.opset = opset
        self.domains = domains
        self.name = graph.get("name", "")
        self.inputs = graph["inputs"]
        self.outputs = graph["outputs"]
        self.containers = dict(graph.get("containers", {}))
        self.initializers = {name: (elem, dims, node) for name, elem, dims, node in graph["initializers"]}
        self.nodes = [Node(raw, opset) for raw in graph["nodes"]]
        for n in self.nodes:
            n.graph = self  # for checks that read a constant input (Dropout's training_mode)
            for key, (kind, value) in n.attrs.items():
                if kind == _ATTR_GRAPH:
                    n.attrs[key] = (kind, Graph(opset, domains, value))
                elif kind == _ATTR_GRAPHS:
                    n.attrs[key] = (kind, [Graph(opset, domains, g) for g in value])

    def subgraphs(self, node):
        """The graphs among ``node``'s attributes, as (attribute name, graph) pairs."""
        found = []
        for key, (kind, value) in node.attrs.items():
            found += [(key, g) for g in ([value] if kind == _ATTR_GRAPH else value if kind == _ATTR_GRAPHS else [])]
        return found

    def reads(self):
        """Every name a node of this graph or of its subgraphs reads (a subgraph may read the
        values of the graphs around it)."""
        names = set()
        for n in self.nodes:
            names.update(i for i in n.inputs if i)
            for _, g in self.subgraphs(n):
                names |= g.reads()
        return names

    @staticmethod
    def from_contents(contents):
        domains = {domain: version for domain, version in contents["opsets"]}
        opset = next((domains[d] for d in STANDARD_DOMAINS if d in domains), None)
        return Graph(opset, domains, contents["graph"])


# ---- reading values ---------------------------------------------------------------------------------


class Context:
    """The values of a graph being run, by name. ``run_node`` runs one node (the converter table's
    dispatch); a subgraph runs in a child context that sees its parent's values."""

    def __init__(self, graph, run_node, parent_env=None):
        self.graph = graph
        self.run_node = run_node
        self.env = collections.ChainMap({}, parent_env) if parent_env is not None else {}
        for name, (elem, dims, node) in graph.initializers.items():
            self.env[name] = Tensor._wrap(node)

    def get(self, name):
        return self.env[name]

    def tensor(self, name):
        value = self.env[name]
        if isinstance(value, Sequence) or value is None:
            what = "a sequence" if value is not None else "an empty optional"
            _raise_here(f"{name!r} is {what}, where a tensor is needed.")
        return as_tensor(value)

    def run(self):
        """Runs the graph's nodes in order, each error naming its node."""
        for n in self.graph.nodes:
            try:
                out = self.run_node(self, n)
            except TripyException as e:
                _raise_here(f"ONNX {n.describe()} failed:\n{e}")
            outs = out if type(out) in (list, tuple) else [out]  # a Dims or a Sequence is one value
            for name, value in zip(n.outputs, outs):
                if name:
                    self.env[name] = value

    def run_subgraph(self, graph, inputs):
        """The outputs of ``graph`` (a branch or a loop body) given values for its inputs, in order."""
        child = Context(graph, self.run_node, self.env)
        for (name, _, _), value in zip(graph.inputs, inputs):
            child.env[name] = value
        child.run()
        return [child.get(name) for name, _, _ in graph.outputs]

    def opt_tensor(self, node, i):
        name = node.input(i)
        return None if name is None else self.tensor(name)

    def ints(self, name, node):
        """The values of an integer input, needed while the graph is built (a shape, axes)."""
        value = self.env[name]
        if isinstance(value, Dims):
            return list(value)
        return [_int(v) for v in _flat(self.values(name, node))]

    def values(self, name, node):
        value = self.env[name]
        if isinstance(value, Dims):
            return list(value) if not value.scalar else value[0]
        try:
            return value.tolist()
        except TripyException:
            _raise_here(f"ONNX {node.describe()} needs the values of {name!r} while the graph is built, but they depend "
                        "on a runtime input's values, which Tripy only knows when the executable runs.")

    def try_ints(self, name):
        """The values of a small integer input if they can be read now, else None."""
        value = self.env[name]
        if isinstance(value, Dims):
            return list(value)
        if value.dtype not in (dtypes.int32, dtypes.int64) or value.rank > 1 or not _static(value.shape):
            return None
        if math.prod(value.shape) > 64:
            return None
        try:
            return [int(v) for v in _flat(value.tolist())]
        except TripyException:
            return None


def _flat(values):
    if isinstance(values, list):
        return [x for v in values for x in _flat(v)]
    return [values]


def _int(v):
    return v if isinstance(v, (int, DimensionSize)) else int(v)


def _static(shape):
    return all(isinstance(d, int) for d in shape)


def known_values(value):
    """The values of ``value`` (a tensor, or a ``Dims``) as nested lists (a scalar ``Dims``: its
    number) where they can be read while the graph is built, else None: computed from a runtime
    input under ``tp.compile``, or a ``Dims`` of dynamic sizes. Reading a tensor evaluates it; an
    error doing so is that tensor's own."""
    if isinstance(value, Dims):
        return (value[0] if value.scalar else list(value)) if all(isinstance(d, int) for d in value) else None
    return value.tolist() if _C.value_known(value._node) else None


def as_tensor(value):
    if not isinstance(value, Dims):
        return value
    if _static(value):
        kind = dtypes.bool if value and all(isinstance(d, bool) for d in value) else dtypes.int64
        return Tensor(value[0] if value.scalar else list(value), dtype=kind)
    parts = [reshape(cast(d, dtypes.int64), (1,)) if isinstance(d, Tensor) else Tensor([d], dtype=dtypes.int64)
             for d in value]
    out = concatenate(parts, 0) if len(parts) > 1 else parts[0]
    return reshape(out, ()) if value.scalar else out


def _axis(axis, rank):
    return axis + rank if axis < 0 else axis


def _as_dtype_of(value, like):
    """A Python number as a tensor of ``like``'s dtype, or a tensor cast to it."""
    if isinstance(value, Tensor):
        return value if value.dtype == like.dtype else cast(value, like.dtype)
    return Tensor(value, dtype=like.dtype)

def _axes_of(ctx, n, attr_until, input_index=1):
    """Axes from the attribute (opsets before ``attr_until``) or the input (from it on); None if absent."""
    if n.opset < attr_until:
        return n.attr("axes")
    name = n.input(input_index)
    return None if name is None else [int(a) for a in ctx.ints(name, n)]

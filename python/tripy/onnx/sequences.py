"""ONNX's sequences and optionals as values of the importer, never as tensors of a program: a
sequence is a ``Sequence`` (a Python list of tensors) and an optional is its element, or ``None``
when empty. A position in a sequence must be known while the graph is built (a constant, a shape
value, or an eager input's value); the ops that take one read it then. ConcatFromSequence and
SplitToSequence are Tripy's concatenate and split over the list. Their rows join the converter
table in ``converters.py``; SequenceMap, which runs a subgraph, is in ``control_flow.py``."""

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import concatenate, split, squeeze, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.onnx.graph import Sequence, _axis, _dims, as_tensor
from tripy.onnx.rows import Row


def sequence_of(ctx, n, i=0):
    """Input ``i`` of ``n``, which must be a sequence."""
    value = ctx.get(n.inputs[i])
    if not isinstance(value, Sequence):
        _raise_here(f"ONNX {n.describe()}: input {i} ({n.inputs[i]!r}) must be a sequence, but it is "
                    f"{'an empty optional' if value is None else 'a tensor'}.")
    return value


def _position(ctx, n, seq, i, default, end_allowed):
    """The position input ``i`` (``default`` where it is omitted) as an index into ``seq``; its
    value must be known now, and within [-len, len - 1] (or len too where ``end_allowed``)."""
    if n.input(i) is None:
        return default
    values = ctx.ints(n.inputs[i], n)
    if len(values) != 1 or not isinstance(values[0], int):
        _raise_here(f"ONNX {n.describe()}: the position must be one integer known while the graph is built, not "
                    f"{values}.")
    pos, size = values[0], len(seq)
    top = size if end_allowed else size - 1
    if not -size <= pos <= top:
        _raise_here(f"ONNX {n.describe()}: position {pos} lies outside the sequence of {size} tensors "
                    f"(allowed: {-size} to {top}).")
    return pos + size if pos < 0 else pos


def _construct(ctx, n):
    return Sequence(ctx.tensor(i) for i in n.inputs if i)


def _empty(ctx, n):
    return Sequence()


def _insert(ctx, n):
    seq = sequence_of(ctx, n)
    pos = _position(ctx, n, seq, 2, len(seq), end_allowed=True)
    return Sequence(seq[:pos] + [ctx.get(n.inputs[1])] + seq[pos:])


def _at(ctx, n):
    seq = sequence_of(ctx, n)
    return seq[_position(ctx, n, seq, 1, None, end_allowed=False)]


def _erase(ctx, n):
    seq = sequence_of(ctx, n)
    if not seq:
        _raise_here(f"ONNX {n.describe()}: the sequence is empty; there is nothing to erase.")
    pos = _position(ctx, n, seq, 1, len(seq) - 1, end_allowed=False)
    return Sequence(seq[:pos] + seq[pos + 1:])


def _length(ctx, n):
    return _dims([len(sequence_of(ctx, n))], scalar=True)


def _concat_from_sequence(ctx, n):
    seq = [as_tensor(t) for t in sequence_of(ctx, n)]
    if not seq:
        _raise_here(f"ONNX {n.describe()}: the sequence is empty, so the output's dtype and shape are unknown.")
    new_axis = n.attr("new_axis", 0)
    axis = _axis(n.attr("axis"), seq[0].rank + (1 if new_axis else 0))
    if new_axis:
        seq = [unsqueeze(t, axis) for t in seq]
    return concatenate(seq, axis) if len(seq) > 1 else seq[0]


def _split_to_sequence(ctx, n):
    x = ctx.tensor(n.inputs[0])
    axis = _axis(n.attr("axis", 0), x.rank)
    size = x.shape[axis]
    sizes = None if n.input(1) is None else ctx.ints(n.inputs[1], n)
    given = None if n.input(1) is None else ctx.get(n.inputs[1])
    scalar = getattr(given, "scalar", False) or (isinstance(given, Tensor) and given.rank == 0)
    if sizes is None or scalar:
        if not isinstance(size, int):
            _raise_here(f"ONNX {n.describe()}: splitting dim {axis} into equal parts needs it static, but it is "
                        "dynamic.")
        part = 1 if sizes is None else sizes[0]
        sizes = [min(part, size - start) for start in range(0, size, part)]
    if isinstance(size, int) and all(isinstance(s, int) for s in sizes) and sum(sizes) != size:
        _raise_here(f"ONNX {n.describe()}: the split sizes {list(sizes)} do not add up to dim {axis}'s size {size}.")
    parts = split(x, list(sizes), axis) if len(sizes) > 1 else [x]
    if n.input(1) is None and not n.attr("keepdims", 1):
        parts = [squeeze(p, [axis]) for p in parts]
    return Sequence(parts)


def _optional(ctx, n):
    return None if n.input(0) is None else ctx.get(n.inputs[0])


def _has_element(ctx, n):
    present = n.input(0) is not None and ctx.get(n.inputs[0]) is not None
    return _dims([present], scalar=True)


def _get_element(ctx, n):
    value = ctx.get(n.inputs[0])
    if value is None:
        _raise_here(f"ONNX {n.describe()}: the optional {n.inputs[0]!r} is empty.")
    return value


ROWS = {
    "SequenceConstruct": Row(_construct, first=11),
    "SequenceEmpty": Row(_empty, ("dtype",), first=11),
    "SequenceInsert": Row(_insert, first=11),
    "SequenceAt": Row(_at, first=11),
    "SequenceErase": Row(_erase, first=11),
    "SequenceLength": Row(_length, first=11),
    "ConcatFromSequence": Row(_concat_from_sequence, ("axis", "new_axis"), first=11),
    "SplitToSequence": Row(_split_to_sequence, ("axis", "keepdims"), first=11),
    "Optional": Row(_optional, ("type",), first=15),
    "OptionalHasElement": Row(_has_element, first=15),
    "OptionalGetElement": Row(_get_element, first=15),
}

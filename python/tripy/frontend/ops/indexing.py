"""``Tensor.__getitem__``: ints, slices (Python clamping, negative steps), ``...``, ``None``,
and a tensor index (gather on dim 0)."""

from tripy.frontend.ops.shape_ops import TO_END, gather, reshape
from tripy.frontend.trace_call import _raise_here, make


def getitem(input, index):
    from tripy.frontend.tensor import Tensor

    if isinstance(index, Tensor):
        return gather(input, 0, index)
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in items if i is Ellipsis) > 1:
        _raise_here("An index can only have a single ellipsis ('...').")
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if consumed > input.rank:
        _raise_here(f"Too many indices for a tensor of rank {input.rank}: {consumed} were given.")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (input.rank - consumed)
    while sum(1 for i in items if i is not None) < input.rank:
        items.append(slice(None))

    shape = list(input._node.shape)  # ints, or strings for dynamic dims
    # The result's dims, as ("new", None) for None, ("keep", sliced dim) or dropped for ints.
    starts, limits, steps, layout = [], [], [], []
    dim = 0
    for item in items:
        if item is None:
            layout.append(None)
            continue
        size = shape[dim]
        if isinstance(item, int):
            if isinstance(size, str):
                _raise_here(f"Cannot index dimension {dim} with an int: it is dynamic ({size}).")
            if not -size <= item < size:
                _raise_here(f"Index {item} is out of bounds for dimension {dim} with size {size}.")
            i = item % size
            starts.append(i), limits.append(i + 1), steps.append(1)
        elif isinstance(item, slice):
            if isinstance(size, str):
                if item != slice(None):
                    _raise_here(f"Dimension {dim} is dynamic ({size}); only ':' can slice it.")
                starts.append(0), limits.append(TO_END), steps.append(1)
                layout.append(dim)
                dim += 1
                continue
            start, stop, step = item.indices(size)
            starts.append(start), limits.append(stop), steps.append(step)
            layout.append(dim)
        else:
            _raise_here(f"Unsupported index {item!r}: use ints, slices, '...', None or a tensor.")
        dim += 1
    out = make("slice", [input], starts=starts, limits=limits, steps=steps)
    if layout == list(range(input.rank)):
        return out
    sizes = out.shape
    return reshape(out, [1 if d is None else sizes[d] for d in layout])

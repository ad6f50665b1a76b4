"""``Tensor.__getitem__``: ints, slices (Python clamping, negative steps), ``...``, ``None``,
and a tensor index (gather on dim 0). Slice bounds may be ``tp.DimensionSize`` values, and dynamic dims
may be sliced with any nonzero int step: the bounds are then clamped symbolically."""

import builtins
import numbers
import operator

from tripy.frontend.errors import _raise_here
from tripy.frontend.ops.shape_ops import TO_END, gather, reshape
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import make, scalar_like


_LONGEST_STEP = 2**48


def _size_op(op, a, b):
    """min/max of sizes: Python ints fold here, DimensionSizes stay symbolic."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return builtins.min(a, b) if op == "minimum" else builtins.max(a, b)
    x, y = (a, b) if isinstance(a, Tensor) else (b, a)
    return make(op, [x, scalar_like(y, x)])


def _clamped(bound, size, step):
    """A slice bound clamped as Python clamps it: to [0, size] for a positive step, to [-1, size - 1]
    for a negative one (-1 is "before the first element"). A negative int counts from the end; a
    DimensionSize is a size, so it counts from the start (a negative value clamps to the lowest)."""
    lo, hi = (0, size) if step > 0 else (-1, size - 1)
    if not isinstance(bound, Tensor):
        bound = operator.index(bound)
        if bound < 0:
            return _size_op("maximum", size + bound, lo)
    return _size_op("maximum", _size_op("minimum", bound, hi), lo)


def _symbolic_slice(input, dim, item):
    """(start, limit, step) of a slice whose bounds or dim size are only known at run time."""
    step = 1 if item.step is None else item.step
    if isinstance(step, Tensor):
        _raise_here(
            f"Dimension {dim} is sliced with a tp.DimensionSize step ({item.step!r}): a slice step must be an int, "
            "as it decides the direction of the slice at compile time."
        )
    # No dim that fits in memory has 2**48 elements, so a longer step (up to -(2**63) or past 64
    # bits) selects what it would: the first element. Clamped, it cannot overflow the core's sizes.
    step = builtins.max(-_LONGEST_STEP, builtins.min(operator.index(step), _LONGEST_STEP))
    size = input.shape[dim]  # an int, or a DimensionSize for a dynamic dim
    if step > 0:
        start = 0 if item.start is None else _clamped(item.start, size, step)
        limit = TO_END if item.stop is None else _clamped(item.stop, size, step)
    else:
        start = size - 1 if item.start is None else _clamped(item.start, size, step)
        limit = -1 if item.stop is None else _clamped(item.stop, size, step)
    return start, limit, step


def _nodes(sizes):
    """Slice attributes: ints, and DimensionSizes as their (symbolic) nodes."""
    return [v._node if isinstance(v, Tensor) else v for v in sizes]


def getitem(input, index):
    if isinstance(index, Tensor):
        if index.dtype.name == "bool":
            _raise_here(
                "Indexing with a boolean mask (t[mask]) is not supported: the result's shape would depend on the "
                "mask's values, and Tripy's shapes are known before a program runs. Keep the shape and select with "
                "tp.where(mask, t, 0) or tp.masked_fill(t, mask, value); reduce with tp.sum(tp.where(mask, t, 0)), "
                "or read the selected values on the host with np.asarray(t)[np.asarray(mask)]."
            )
        return gather(input, 0, index)
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in items if i is Ellipsis) > 1:
        _raise_here("An index can only have a single ellipsis ('...').")
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if consumed > input.rank:
        _raise_here(f"Too many indices for a tensor of rank {input.rank}: {consumed} were given.")
    # By identity: `in` and `index` would compare tensors (DimensionSize indices) with ==.
    at = next((i for i, item in enumerate(items) if item is Ellipsis), None)
    if at is not None:
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
        if isinstance(item, Tensor) or (isinstance(item, numbers.Integral) and isinstance(size, str)):
            # An index the compiler cannot check now (a DimensionSize, or an int into a dynamic
            # dim): a one-element symbolic slice whose dim is then dropped.
            if isinstance(item, Tensor):
                one = slice(item, item + 1)
            else:
                item = operator.index(item)
                one = slice(item, item + 1 if item != -1 else None)
            start, stop, step = _symbolic_slice(input, dim, one)
            starts.append(start), limits.append(stop), steps.append(step)
        elif isinstance(item, numbers.Integral):  # Python ints and numpy integer scalars alike
            item = operator.index(item)
            if isinstance(size, str):
                _raise_here(f"Cannot index dimension {dim} with an int: it is dynamic ({size}).")
            if not -size <= item < size:
                _raise_here(f"Index {item} is out of bounds for dimension {dim} with size {size}.")
            i = item % size
            starts.append(i), limits.append(i + 1), steps.append(1)
        elif isinstance(item, slice):
            bounds = (item.start, item.stop, item.step)
            if isinstance(item.step, numbers.Integral) and item.step == 0:
                _raise_here(f"Dimension {dim} is sliced with step 0: a slice step cannot be zero.")
            for what, b in (("start", item.start), ("stop", item.stop), ("step", item.step)):
                if b is not None and not isinstance(b, (numbers.Integral, Tensor)):
                    _raise_here(f"Dimension {dim} is sliced with a {what} of {b!r}: slice bounds and steps must be ints.")
            if isinstance(size, str) or any(isinstance(b, Tensor) for b in bounds):
                start, stop, step = _symbolic_slice(input, dim, item)
            else:
                start, stop, step = item.indices(size)
                # A step as long as the dim already takes only the first element; a longer one
                # (up to -(2**63) or past 64 bits) selects the same, so it is clamped to the size
                # rather than overflowing the core's length arithmetic.
                step = builtins.max(-builtins.max(size, 1), builtins.min(step, builtins.max(size, 1)))
            starts.append(start), limits.append(stop), steps.append(step)
            layout.append(dim)
        else:
            _raise_here(f"Unsupported index {item!r}: use ints, slices, '...', None or a tensor.")
        dim += 1
    out = make("slice", [input], starts=_nodes(starts), limits=_nodes(limits), steps=steps)
    if layout == list(range(input.rank)):
        return out
    sizes = out.shape
    return reshape(out, [1 if d is None else sizes[d] for d in layout])

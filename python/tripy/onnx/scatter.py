"""ONNX's ScatterND, ScatterElements (and the older Scatter) and GatherND as Tripy ops over static
shapes. Every index becomes a row-major position in the data seen as rows of the untouched trailing
dims; a gather reads them. Tripy has no scatter primitive. Where a scatter without a reduction has
positions known while the graph is built (computed from constants, or from an eager run's values,
as a detector's boxes routed to its RoI levels are), the host reads which update each row takes
and the scatter is a gather of the updates, any size. Otherwise a scatter compares every data row
with every update's position: without a reduction each row takes the update that hits it (or
keeps its value), with ``add``/``mul``/``max``/``min`` it combines them all. The comparison is rows x updates (x
row length for a reduction) elements, so the data must stay modest (masks, small state). Either
way, where several updates hit one row, the first of them wins."""

import math

from tripy.frontend import dtypes
from tripy.frontend.ops.creation import iota
from tripy.frontend.ops.elementwise import maximum, minimum, where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.reduce import any as any_
from tripy.frontend.ops.reduce import argmax, max, min, prod, sum
from tripy.frontend.ops.shape_ops import flatten, gather, reshape, unsqueeze
from tripy.frontend.tensor import Tensor
from tripy.frontend.trace_call import scalar_like
from tripy.onnx.graph import known_values

# Elements of the comparison a scatter builds, at most.
MAX_COMPARED = 1 << 26


def _static(shape, what, fail):
    if not all(isinstance(d, int) for d in shape):
        fail(f"{what} needs static shapes, but one is {list(shape)}")
    return list(shape)


def _positions(indices, sizes, fail):
    """Row-major positions (int64, ``indices``' shape less its last dim) of the index tuples in
    ``indices`` (last dim: one index per leading dim of ``sizes``), negative indices wrapped."""
    k = indices.shape[-1]
    if k > len(sizes):
        fail(f"index tuples of {k} entries for data of rank {len(sizes)}")
    indices = indices if indices.dtype == dtypes.int64 else cast(indices, dtypes.int64)
    position = None
    for j in range(k):
        stride = math.prod(sizes[j + 1:k])
        idx = indices[..., j]
        idx = where(idx < 0, idx + sizes[j], idx)
        term = idx * stride
        position = term if position is None else position + term
    return position


def gather_nd(data, indices, batch_dims, fail):
    """ONNX GatherND."""
    shape = _static(data.shape, "GatherND", fail)
    index_shape = _static(indices.shape, "GatherND", fail)
    b = batch_dims
    k = index_shape[-1]
    batch = math.prod(shape[:b])
    rows = math.prod(shape[b:b + k])
    tail = shape[b + k:]
    flat_data = reshape(data, [batch * rows, math.prod(tail)])
    flat_index = reshape(indices, [batch, math.prod(index_shape[b:-1]), k])
    position = _positions(flat_index, shape[b:b + k], fail)  # [batch, Q]
    position = position + iota([batch, 1], 0, dtypes.int64) * rows
    out = gather(flat_data, 0, flatten(position))
    return reshape(out, index_shape[:-1] + tail)


def _innermost(values):
    """The innermost lists of nested lists, in row-major order."""
    if values and isinstance(values[0], list):
        for v in values:
            yield from _innermost(v)
    else:
        yield values


def _check_known_indices(indices, sizes, fail):
    """Refuses a known index (``indices``' last dim: one per dim of ``sizes``) outside its dim."""
    values = known_values(indices)
    if values is None:
        return
    for j, size in enumerate(sizes):
        for index in _innermost(values):
            if index and not -size <= index[j] < size:
                fail(f"index {int(index[j])} lies outside dim {j} of size {size}")


def _scatter_known_rows(data_rows, positions, update_rows):
    """``data_rows`` [M, S] with the rows at the known ``positions`` [U] set to ``update_rows`` [U, S]:
    a gather of the update each row takes (the first that hits it), kept rows from the data."""
    m = data_rows.shape[0]
    if not len(positions):  # no update (an RoI level no box was routed to)
        return data_rows
    first = {}
    for update, row in enumerate(positions):
        first.setdefault(row % m, update)
    which = [0] * m
    for row, update in first.items():
        which[row] = update
    picked = gather(update_rows, 0, Tensor(which, dtype=dtypes.int64))
    if len(first) == m:
        return picked
    hit = [[row in first] for row in range(m)]
    return where(Tensor(hit, dtype=dtypes.bool), picked, data_rows)


def _scatter_rows(data_rows, position, update_rows, reduction, fail):
    """``data_rows`` [M, S] with the rows at ``position`` [U] set to (or combined with) ``update_rows`` [U, S]."""
    m, s = data_rows.shape
    u = position.shape[0]
    if reduction == "none":
        positions = known_values(position)
        if positions is not None:
            return _scatter_known_rows(data_rows, positions, update_rows)
    compared = m * u * (1 if reduction == "none" else s)
    if compared > MAX_COMPARED:
        fail(f"the scatter compares {m} rows with {u} updates, more than Tripy's scatter does ({MAX_COMPARED} elements)")
    hits = iota([m, u], 0, dtypes.int64) == unsqueeze(position, 0)  # [M, U]
    if reduction == "none":
        hit = any_(hits, 1)  # [M]
        which = argmax(cast(hits, dtypes.int32), 1)  # the update hitting each row (the first, if several)
        picked = gather(update_rows, 0, which)
        return where(unsqueeze(hit, 1), picked, data_rows)
    if reduction in ("max", "min"):  # opset 18: rows no update hits keep their values
        hit = unsqueeze(any_(hits, 1), 1)
        spread = where(unsqueeze(hits, 2), unsqueeze(update_rows, 0), unsqueeze(data_rows, 1))
        combined = max(spread, 1) if reduction == "max" else min(spread, 1)
        return where(hit, maximum(data_rows, combined) if reduction == "max" else minimum(data_rows, combined),
                     data_rows)
    spread = where(unsqueeze(hits, 2), unsqueeze(update_rows, 0), scalar_like(0 if reduction == "add" else 1, data_rows))
    if reduction == "add":
        return data_rows + sum(spread, 1)
    return data_rows * prod(spread, 1)


def scatter_nd(data, indices, updates, reduction, fail):
    """ONNX ScatterND."""
    shape = _static(data.shape, "ScatterND", fail)
    index_shape = _static(indices.shape, "ScatterND", fail)
    k = index_shape[-1]
    if reduction == "none":
        _check_known_indices(indices, shape[:k], fail)
    s = math.prod(shape[k:])
    u = math.prod(index_shape[:-1])
    position = reshape(_positions(indices, shape[:k], fail), [u])
    out = _scatter_rows(reshape(data, [math.prod(shape[:k]), s]), position, reshape(updates, [u, s]), reduction, fail)
    return reshape(out, shape)


def scatter_elements(data, indices, updates, axis, reduction, fail):
    """ONNX ScatterElements (and Scatter)."""
    shape = _static(data.shape, "ScatterElements", fail)
    index_shape = _static(indices.shape, "ScatterElements", fail)
    indices = indices if indices.dtype == dtypes.int64 else cast(indices, dtypes.int64)
    if reduction == "none":
        _check_known_indices(unsqueeze(indices, -1), [shape[axis]], fail)
    indices = where(indices < 0, indices + shape[axis], indices)
    position = None
    for d in range(len(shape)):
        stride = math.prod(shape[d + 1:])
        coordinate = indices if d == axis else iota(index_shape, d, dtypes.int64)
        term = coordinate * stride
        position = term if position is None else position + term
    u = math.prod(index_shape)
    out = _scatter_rows(reshape(data, [math.prod(shape), 1]), reshape(position, [u]), reshape(updates, [u, 1]),
                        reduction, fail)
    return reshape(out, shape)

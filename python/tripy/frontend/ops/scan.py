"""Ops that look along one dim: cumsum (a log-step scan) and topk (rounds of max + masking),
composites of existing ops so every backend runs them unchanged."""

from tripy.frontend import dtypes
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.pad import full_on
from tripy.frontend.ops.reduce import max as max_, min as min_, sum as sum_
from tripy.frontend.ops.shape_ops import _sizes, concatenate, slice_dim, unsqueeze
from tripy.frontend.trace_call import _raise_here, make

_INT32_MAX = 2**31 - 1
_INT_MIN = {"int8": -(2**7), "int32": -(2**31), "int64": -(2**63)}


def _dim(input, dim, op):
    rank = input.rank
    if rank == 0 or not -rank <= dim < rank:
        _raise_here(f"{op}: dim {dim} is out of range for a tensor of rank {rank}.")
    return dim % rank


def _iota_on(input, shape, dim):
    """int32 positions along ``dim`` of ``shape``, on ``input``'s device."""
    return make("iota", [], shape=_sizes(shape, "a shape"), axis=dim, dtype="int32", device=input._node.device)


def cumsum(input, dim):
    """
    The running sum along ``dim``: ``out[..., i, ...] = sum(input[..., :i + 1, ...])``.

    A static ``dim`` of size n takes ceil(log2(n)) shifted additions (O(n log n) work); a dynamic
    one sums a triangular mask instead (O(n^2) work, one fused reduction).

    Example::

        import tripy as tp

        assert tp.cumsum(tp.Tensor([1, 2, 3, 4]), dim=0).tolist() == [1, 3, 6, 10]
        assert tp.cumsum(tp.Tensor([[1.0, 2.0], [3.0, 4.0]]), dim=0).tolist() == [[1.0, 2.0], [4.0, 6.0]]
    """
    if input.dtype == dtypes.bool:
        _raise_here("cumsum: bool tensors are not summed; tp.cast the input to an integer dtype first.")
    dim = _dim(input, dim, "cumsum")
    size = input._node.shape[dim]
    if isinstance(size, str):
        # out[i] = sum_j [j <= i] * x[j], with j on a new dim after `dim`.
        source = unsqueeze(input, dim)
        mask_shape = [1] * (input.rank + 1)
        mask_shape[dim] = mask_shape[dim + 1] = input.shape[dim]
        keep = _iota_on(input, mask_shape, dim + 1) <= _iota_on(input, mask_shape, dim)
        return sum_(where(keep, source, full_on(input, [], 0)), dim + 1)
    out, shift = input, 1
    while shift < size:
        # Hillis-Steele: each round adds the partial sums `shift` positions earlier.
        shape = list(out.shape)
        shape[dim] = shift
        earlier = concatenate([full_on(out, shape, 0), slice_dim(out, dim, 0, size - shift)], dim)
        out, shift = out + earlier, shift * 2
    return out


def topk(input, k, dim):
    """
    The ``k`` largest values along ``dim`` in descending order, and their int32 indices (ties go
    to the lower index, as a stable sort would). NaN counts as larger than every number, as in
    ``torch.topk``.

    It runs ``k`` rounds, each a max and a min reduction over the whole tensor with the chosen
    elements masked out: O(k * n) work, so it suits small ``k``.

    Example::

        import tripy as tp

        values, indices = tp.topk(tp.Tensor([[1.0, 5.0, 3.0, 4.0]]), 2, dim=1)
        assert values.tolist() == [[5.0, 4.0]]
        assert indices.tolist() == [[1, 3]]
    """
    if input.dtype == dtypes.bool or input.dtype.name not in ("float32", "float16", "bfloat16", *_INT_MIN):
        _raise_here(f"topk: unsupported dtype {input.dtype.name}; use a float or an int8/int32/int64 tensor.")
    dim = _dim(input, dim, "topk")
    size = input._node.shape[dim]
    if not isinstance(k, int) or k < 1 or (isinstance(size, int) and k > size):
        _raise_here(f"topk: k must be an int in [1, {size}] for dimension {dim} of size {size}, but got: {k!r}.")
    lowest = float("-inf") if issubclass(input.dtype, dtypes.floating) else _INT_MIN[input.dtype.name]
    index = _iota_on(input, input.shape, dim)
    taken = None
    values, indices = [], []
    for _ in range(k):
        live = input if taken is None else where(taken, full_on(input, [], lowest), input)
        best = max_(live, dim, keepdim=True)
        hit = live == best
        if issubclass(input.dtype, dtypes.floating):
            # max propagates NaN, and NaN equals nothing: a NaN is the largest value, as in torch.
            hit = hit | (live != live)
        if taken is not None:
            # A taken element may equal `lowest`; only untaken ones count as hits.
            hit = hit & ~taken
        at = min_(where(hit, index, full_on(index, [], _INT32_MAX)), dim, keepdim=True)
        chosen = index == at
        taken = chosen if taken is None else taken | chosen
        values.append(best)
        indices.append(at)
    return concatenate(values, dim), concatenate(indices, dim)

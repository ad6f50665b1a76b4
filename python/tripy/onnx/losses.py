"""ONNX's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (losses that exported training
graphs and evaluation models compute) as Tripy ops: each target picks its class's value through a
comparison with an iota over the class dim, weighted per class, targets equal to ``ignore_index``
weighing nothing. Their rows join the converter table in ``converters.py``."""

from tripy.frontend import dtypes
from tripy.frontend.ops.creation import iota
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.misc import cast
from tripy.frontend.ops.reduce import log_softmax, sum
from tripy.frontend.ops.shape_ops import gather, unsqueeze
from tripy.onnx.graph import _as_dtype_of
from tripy.onnx.rows import Row, attr_is


def _nll(values, target, weight, reduction, ignore_index):
    """-values[n, target[n, ...], ...] weighted, then reduced (``values``: [N, C, ...])."""
    target = target if target.dtype == dtypes.int64 else cast(target, dtypes.int64)
    zero = _as_dtype_of(0.0, values)
    kept = None if ignore_index is None else target != ignore_index
    if kept is not None:  # an ignored target may lie outside the classes: read class 0 instead
        target = where(kept, target, _as_dtype_of(0, target))
    hit = iota(list(values.shape), 1, dtypes.int64) == unsqueeze(target, 1)
    picked = sum(where(hit, values, zero), 1)
    w = None if weight is None else gather(weight, 0, target)
    if kept is not None:
        w = where(kept, w if w is not None else _as_dtype_of(1.0, values), zero)
    loss = -picked if w is None else -picked * w
    if reduction == "none":
        return loss
    total = sum(loss, list(range(loss.rank)))
    if reduction == "sum":
        return total
    if w is None:
        count = 1
        for d in loss.shape:
            count = count * d
        return total / _as_dtype_of(cast(count, values.dtype) if not isinstance(count, int) else float(count), values)
    return total / sum(w, list(range(w.rank)))


def _nll_loss(ctx, n):
    values, target = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    return _nll(values, target, ctx.opt_tensor(n, 2), n.attr("reduction", "mean"), n.attr("ignore_index"))


def _softmax_cross_entropy(ctx, n):
    scores, labels = ctx.tensor(n.inputs[0]), ctx.tensor(n.inputs[1])
    log_prob = log_softmax(scores, 1)
    loss = _nll(log_prob, labels, ctx.opt_tensor(n, 2), n.attr("reduction", "mean"), n.attr("ignore_index"))
    return [loss, log_prob][: len(n.outputs)]


_REDUCTIONS = attr_is("reduction", ("none", "sum", "mean"), "mean")

ROWS = {
    "NegativeLogLikelihoodLoss": Row(_nll_loss, ("ignore_index", "reduction"), first=12, check=_REDUCTIONS),
    "SoftmaxCrossEntropyLoss": Row(_softmax_cross_entropy, ("ignore_index", "reduction"), first=12, check=_REDUCTIONS),
}

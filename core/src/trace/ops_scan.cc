// Ops that look along one dim: cumsum (a log-step scan of shifted additions) and topk (rounds of
// a max and a min reduction with the chosen elements masked out), composites of FlatIR slice,
// concatenate, reduce and elementwise ops, so every backend runs them unchanged. Their rules are
// symbolic: the scanned or searched dim may be dynamic inside tp.compile (topk checks at run time
// that k fits it, with the user's line).
#include <cmath>
#include <limits>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

// "cumsum: dim 2 is out of range ..." (the wording the frontend's tests pin down).
StatusOr<int64_t> scan_axis(InferCtx& ctx, const std::string& op) {
  const int64_t rank = static_cast<int64_t>(ctx.shape(0).size());
  const int64_t dim = ctx.node.attrs.axis;
  if (rank == 0 || dim < -rank || dim >= rank)
    return ctx.error(op + ": dim " + std::to_string(dim) + " is out of range for a tensor of rank " +
                     std::to_string(rank) + ".");
  return dim < 0 ? dim + rank : dim;
}

flat::ValueId slice_prefix(LowerCtx& c, flat::ValueId x, int64_t axis, const Dim& n) {
  const Shape in = c.value(x).shape;
  flat::Op op;
  op.kind = flat::OpKind::kSlice;
  op.operands = {x};
  for (size_t d = 0; d < in.size(); ++d) {
    op.starts.push_back(0);
    op.limits.push_back(static_cast<int64_t>(d) == axis ? n : in[d]);
    op.steps.push_back(1);
  }
  Shape out = in;
  out[axis] = n;
  const DType dt = c.value(x).dtype;
  return c.emit(std::move(op), dt, std::move(out), "cumsum: the partial sums one shift earlier");
}

// --- cumsum -----------------------------------------------------------------------------------

Status infer_cumsum(InferCtx& ctx) {
  if (ctx.in()[0]->dtype == DType::kBool)
    return ctx.error("cumsum: bool tensors are not summed; tp.cast the input to an integer dtype first.");
  TRIPY_ASSIGN_OR_RETURN(ctx.node.attrs.axis, scan_axis(ctx, "cumsum"));
  ctx.node.shape = ctx.shape(0);
  // The sum's rule (ops_reduce.cc): int8 running sums return int64, as numpy's and torch's do.
  ctx.node.dtype = ctx.in()[0]->dtype == DType::kInt8 ? DType::kInt64 : ctx.in()[0]->dtype;
  return ok_status();
}

// Hillis-Steele: round r adds the partial sums 2^r positions earlier, so ceil(log2(n)) rounds
// sum every prefix (O(n log n) work, each round one fused pass). A dynamic dim runs the rounds
// its upper bound needs; a shift past the run-time size adds only zeros. Narrow floats are summed
// in float32 and rounded once, as a float16 running sum loses the small terms.
StatusOr<flat::ValueId> lower_cumsum(LowerCtx& c) {
  const int64_t axis = c.node().attrs.axis;
  const DType io = c.node().dtype;
  const bool narrow = io == DType::kFloat16 || io == DType::kBFloat16;
  const DType dt = narrow ? DType::kFloat32 : io;
  flat::ValueId out = c.value(c.in(0)).dtype != dt ? c.ew(EwOp::kConvert, {c.in(0)}, dt) : c.in(0);
  const Dim size = c.value(out).shape[axis];
  const SymbolTable* table = c.node().symbols.get();
  if (!size.is_static() && !table)
    return internal_error("cumsum: the size of dimension " + std::to_string(axis) + " has no known upper bound",
                          c.node().source);
  const int64_t most = size.is_static() ? size.static_value() : size.upper_bound(*table);
  for (int64_t shift = 1; shift < most; shift *= 2) {
    const Dim zeros = Dim::make(DimOp::kMin, size, Dim(shift));
    Shape zero_shape = c.value(out).shape;
    zero_shape[axis] = zeros;
    flat::ValueId earlier =
        c.concat({c.splat(0, dt, zero_shape), slice_prefix(c, out, axis, size - zeros)}, axis);
    out = c.ew(EwOp::kAdd, {out, earlier}, dt);
  }
  return narrow ? c.ew(EwOp::kConvert, {out}, io) : out;
}

// --- topk ---------------------------------------------------------------------------------------

// topk_values / topk_indices: the attrs.k largest along attrs.axis, descending; ties go to the
// lower index; NaN is larger than every number (as torch.topk).
Status infer_topk(InferCtx& ctx) {
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, scan_axis(ctx, "topk"));
  ctx.node.attrs.axis = axis;
  const Dim& size = ctx.shape(0)[axis];
  const int64_t k = ctx.node.attrs.k;
  if (k < 1 || (size.is_static() && k > size.static_value()))
    return ctx.error("topk: k must be an int in [1, " + size.str(ctx.node.symbols.get()) + "] for dimension " +
                     std::to_string(axis) + " of size " + size.str(ctx.node.symbols.get()) + ", but got: " +
                     std::to_string(k) + ".");
  Shape out = ctx.shape(0);
  out[axis] = k;
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.node.def->name == "topk_indices" ? DType::kInt32 : ctx.in()[0]->dtype;
  return ok_status();
}

double lowest_of(DType dt) {
  switch (dt) {
    case DType::kInt8: return std::numeric_limits<int8_t>::min();
    case DType::kInt32: return std::numeric_limits<int32_t>::min();
    case DType::kInt64: return static_cast<double>(std::numeric_limits<int64_t>::min());
    default: return -std::numeric_limits<double>::infinity();
  }
}

StatusOr<flat::ValueId> lower_topk(LowerCtx& c) {
  const int64_t axis = c.node().attrs.axis;
  const int64_t k = c.node().attrs.k;
  const flat::ValueId x = c.in(0);
  const Shape s = c.value(x).shape;
  const DType dt = c.value(x).dtype;
  const bool is_float = dtype_bit(dt) & kFloats;
  const SymbolTable* table = c.node().symbols.get();
  if (!s[axis].is_static() && !(table && provably_le(Dim(k), s[axis], *table)))
    c.check_equal(Dim::make(DimOp::kMax, s[axis], Dim(k)), s[axis],
                  "topk: k = " + std::to_string(k) + " is larger than dimension " + std::to_string(axis) +
                      " at run time.");
  flat::Op iota;
  iota.kind = flat::OpKind::kIota;
  iota.dims = {axis};
  const flat::ValueId index = c.emit(std::move(iota), DType::kInt32, s, "topk: each element's position");
  const flat::ValueId lowest = c.splat(lowest_of(dt), dt, s);
  const flat::ValueId past_end = c.splat(std::numeric_limits<int32_t>::max(), DType::kInt32, s);
  Shape kept = s;
  kept[axis] = 1;
  auto spread = [&](flat::ValueId reduced) {  // a reduced value back over the searched dim
    flat::Op op;
    op.kind = flat::OpKind::kBroadcast;
    op.operands = {reduced};
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      if (d != axis) op.dims.push_back(d);
    const DType rdt = c.value(reduced).dtype;
    return c.emit(std::move(op), rdt, s);
  };
  const bool want_indices = c.node().def->name == "topk_indices";
  std::vector<flat::ValueId> parts;
  flat::ValueId taken = -1;
  for (int64_t round = 0; round < k; ++round) {
    const flat::ValueId live = taken < 0 ? x : c.ew(EwOp::kSelect, {taken, lowest, x}, dt);
    const flat::ValueId best = c.reduce(EwOp::kReduceMax, live, {axis});
    flat::ValueId hit = c.ew(EwOp::kEq, {live, spread(best)}, DType::kBool);
    // max propagates NaN, and NaN equals nothing: a NaN is the largest value, as in torch.
    if (is_float) hit = c.ew(EwOp::kOr, {hit, c.ew(EwOp::kNe, {live, live}, DType::kBool)}, DType::kBool);
    // A taken element may equal `lowest`; only untaken ones count as hits.
    if (taken >= 0) hit = c.ew(EwOp::kAnd, {hit, c.ew(EwOp::kNot, {taken}, DType::kBool)}, DType::kBool);
    const flat::ValueId at =
        c.reduce(EwOp::kReduceMin, c.ew(EwOp::kSelect, {hit, index, past_end}, DType::kInt32), {axis});
    const flat::ValueId chosen = c.ew(EwOp::kEq, {index, spread(at)}, DType::kBool);
    taken = taken < 0 ? chosen : c.ew(EwOp::kOr, {taken, chosen}, DType::kBool);
    parts.push_back(c.reshape(want_indices ? at : best, kept));
  }
  return c.concat(std::move(parts), axis);
}

}  // namespace

void register_scan_ops() {
  register_op({"cumsum", "cumsum", 1, 1, {}, true, infer_cumsum, lower_cumsum, attr::axis, attr::axis});
  constexpr AttrSet kTopK = attr::k | attr::axis;
  register_op({"topk_values", "topk", 1, 1, {kNumbers}, true, infer_topk, lower_topk, kTopK, kTopK});
  register_op({"topk_indices", "topk", 1, 1, {kNumbers}, true, infer_topk, lower_topk, kTopK, kTopK});
}

}  // namespace tripy::trace

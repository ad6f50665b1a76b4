// Reduction Trace ops (sum, prod, max, min, mean, var, all, any, argmax, argmin) and the row
// composites built from them (softmax, log_softmax), lowered to FlatIR reduce + elementwise.
#include <algorithm>
#include <set>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

struct ReduceRow {
  const char* name;
  EwOp fn;
  DTypeSet dtypes;
};
constexpr ReduceRow kReduce[] = {
    {"sum", EwOp::kReduceSum, kNumbers}, {"prod", EwOp::kReduceProd, kNumbers},
    {"max", EwOp::kReduceMax, kNumbers}, {"min", EwOp::kReduceMin, kNumbers},
    {"all", EwOp::kReduceMin, kBool},    {"any", EwOp::kReduceMax, kBool},
};
const ReduceRow* reduce_row(const std::string& name) {
  for (const auto& r : kReduce)
    if (name == r.name) return &r;
  return nullptr;
}

// Normalises attrs.dims in place (empty means all dims) and rejects duplicates.
Status normalize_dims(InferCtx& ctx) {
  auto& dims = ctx.node.attrs.dims;
  int64_t rank = static_cast<int64_t>(ctx.shape(0).size());
  if (dims.empty())
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
  std::set<int64_t> seen;
  for (auto& d : dims) {
    TRIPY_ASSIGN_OR_RETURN(d, normalize_dim(ctx, d, rank));
    if (rank == 0) continue;
    if (!seen.insert(d).second)
      return ctx.error("Duplicate dimension " + std::to_string(d) + " in " + ctx.node.def->display + ".");
  }
  if (rank == 0) dims.clear();
  std::sort(dims.begin(), dims.end());
  return ok_status();
}

bool is_reduced(const std::vector<int64_t>& dims, size_t i) {
  return std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) != dims.end();
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_reduced(dims, i)) out.push_back(in[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// max, min, argmax and argmin of no elements are undefined (numpy and torch raise too); sum,
// prod, all and any have an identity, mean and var give NaN as numpy's do.
bool needs_elements(const std::string& name) {
  return name == "max" || name == "min" || name == "argmax" || name == "argmin";
}

// Integer sums and products accumulate in int64 on every backend, so a result that fits the
// returned dtype is exact whatever the partial sums do. int32 and int64 keep their dtype (as in
// nvtripy, where a result that does not fit wraps); int8, which nvtripy's sum does not take,
// returns int64 as numpy and torch do, so a sum of a few hundred int8s does not wrap.
DType reduce_dtype(const std::string& name, DType in) {
  if (name == "argmax" || name == "argmin") return DType::kInt32;
  if ((name == "sum" || name == "prod") && in == DType::kInt8) return DType::kInt64;
  return in;
}

Status infer_reduce(InferCtx& ctx) {
  TRIPY_RETURN_IF_ERROR(normalize_dims(ctx));
  const std::string& n = ctx.node.def->name;
  if (needs_elements(n)) {
    for (int64_t d : ctx.node.attrs.dims) {
      const Dim& size = ctx.shape(0)[static_cast<size_t>(d)];
      if (size.is_static() && size.static_value() == 0)
        return ctx.error(n + " over dimension " + std::to_string(d) + ", which has size 0 (shape " +
                         shape_str(ctx.shape(0)) + "): the " + (n.find("max") != std::string::npos ? "maximum" : "minimum") +
                         " of no elements is undefined.");
    }
  }
  ctx.node.shape = reduced_shape(ctx.shape(0), ctx.node.attrs.dims, ctx.node.attrs.keepdim);
  ctx.node.dtype = reduce_dtype(n, ctx.in()[0]->dtype);
  return ok_status();
}

// A dynamic reduced dim that may be 0 at run time is checked there (max(d, 1) == d).
void check_nonempty(LowerCtx& c, flat::ValueId x, const std::vector<int64_t>& dims) {
  if (!needs_elements(c.node().def->name)) return;
  const Shape s = c.value(x).shape;
  const SymbolTable* table = c.node().symbols.get();
  for (int64_t d : dims) {
    const Dim& size = s[static_cast<size_t>(d)];
    if (size.is_static() || (table && provably_le(Dim(1), size, *table))) continue;
    c.check_equal(Dim::make(DimOp::kMax, size, Dim(1)), size,
                  c.node().def->name + " over dimension " + std::to_string(d) +
                      ", which has size 0 at run time: the result of no elements is undefined.");
  }
}

flat::ValueId keep_dims(LowerCtx& c, flat::ValueId v) {
  return c.node().attrs.keepdim ? c.reshape(v, c.node().shape) : v;
}

}  // namespace

// Broadcasts a reduced value back over the reduced dims of `full`.
flat::ValueId unreduce(LowerCtx& c, flat::ValueId v, const Shape& full, const std::vector<int64_t>& dims) {
  flat::Op op;
  op.kind = flat::OpKind::kBroadcast;
  op.operands = {v};
  for (size_t i = 0; i < full.size(); ++i)
    if (!is_reduced(dims, i)) op.dims.push_back(static_cast<int64_t>(i));
  DType dt = c.value(v).dtype;
  return c.emit(std::move(op), dt, full);
}

// The number of reduced elements as a value of `dt` (computed in the graph when dynamic).
static flat::ValueId reduced_count(LowerCtx& c, flat::ValueId x, const std::vector<int64_t>& dims, DType dt) {
  Shape s = c.value(x).shape;
  Dim n = 1;
  for (int64_t d : dims) n = n * s[d];
  if (n.is_static()) return c.scalar(static_cast<double>(n.static_value()), dt);
  return c.reduce(EwOp::kReduceSum, c.splat(1, dt, s), dims);
}

flat::ValueId mean_of(LowerCtx& c, flat::ValueId x, const std::vector<int64_t>& dims) {
  DType dt = c.value(x).dtype;
  flat::ValueId sum = c.reduce(EwOp::kReduceSum, x, dims);
  flat::ValueId n = c.broadcast_to(reduced_count(c, x, dims, dt), c.value(sum).shape, "");
  return c.ew(EwOp::kDiv, {sum, n}, dt);
}

namespace {

StatusOr<flat::ValueId> lower_reduce(LowerCtx& c) {
  const auto& dims = c.node().attrs.dims;
  check_nonempty(c, c.in(0), dims);
  flat::ValueId x = c.in(0);
  if (c.value(x).dtype != c.node().dtype) x = c.ew(EwOp::kConvert, {x}, c.node().dtype);  // int8 sums
  return keep_dims(c, c.reduce(reduce_row(c.node().def->name)->fn, x, dims));
}

// mean and var of float16 and bfloat16 are computed in float32 and rounded once, as numpy's are: the
// float16 sum of 60000 and 60000 is already inf, though their mean is not, and so is the sum of the
// squares of 200, -200 and 0, though their variance is 40000. (channels_last transposes a
// channels-last value before such a convert, so a global average stays one kernel.)
flat::ValueId widened(LowerCtx& c, flat::ValueId x) {
  const DType dt = c.value(x).dtype;
  return dt == DType::kFloat16 || dt == DType::kBFloat16 ? c.ew(EwOp::kConvert, {x}, DType::kFloat32) : x;
}
flat::ValueId narrowed(LowerCtx& c, flat::ValueId y) {
  return c.value(y).dtype == c.node().dtype ? y : c.ew(EwOp::kConvert, {y}, c.node().dtype);
}

StatusOr<flat::ValueId> lower_mean(LowerCtx& c) {
  return narrowed(c, keep_dims(c, mean_of(c, widened(c, c.in(0)), c.node().attrs.dims)));
}

flat::ValueId variance(LowerCtx& c, flat::ValueId x) {
  const auto& dims = c.node().attrs.dims;
  DType dt = c.value(x).dtype;
  Shape s = c.value(x).shape;
  flat::ValueId centered = c.ew(EwOp::kSub, {x, unreduce(c, mean_of(c, x, dims), s, dims)}, dt);
  flat::ValueId sq = c.reduce(EwOp::kReduceSum, c.ew(EwOp::kMul, {centered, centered}, dt), dims);
  flat::ValueId n = reduced_count(c, x, dims, dt);  // a scalar, or per row when dims are dynamic
  flat::ValueId correction = c.broadcast_to(c.scalar(c.node().attrs.correction, dt), c.value(n).shape, "");
  // max(N - correction, 0), as numpy and torch: no degrees of freedom left gives 0/0 = NaN (or
  // x/0 = inf), never a negative variance.
  flat::ValueId zero = c.broadcast_to(c.scalar(0, dt), c.value(n).shape, "");
  flat::ValueId denom = c.ew(EwOp::kMax, {c.ew(EwOp::kSub, {n, correction}, dt), zero}, dt);
  return c.ew(EwOp::kDiv, {sq, c.broadcast_to(denom, c.value(sq).shape, "")}, dt);
}

// var = sum((x - mean)^2) / max(N - correction, 0): two passes, as E[x^2] - E[x]^2 would cancel
// every digit of a small variance of large values.
StatusOr<flat::ValueId> lower_var(LowerCtx& c) {
  return narrowed(c, keep_dims(c, variance(c, widened(c, c.in(0)))));
}

// argmax = the smallest index whose value equals the max. Max and min propagate NaN, so a row
// with a NaN has a NaN extreme, which equals nothing: there the first NaN is the hit, as in numpy.
StatusOr<flat::ValueId> lower_arg(LowerCtx& c) {
  const auto& dims = c.node().attrs.dims;
  flat::ValueId x = c.in(0);
  check_nonempty(c, x, dims);
  Shape s = c.value(x).shape;
  bool is_max = c.node().def->name == "argmax";
  flat::ValueId best = unreduce(c, c.reduce(is_max ? EwOp::kReduceMax : EwOp::kReduceMin, x, dims), s, dims);
  // Flattened index over the reduced dims: sum of iota(d) * stride(d).
  flat::ValueId index = c.splat(0, DType::kInt32, s);
  Dim stride = 1;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    flat::Op iota;
    iota.kind = flat::OpKind::kIota;
    iota.dims = {*it};
    flat::ValueId i = c.emit(std::move(iota), DType::kInt32, s);
    flat::ValueId term = i;
    if (!stride.is_static())
      return invalid_argument(c.node().def->display + " over several dynamic dims is not supported.", c.node().source);
    if (stride.static_value() != 1)
      term = c.ew(EwOp::kMul, {i, c.splat(static_cast<double>(stride.static_value()), DType::kInt32, s)}, DType::kInt32);
    index = c.ew(EwOp::kAdd, {index, term}, DType::kInt32);
    stride = stride * s[*it];
  }
  flat::ValueId hit = c.ew(EwOp::kEq, {x, best}, DType::kBool);
  if (is_floating(c.value(x).dtype))
    hit = c.ew(EwOp::kOr, {hit, c.ew(EwOp::kNe, {x, x}, DType::kBool)}, DType::kBool);
  flat::ValueId big = c.splat(2147483647.0, DType::kInt32, s);
  flat::ValueId cand = c.ew(EwOp::kSelect, {hit, index, big}, DType::kInt32);
  return keep_dims(c, c.reduce(EwOp::kReduceMin, cand, dims));
}

Status infer_softmax(InferCtx& ctx) {
  // No dim (None in Python) means all dims: softmax over the flattened input, as nvtripy documents.
  if (ctx.node.attrs.dims.size() > 1)
    return ctx.error(ctx.node.def->display + " takes one dim, or None for all dims.");
  TRIPY_RETURN_IF_ERROR(normalize_dims(ctx));
  ctx.node.dtype = ctx.in()[0]->dtype;
  ctx.node.shape = ctx.shape(0);
  return ok_status();
}

// The pieces softmax and log_softmax share, in float32 for narrow floats (the sum of a 128K-entry
// row of exps can pass float16's 65504): x - max along the dim, and sum(exp(x - max)) broadcast
// back over it. Subtracting the max keeps every exp at most 1, so none overflows.
struct Shifted {
  flat::ValueId shifted, exps, sum_exp;
};
Shifted shifted_exps(LowerCtx& c, flat::ValueId x) {
  const auto& dims = c.node().attrs.dims;
  const DType dt = DType::kFloat32;
  Shape s = c.value(x).shape;
  flat::ValueId m = unreduce(c, c.reduce(EwOp::kReduceMax, x, dims), s, dims);
  flat::ValueId shifted = c.ew(EwOp::kSub, {x, m}, dt);
  flat::ValueId exps = c.ew(EwOp::kExp, {shifted}, dt);
  return {shifted, exps, unreduce(c, c.reduce(EwOp::kReduceSum, exps, dims), s, dims)};
}

// softmax = exp(x - max) / sum(exp(x - max)) along the dim.
StatusOr<flat::ValueId> lower_softmax(LowerCtx& c) {
  const DType io = c.value(c.in(0)).dtype, dt = DType::kFloat32;
  flat::ValueId x = io == dt ? c.in(0) : c.ew(EwOp::kConvert, {c.in(0)}, dt);
  Shifted p = shifted_exps(c, x);
  flat::ValueId y = c.ew(EwOp::kDiv, {p.exps, p.sum_exp}, dt);
  return io == dt ? y : c.ew(EwOp::kConvert, {y}, io);
}

// log_softmax = (x - max) - log(sum(exp(x - max))): log(softmax(x)) would round the small
// probabilities to 0 and give -inf where the answer is a finite -1000.
StatusOr<flat::ValueId> lower_log_softmax(LowerCtx& c) {
  const DType io = c.value(c.in(0)).dtype, dt = DType::kFloat32;
  flat::ValueId x = io == dt ? c.in(0) : c.ew(EwOp::kConvert, {c.in(0)}, dt);
  Shifted p = shifted_exps(c, x);
  flat::ValueId y = c.ew(EwOp::kSub, {p.shifted, c.ew(EwOp::kLog, {p.sum_exp}, dt)}, dt);
  return io == dt ? y : c.ew(EwOp::kConvert, {y}, io);
}

}  // namespace

void register_reduce_ops() {
  constexpr AttrSet kReduceAttrs = attr::dims | attr::keepdim;  // no dims: every dim
  for (const auto& r : kReduce) register_op({r.name, r.name, 1, 1, {r.dtypes}, true, infer_reduce, lower_reduce, kReduceAttrs});
  register_op({"mean", "mean", 1, 1, {kFloats}, true, infer_reduce, lower_mean, kReduceAttrs});
  register_op({"var", "var", 1, 1, {kFloats}, true, infer_reduce, lower_var, kReduceAttrs | attr::correction});
  register_op({"argmax", "argmax", 1, 1, {kNumbers}, true, infer_reduce, lower_arg, kReduceAttrs});
  register_op({"argmin", "argmin", 1, 1, {kNumbers}, true, infer_reduce, lower_arg, kReduceAttrs});
  register_op({"softmax", "softmax", 1, 1, {kFloats}, true, infer_softmax, lower_softmax, attr::dims});
  register_op({"log_softmax", "log_softmax", 1, 1, {kFloats}, true, infer_softmax, lower_log_softmax, attr::dims});
}

}  // namespace tripy::trace

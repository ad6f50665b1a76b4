// Shape Trace ops: reshape, permute, squeeze, unsqueeze, expand, slice, concatenate, gather,
// update_slice.
// Their rules check sizes symbolically; lowering maps them to FlatIR layout primitives.
#include <algorithm>
#include <set>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

bool is_one(const Dim& d) { return d.is_static() && d.static_value() == 1; }

// reshape: attrs.shape, where a single static -1 is inferred from the element count.
Status infer_reshape(InferCtx& ctx) {
  Shape target = ctx.node.attrs.shape;
  const Shape& in = ctx.shape(0);
  int infer_at = -1;
  Dim known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_static() && target[i].static_value() == -1) {
      if (infer_at >= 0) return ctx.error("reshape: at most one dimension may be -1, got " + shape_str(target) + ".");
      infer_at = static_cast<int>(i);
    } else if (target[i].is_static() && target[i].static_value() < 0) {
      return ctx.error("reshape: invalid size " + std::to_string(target[i].static_value()) + " in " + shape_str(target) + ".");
    } else {
      known = known * target[i];
    }
  }
  Dim total = num_elements(in);
  if (infer_at >= 0) {
    if (known.is_static() && known.static_value() == 0) return ctx.error("reshape: cannot infer -1 with a zero-sized dim.");
    if (total.is_static() && known.is_static() && total.static_value() % known.static_value() != 0)
      return ctx.error("reshape: cannot reshape a tensor of shape " + shape_str(in) + " (" +
                       std::to_string(total.static_value()) + " elements) into " + shape_str(target) + ".");
    target[infer_at] = Dim::make(DimOp::kFloorDiv, total, known);
  } else if (total.is_static() && known.is_static() && total.static_value() != known.static_value()) {
    return ctx.error("reshape: cannot reshape a tensor of shape " + shape_str(in) + " (" +
                     std::to_string(total.static_value()) + " elements) into " + shape_str(target) + " (" +
                     std::to_string(known.static_value()) + " elements).");
  }
  ctx.node.shape = std::move(target);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// Element counts the rule could not compare (dynamic dims, a tp.DimensionSize in the target, an
// inferred -1 that must divide evenly) are compared at run time.
StatusOr<flat::ValueId> lower_reshape(LowerCtx& c) {
  const Shape& in = c.node().inputs[0]->shape;
  const Dim total = num_elements(in), wanted = num_elements(c.node().shape);
  if (!total.is_static() || !wanted.is_static()) {
    const SymbolTable* symbols = c.node().inputs[0]->symbols.get();
    c.check_equal(total, wanted,
                  "Incompatible sizes at run time for " + c.node().def->display + ": a tensor of shape " +
                      shape_str(in, symbols) + " cannot take the shape " + shape_str(c.node().shape, symbols) +
                      " (the number of elements must not change).");
  }
  return c.reshape(c.in(0), c.node().shape);
}

Status infer_permute(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  auto& perm = ctx.node.attrs.dims;
  if (perm.size() != in.size())
    return ctx.error("permute: the permutation has " + std::to_string(perm.size()) + " entries, but the input has rank " +
                     std::to_string(in.size()) + ".");
  std::set<int64_t> seen;
  Shape out;
  for (auto& p : perm) {
    TRIPY_ASSIGN_OR_RETURN(p, normalize_dim(ctx, p, static_cast<int64_t>(in.size())));
    if (!seen.insert(p).second) return ctx.error("permute: dimension " + std::to_string(p) + " appears twice.");
    out.push_back(in[p]);
  }
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_permute(LowerCtx& c) {
  const auto& perm = c.node().attrs.dims;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return c.in(0);
  flat::Op op;
  op.kind = flat::OpKind::kTranspose;
  op.operands = {c.in(0)};
  op.dims = perm;
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

Status infer_squeeze(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  std::set<int64_t> drop;
  for (auto& d : ctx.node.attrs.dims) {
    TRIPY_ASSIGN_OR_RETURN(d, normalize_dim(ctx, d, static_cast<int64_t>(in.size())));
    if (!is_one(in[d]))
      return ctx.error("squeeze: dimension " + std::to_string(d) + " has size " + in[d].str(ctx.node.symbols.get()) +
                       ", but only dimensions of size 1 can be squeezed.");
    drop.insert(d);
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop.count(static_cast<int64_t>(i))) out.push_back(in[i]);
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

Status infer_unsqueeze(InferCtx& ctx) {
  Shape out = ctx.shape(0);
  TRIPY_ASSIGN_OR_RETURN(int64_t d, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(out.size()) + 1));
  out.insert(out.begin() + d, Dim(1));
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// expand: attrs.shape; -1 keeps a dim; otherwise a dim must match or be 1.
Status infer_expand(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  Shape target = ctx.node.attrs.shape;
  if (target.size() < in.size())
    return ctx.error("expand: the target " + shape_str(target) + " has fewer dims than the input " + shape_str(in) + ".");
  size_t off = target.size() - in.size();
  for (size_t i = 0; i < target.size(); ++i) {
    bool keep = target[i].is_static() && target[i].static_value() == -1;
    if (keep) {
      if (i < off) return ctx.error("expand: -1 is not allowed for a new leading dimension.");
      target[i] = in[i - off];
    } else if (i >= off && !in[i - off].same_as(target[i]) && !is_one(in[i - off]) && in[i - off].is_static() &&
               target[i].is_static()) {
      return ctx.error("expand: dimension " + std::to_string(i) + " of size " + std::to_string(in[i - off].static_value()) +
                       " cannot be expanded to " + std::to_string(target[i].static_value()) + ".");
    }
  }
  ctx.node.shape = std::move(target);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_expand(LowerCtx& c) {
  return c.broadcast_to(c.in(0), c.node().shape, "");
}

// slice: attrs.starts/limits/steps per dim, already clamped by the frontend (Python rules).
Status infer_slice(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  const Attrs& a = ctx.node.attrs;
  if (a.starts.size() != in.size() || a.limits.size() != in.size() || a.steps.size() != in.size())
    return ctx.error("slice: expected " + std::to_string(in.size()) + " starts, limits and steps.");
  // The frontend marks "to the end of the dim" with a huge limit, so dynamic dims slice too.
  constexpr int64_t kToEnd = int64_t{1} << 62;
  Attrs& attrs = ctx.node.attrs;
  for (size_t i = 0; i < in.size(); ++i)
    if (attrs.limits[i].is_static() && attrs.limits[i].static_value() >= kToEnd) attrs.limits[i] = in[i];
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    const Dim& step = a.steps[i];
    if (!step.is_static() || step.static_value() == 0) return ctx.error("slice: step must be a nonzero integer.");
    int64_t st = step.static_value();
    Dim extent = st > 0 ? a.limits[i] - a.starts[i] : a.starts[i] - a.limits[i];
    Dim n = Dim::make(DimOp::kCeilDiv, extent, Dim(st > 0 ? st : -st));
    out.push_back(Dim::make(DimOp::kMax, n, Dim(0)));
  }
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_slice(LowerCtx& c) {
  const Attrs& a = c.node().attrs;
  flat::Op op;
  op.kind = flat::OpKind::kSlice;
  op.operands = {c.in(0)};
  op.starts = a.starts;
  op.limits = a.limits;
  op.steps = a.steps;
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

Status infer_concatenate(InferCtx& ctx) {
  const Shape& first = ctx.shape(0);
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(first.size())));
  ctx.node.attrs.axis = axis;
  Dim total = 0;
  for (size_t i = 0; i < ctx.in().size(); ++i) {
    const Shape& s = ctx.shape(static_cast<int>(i));
    if (s.size() != first.size())
      return ctx.error("concatenate: input " + std::to_string(i) + " has rank " + std::to_string(s.size()) +
                       ", but input 0 has rank " + std::to_string(first.size()) + ".");
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis && s[d].is_static() && first[d].is_static() && !s[d].same_as(first[d]))
        return ctx.error("concatenate: input " + std::to_string(i) + " has shape " + shape_str(s) +
                         ", which differs from input 0's " + shape_str(first) + " outside dimension " +
                         std::to_string(axis) + ".");
    total = total + s[axis];
  }
  Shape out = first;
  out[axis] = total;
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// Dims that differ only at run time (dynamic inputs) are checked there, by a message about the
// caller's arguments at the caller's line, as infer_concatenate's for static ones.
StatusOr<flat::ValueId> lower_concatenate(LowerCtx& c) {
  const int64_t axis = c.node().attrs.axis;
  const Shape first = c.value(c.in(0)).shape;
  for (size_t i = 1; i < c.node().inputs.size(); ++i) {
    const Shape s = c.value(c.in(static_cast<int>(i))).shape;
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != axis)
        c.check_equal(s[d], first[d], "concatenate: input " + std::to_string(i) + " differs from input 0 in dimension " +
                                          std::to_string(d) + "; inputs may differ only in dimension " +
                                          std::to_string(axis) + ".");
  }
  flat::Op op;
  op.kind = flat::OpKind::kConcatenate;
  for (size_t i = 0; i < c.node().inputs.size(); ++i) op.operands.push_back(c.in(static_cast<int>(i)));
  op.dims = {c.node().attrs.axis};
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

// gather(x, index) along attrs.axis: out = x.shape[:axis] + index.shape + x.shape[axis+1:].
Status infer_gather(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(in.size())));
  ctx.node.attrs.axis = axis;
  DType it = ctx.in()[1]->dtype;
  if (it != DType::kInt32 && it != DType::kInt64)
    return ctx.error("gather: indices must be int32 or int64, got " + std::string(dtype_name(it)) + ".");
  Shape out(in.begin(), in.begin() + axis);
  for (const auto& d : ctx.shape(1)) out.push_back(d);
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_gather(LowerCtx& c) {
  flat::Op op;
  op.kind = flat::OpKind::kGather;
  op.operands = {c.in(0), c.in(1)};
  op.dims = {c.node().attrs.axis};
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

// update_slice(x, update, start) along attrs.axis: x with update written at rows [start, start + n)
// of that axis, n = update.shape[axis]; start is an int scalar tensor read at run time, so a
// compiled decode step keeps one shape while the position moves (a start past the end is an
// error of the run). The other dims of update are x's.
Status infer_update_slice(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  const Shape& up = ctx.shape(1);
  const Shape& start = ctx.shape(2);
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(in.size())));
  ctx.node.attrs.axis = axis;
  if (ctx.in()[1]->dtype != ctx.in()[0]->dtype)
    return ctx.error("update_slice: the update has dtype " + std::string(dtype_name(ctx.in()[1]->dtype)) +
                     ", but the tensor it is written into has dtype " +
                     std::string(dtype_name(ctx.in()[0]->dtype)) + ".");
  const DType st = ctx.in()[2]->dtype;
  const bool one = start.empty() || (start.size() == 1 && start[0].is_static() && start[0].static_value() == 1);
  if ((st != DType::kInt32 && st != DType::kInt64) || !one)
    return ctx.error("update_slice: start must be an int32 or int64 tensor holding one value (shape () or (1,)), "
                     "but got dtype " + std::string(dtype_name(st)) + " and shape " + shape_str(start) + ".");
  if (up.size() != in.size())
    return ctx.error("update_slice: the update has rank " + std::to_string(up.size()) +
                     ", but the tensor it is written into has rank " + std::to_string(in.size()) + ".");
  for (size_t d = 0; d < in.size(); ++d) {
    if (!in[d].is_static() || !up[d].is_static()) continue;  // dynamic: checked at run time
    const bool along = static_cast<int64_t>(d) == axis;
    if (along ? up[d].static_value() > in[d].static_value() : !up[d].same_as(in[d]))
      return ctx.error("update_slice: an update of shape " + shape_str(up) + " does not fit into shape " +
                       shape_str(in) + " along dimension " + std::to_string(axis) +
                       (along ? ": it has more rows than that dimension." : ": the other dimensions must be equal."));
  }
  ctx.node.shape = in;
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_update_slice(LowerCtx& c) {
  const Shape& in = c.node().inputs[0]->shape;
  const Shape& up = c.node().inputs[1]->shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (static_cast<int64_t>(d) != c.node().attrs.axis)
      c.check_equal(up[d], in[d], "update_slice: dimension " + std::to_string(d) +
                                      " of the update differs from the tensor it is written into.");
  flat::ValueId start = c.in(2);
  if (!c.value(start).shape.empty()) start = c.reshape(start, {}, "update_slice reads its start as a scalar");
  flat::Op op;
  op.kind = flat::OpKind::kUpdateSlice;
  op.operands = {c.in(0), c.in(1), start};
  op.dims = {c.node().attrs.axis};
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

}  // namespace

void register_shape_ops() {
  constexpr AttrSet kSliceAttrs = attr::starts | attr::limits | attr::steps;
  register_op({"reshape", "reshape", 1, 1, {}, true, infer_reshape, lower_reshape, attr::shape, attr::shape});
  register_op({"permute", "permute", 1, 1, {}, true, infer_permute, lower_permute, attr::dims, attr::dims});
  register_op({"squeeze", "squeeze", 1, 1, {}, true, infer_squeeze, lower_reshape, attr::dims, attr::dims});
  register_op({"unsqueeze", "unsqueeze", 1, 1, {}, true, infer_unsqueeze, lower_reshape, attr::axis, attr::axis});
  register_op({"expand", "expand", 1, 1, {}, true, infer_expand, lower_expand, attr::shape, attr::shape});
  register_op({"slice", "slice", 1, 1, {}, true, infer_slice, lower_slice, kSliceAttrs, kSliceAttrs});
  register_op({"concatenate", "concatenate", 1, 1 << 20, {}, true, infer_concatenate, lower_concatenate,
               attr::axis, attr::axis});
  register_op({"gather", "gather", 2, 2, {}, false, infer_gather, lower_gather, attr::axis, attr::axis});
  register_op({"update_slice", "update_slice", 3, 3, {}, false, infer_update_slice, lower_update_slice,
               attr::axis, attr::axis});
}

}  // namespace tripy::trace

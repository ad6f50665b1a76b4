// Creation Trace ops: full (a splat of a scalar) and iota. Data tensors are data nodes, not ops.
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

Status check_shape(InferCtx& ctx) {
  for (const auto& d : ctx.node.attrs.shape)
    if (d.is_static() && d.static_value() < 0)
      return ctx.error(ctx.node.def->display + ": shape " + shape_str(ctx.node.attrs.shape) + " has a negative size.");
  ctx.node.shape = ctx.node.attrs.shape;
  ctx.node.dtype = ctx.node.attrs.dtype;
  return ok_status();
}

// full: integer values arrive exact (fill_int) and must fit the dtype; floats and bools in fill.
Status infer_full(InferCtx& ctx) {
  const Attrs& a = ctx.node.attrs;
  TRIPY_RETURN_IF_ERROR(check_fill(ctx, a.dtype, "full"));
  // An integer scalar literal is also a size: d * 2 stays symbolic.
  if (a.shape.empty() && a.dtype == DType::kInt32) ctx.node.dim_value = Dim(a.fill_int);
  return check_shape(ctx);
}

StatusOr<flat::ValueId> lower_full(LowerCtx& c) { return c.splat_fill(c.node().dtype, c.node().shape); }

Status infer_iota(InferCtx& ctx) {
  TRIPY_RETURN_IF_ERROR(check_shape(ctx));
  TRIPY_ASSIGN_OR_RETURN(ctx.node.attrs.axis,
                         normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(ctx.node.shape.size())));
  if (ctx.node.shape.empty()) return ctx.error("iota: the shape must have at least one dimension.");
  return ok_status();
}

StatusOr<flat::ValueId> lower_iota(LowerCtx& c) {
  flat::Op op;
  op.kind = flat::OpKind::kIota;
  op.dims = {c.node().attrs.axis};
  // Integer and float iotas are generated directly; others through float32.
  DType dt = c.node().dtype;
  bool direct = dt == DType::kFloat32 || dt == DType::kInt32 || dt == DType::kInt64;
  flat::ValueId v = c.emit(std::move(op), direct ? dt : DType::kFloat32, c.node().shape);
  return direct ? v : c.ew(EwOp::kConvert, {v}, dt);
}

// shape_dim: the size of dim `axis` of the input, as a scalar int32 (tp.DimensionSize).
Status infer_shape_dim(InferCtx& ctx) {
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(ctx.shape(0).size())));
  ctx.node.attrs.axis = axis;
  ctx.node.dtype = DType::kInt32;
  ctx.node.shape = {};
  ctx.node.dim_value = ctx.shape(0)[axis];
  return ok_status();
}

// The value is computed from the input's run-time shape (a constant when the dim is static).
StatusOr<flat::ValueId> lower_shape_dim(LowerCtx& c) { return c.size_value(*c.node().dim_value); }

}  // namespace

void register_creation_ops() {
  register_op({"shape_dim", "shape", 1, 1, {}, false, infer_shape_dim, lower_shape_dim, attr::axis, attr::axis});
  register_op({"full", "full", 0, 0, {}, true, infer_full, lower_full,
                attr::shape | attr::fill | attr::fill_int | attr::dtype | attr::device, attr::shape | attr::dtype});
  register_op({"iota", "iota", 0, 0, {}, true, infer_iota, lower_iota,
                attr::shape | attr::axis | attr::dtype | attr::device, attr::shape | attr::axis | attr::dtype});
}

}  // namespace tripy::trace

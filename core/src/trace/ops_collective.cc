// The collective Trace ops (tp.all_reduce, tp.all_gather: what sharded layers insert between the
// ranks of a tp.DeviceMesh; and tp.reduce_scatter): their checks, shape rules and lowering to one
// FlatIR kernel op of kind collective (rt::CollectiveAttrs). The mesh's size is an attribute, so
// each rank's program is checked against the communicator it runs with.
#include <string>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

Status check_world(InferCtx& ctx, const char* what) {
  const rt::CollectiveAttrs& a = ctx.node.attrs.collective;
  if (a.world_size < 1 || a.world_size > rt::kMaxWorldSize)
    return ctx.error(std::string(what) + ": the world size must be in [1, " + std::to_string(rt::kMaxWorldSize) +
                     "], but got " + std::to_string(a.world_size) + ".");
  return ok_status();
}

Status infer_all_reduce(InferCtx& ctx) {
  TRIPY_RETURN_IF_ERROR(check_world(ctx, "all_reduce"));
  ctx.node.attrs.collective.op = rt::CollectiveAttrs::Op::kAllReduce;
  ctx.node.attrs.collective.axis = 0;
  ctx.node.shape = ctx.shape(0);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// all_gather's and reduce_scatter's op, world and axis (in range, made non-negative).
Status check_axis(InferCtx& ctx, rt::CollectiveAttrs::Op op, const std::string& what) {
  TRIPY_RETURN_IF_ERROR(check_world(ctx, what.c_str()));
  rt::CollectiveAttrs& a = ctx.node.attrs.collective;
  a.op = op;
  const int64_t rank = static_cast<int64_t>(ctx.shape(0).size());
  if (rank == 0) return ctx.error(what + ": the input must have rank >= 1, but it is a scalar.");
  if (a.axis < -rank || a.axis >= rank)
    return ctx.error(what + ": dim " + std::to_string(a.axis) + " is out of range for a tensor of rank " +
                     std::to_string(rank) + ".");
  if (a.axis < 0) a.axis += rank;
  return ok_status();
}

Status infer_all_gather(InferCtx& ctx) {
  TRIPY_RETURN_IF_ERROR(check_axis(ctx, rt::CollectiveAttrs::Op::kAllGather, "all_gather"));
  const rt::CollectiveAttrs& a = ctx.node.attrs.collective;
  const Shape& x = ctx.shape(0);
  ctx.node.shape = x;
  ctx.node.shape[static_cast<size_t>(a.axis)] = x[static_cast<size_t>(a.axis)] * Dim(a.world_size);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// A dynamic dim that is not a multiple of the world size fails when the rank runs (lower_collective).
Status infer_reduce_scatter(InferCtx& ctx) {
  TRIPY_RETURN_IF_ERROR(check_axis(ctx, rt::CollectiveAttrs::Op::kReduceScatter, "reduce_scatter"));
  const rt::CollectiveAttrs& a = ctx.node.attrs.collective;
  const Shape& x = ctx.shape(0);
  const Dim& d = x[static_cast<size_t>(a.axis)];
  if (d.is_static() && d.static_value() % a.world_size != 0)
    return ctx.error("reduce_scatter: dim " + std::to_string(a.axis) + " has size " + std::to_string(d.static_value()) +
                     ", which does not split into " + std::to_string(a.world_size) + " equal parts, one per rank.");
  ctx.node.shape = x;
  ctx.node.shape[static_cast<size_t>(a.axis)] = Dim::make(DimOp::kFloorDiv, d, Dim(a.world_size));
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_collective(LowerCtx& c) {
  const rt::CollectiveAttrs& a = c.node().attrs.collective;
  if (a.op == rt::CollectiveAttrs::Op::kReduceScatter) {  // a dynamic dim's split, checked when the rank runs
    const Dim& d = c.node().inputs[0]->shape[static_cast<size_t>(a.axis)];
    c.check_equal(Dim::make(DimOp::kFloorDiv, d, Dim(a.world_size)) * Dim(a.world_size), d,
                  "reduce_scatter: dim " + std::to_string(a.axis) + " does not split into " +
                      std::to_string(a.world_size) + " equal parts, one per rank: its size (the second below) is not a multiple of " +
                      std::to_string(a.world_size) + ".");
  }
  flat::Op op;
  op.kind = flat::OpKind::kKernel;
  op.kernel.kind = rt::KernelKind::kCollective;
  op.kernel.collective = c.node().attrs.collective;
  op.operands = {c.in(0)};
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

}  // namespace

void register_collective_ops() {
  const DTypeSet sums = kFloats | dtype_bit(DType::kInt32) | dtype_bit(DType::kInt64);
  register_op({"all_reduce", "all_reduce", 1, 1, {sums}, true, infer_all_reduce, lower_collective, attr::collective, 0});
  register_op({"all_gather", "all_gather", 1, 1, {kAny}, true, infer_all_gather, lower_collective, attr::collective, 0});
  register_op({"reduce_scatter", "reduce_scatter", 1, 1, {sums}, true, infer_reduce_scatter, lower_collective, attr::collective, 0});
}

}  // namespace tripy::trace

// matmul with numpy rules: 1-D operands gain (and then lose) a unit dim, batch dims broadcast.
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

Status infer_matmul(InferCtx& ctx) {
  Shape a = ctx.shape(0), b = ctx.shape(1);
  if (a.empty() || b.empty()) return ctx.error("matmul: operands must have at least one dimension, got shapes " +
                                               shape_str(a) + " and " + shape_str(b) + ".");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim(1));
  if (b_vec) b.push_back(Dim(1));
  const Dim& k_a = a.back();
  const Dim& k_b = b[b.size() - 2];
  if (k_a.is_static() && k_b.is_static() && k_a.static_value() != k_b.static_value()) {
    Status st = ctx.error("Incompatible shapes for matmul: " + shape_str(ctx.shape(0)) + " @ " + shape_str(ctx.shape(1)) +
                          ": the contracted dimensions have sizes " + std::to_string(k_a.static_value()) + " and " +
                          std::to_string(k_b.static_value()) + ".");
    for (int j : {0, 1}) st.note("Input " + std::to_string(j) + ":", ctx.in()[j]->source);
    return st;
  }
  Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  TRIPY_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(ctx, batch_a, batch_b));
  Shape out = batch;
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_matmul(LowerCtx& c) {
  flat::ValueId a = c.in(0), b = c.in(1);
  Shape sa = c.value(a).shape, sb = c.value(b).shape;
  if (sa.size() == 1) sa.insert(sa.begin(), Dim(1));
  if (sb.size() == 1) sb.push_back(Dim(1));
  // Equal ranks: pad the lower-rank operand's batch dims with leading 1s.
  while (sa.size() < sb.size()) sa.insert(sa.begin(), Dim(1));
  while (sb.size() < sa.size() && sa.size() > 2 && sb.size() > 2) sb.insert(sb.begin(), Dim(1));
  a = c.reshape(a, sa);
  b = c.reshape(b, sb);
  c.check_equal(sa.back(), sb[sb.size() - 2], "Incompatible sizes at run time for '@': the contracted dimensions differ.");
  Shape batch;
  size_t nb = sa.size() - 2;
  for (size_t i = 0; i < nb; ++i) {
    const Dim& x = sa[i];
    const Dim* y = sb.size() == sa.size() ? &sb[i] : nullptr;
    // Dynamic batch dims must broadcast against each other: checked when the sizes are known,
    // at the '@' that multiplies them.
    if (y && !x.same_as(*y) && !(x.is_static() && x.static_value() == 1) && !(y->is_static() && y->static_value() == 1))
      c.check_broadcast(x, *y, "Incompatible sizes at run time for '@': batch dimension " + std::to_string(i) +
                                   " must be broadcastable (equal, or 1).");
    batch.push_back(!y || x.same_as(*y) || (y->is_static() && y->static_value() == 1)
                        ? x
                        : (x.is_static() && x.static_value() == 1 ? *y : Dim::make(DimOp::kMax, x, *y)));
  }
  Shape out = batch;
  out.push_back(sa[sa.size() - 2]);
  out.push_back(sb.back());
  flat::Op op;
  op.kind = flat::OpKind::kDot;
  op.operands = {a, b};
  flat::ValueId r = c.emit(std::move(op), c.node().dtype, out);
  return c.reshape(r, c.node().shape);
}

}  // namespace

void register_matmul_ops() {
  register_op({"matmul", "'@'", 2, 2, {kFloats}, true, infer_matmul, lower_matmul});
}

}  // namespace tripy::trace

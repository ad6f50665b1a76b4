// Elementwise Trace ops: the one-primitive ops the primitive table names (dtype rule, display
// name, FlatIR function; gelu and silu among them, so fusion sees them as what they are),
// composites written with primitives (relu), where and cast.
#include <cmath>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

// The Trace ops that are one primitive each come from the primitive table (runtime/ew_ops.def):
// a row with an API name is tp.<api>, with that row's dtype rule and display name.
DTypeSet api_dtypes(rt::ApiDTypes d) {
  switch (d) {
    case rt::ApiDTypes::kFloats: return kFloats;
    case rt::ApiDTypes::kNumbers: return kNumbers;
    case rt::ApiDTypes::kBool: return kBool;
    case rt::ApiDTypes::kAny: return kAny;
    case rt::ApiDTypes::kNone: break;
  }
  return 0;
}

// The table row whose API name is `name` (the node's op), or nullptr.
const rt::EwOpInfo* api_row(const std::string& name) {
  for (const rt::EwOpInfo& r : rt::kEwOps)
    if (r.api && name == r.api) return &r;
  return nullptr;
}

Status infer_same(InferCtx& ctx) {
  ctx.node.dtype = ctx.in()[0]->dtype;
  ctx.node.shape = ctx.shape(0);
  return ok_status();
}

StatusOr<flat::ValueId> lower_unary(LowerCtx& c) {
  return c.ew(api_row(c.node().def->name)->op, {c.in(0)}, c.node().dtype);
}

// Size arithmetic (DimensionSize op DimensionSize or int) keeps the symbolic value.
std::optional<Dim> dim_arith(const std::string& op, const Node& a, const Node& b) {
  if (!a.dim_value || !b.dim_value) return std::nullopt;
  const Dim &x = *a.dim_value, &y = *b.dim_value;
  if (op == "add") return x + y;
  if (op == "sub") return x - y;
  if (op == "mul") return x * y;
  if (op == "floor_div") return Dim::make(DimOp::kFloorDiv, x, y);
  if (op == "maximum") return Dim::make(DimOp::kMax, x, y);
  if (op == "minimum") return Dim::make(DimOp::kMin, x, y);
  return std::nullopt;
}

// Binary and comparison ops share their shape rule; a comparison's result is bool. Two rules
// rather than one that looks its row up by name: every eager `a + b` runs this.
Status infer_binary_as(InferCtx& ctx, DType dtype) {
  TRIPY_ASSIGN_OR_RETURN(ctx.node.shape, broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
  ctx.node.dtype = dtype;
  if (ctx.in()[0]->dim_value && ctx.in()[1]->dim_value)
    ctx.node.dim_value = dim_arith(ctx.node.def->name, *ctx.in()[0], *ctx.in()[1]);
  return ok_status();
}
Status infer_binary(InferCtx& ctx) { return infer_binary_as(ctx, ctx.in()[0]->dtype); }
Status infer_compare(InferCtx& ctx) { return infer_binary_as(ctx, DType::kBool); }

// Broadcasts each operand to the node's shape; inserted broadcasts say which operand and why.
std::vector<flat::ValueId> broadcast_operands(LowerCtx& c) {
  static const char* kSide[] = {"left", "right", "third"};
  std::vector<flat::ValueId> out;
  int n = static_cast<int>(c.node().inputs.size());
  for (int i = 0; i < n; ++i) {
    std::string side = n == 2 ? kSide[i] : "input " + std::to_string(i);
    std::string reason = "broadcast the " + side + " operand of " + c.node().def->display + " to a shape of " +
                         shape_str(c.node().shape, c.node().symbols.get());
    out.push_back(c.broadcast_to(c.in(i), c.node().shape, reason));
  }
  return out;
}

StatusOr<flat::ValueId> lower_binary(LowerCtx& c) {
  return c.ew(api_row(c.node().def->name)->op, broadcast_operands(c), c.node().dtype);
}

// relu(x) = max(x, 0)
StatusOr<flat::ValueId> lower_relu(LowerCtx& c) {
  DType dt = c.node().dtype;
  return c.ew(EwOp::kMax, {c.in(0), c.splat(0, dt, c.node().shape)}, dt);
}

Status infer_where(InferCtx& ctx) {
  TRIPY_ASSIGN_OR_RETURN(Shape ab, broadcast_shapes(ctx, ctx.shape(1), ctx.shape(2)));
  TRIPY_ASSIGN_OR_RETURN(ctx.node.shape, broadcast_shapes(ctx, ctx.shape(0), ab));
  if (ctx.in()[1]->dtype != ctx.in()[2]->dtype)
    return ctx.error("Mismatched data types for where: " + std::string(dtype_name(ctx.in()[1]->dtype)) +
                     " and " + std::string(dtype_name(ctx.in()[2]->dtype)) + ".");
  ctx.node.dtype = ctx.in()[1]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_where(LowerCtx& c) {
  auto ops = broadcast_operands(c);
  return c.ew(EwOp::kSelect, ops, c.node().dtype);
}

Status infer_cast(InferCtx& ctx) {
  ctx.node.dtype = ctx.node.attrs.dtype;
  ctx.node.shape = ctx.shape(0);
  return ok_status();
}

StatusOr<flat::ValueId> lower_cast(LowerCtx& c) {
  if (c.value(c.in(0)).dtype == c.node().dtype) return c.in(0);
  return c.ew(EwOp::kConvert, {c.in(0)}, c.node().dtype);
}

}  // namespace

void register_elementwise_ops() {
  for (const rt::EwOpInfo& r : rt::kEwOps) {
    if (!r.api) continue;
    const DTypeSet dtypes = api_dtypes(r.api_dtypes);
    if (r.form == rt::EwForm::kUnary) register_op({r.api, r.display, 1, 1, {dtypes}, true, infer_same, lower_unary});
    if (r.form == rt::EwForm::kBinary) register_op({r.api, r.display, 2, 2, {dtypes}, true, infer_binary, lower_binary});
    if (r.form == rt::EwForm::kCompare)
      register_op({r.api, r.display, 2, 2, {dtypes}, true, infer_compare, lower_binary});
  }
  register_op({"relu", "relu", 1, 1, {kNumbers}, true, infer_same, lower_relu});
  register_op({"where", "where", 3, 3, {kBool, kAny}, false, infer_where, lower_where});
  register_op({"cast", "cast", 1, 1, {kAll}, true, infer_cast, lower_cast, attr::dtype, attr::dtype});
}

}  // namespace tripy::trace

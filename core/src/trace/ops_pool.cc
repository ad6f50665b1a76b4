// The pooling Trace op (max and average over 1-D to 3-D windows of (N, C, spatial...) tensors):
// its checks, its shape rule (flat::pool_result_shape, shared with the verifier) and its lowering
// to the one FlatIR pooling primitive, which backends run as one kernel. Spatial dims may be
// dynamic: the window must fit the smallest padded size.
#include <string>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

Status infer_pooling(InferCtx& ctx) {
  const rt::PoolingAttrs& a = ctx.node.attrs.pooling;
  const char* what = a.kind == rt::PoolingAttrs::Kind::kMax ? "maxpool" : "avgpool";
  const Shape& x = ctx.shape(0);
  const size_t nd = a.window.size();
  if (nd < 1 || nd > rt::kMaxConvSpatialDims)
    return ctx.error(std::string(what) + ": kernel_dims needs 1 to 3 entries, got " + std::to_string(nd) + ".");
  if (x.size() != nd + 2)
    return ctx.error(std::string(what) + ": a " + std::to_string(nd) + "-D window needs an input of rank " +
                     std::to_string(nd + 2) + " (N, C, spatial...), but the input has shape " + shape_str(x) + ".");
  if (a.stride.size() != nd || a.pad_before.size() != nd || a.pad_after.size() != nd)
    return ctx.error(std::string(what) + ": kernel_dims, stride and padding need one entry per spatial dim (" +
                     std::to_string(nd) + ").");
  for (size_t d = 0; d < nd; ++d)
    if (a.window[d] < 1 || a.stride[d] < 1 || a.pad_before[d] < 0 || a.pad_after[d] < 0)
      return ctx.error(std::string(what) + ": kernel sizes and strides must be positive and paddings non-negative, "
                       "but got kernel " + tuple_str(a.window) + ", stride " + tuple_str(a.stride) + ", padding " +
                       tuple_str(a.pad_before) + " / " + tuple_str(a.pad_after) + ".");
  if (!rt::pool_attrs_error(a, nd).empty())
    return ctx.error(std::string(what) + ": kernel sizes, strides and paddings must be at most 2^30 (" +
                     std::to_string(rt::kMaxConvAttr) + "), but got kernel " + tuple_str(a.window) + ", stride " +
                     tuple_str(a.stride) + ", padding " + tuple_str(a.pad_before) + " / " + tuple_str(a.pad_after) + ".");
  if (a.kind == rt::PoolingAttrs::Kind::kAvg && !(dtype_bit(ctx.in()[0]->dtype) & kFloats))
    return ctx.error(std::string("avgpool: expected a float tensor, but got dtype ") +
                     std::string(dtype_name(ctx.in()[0]->dtype)) + ".");
  // Dynamic sizes are checked at their smallest: the compiled program must work over the range.
  const SymbolTable* table = ctx.node.symbols.get();
  std::vector<int64_t> padded;
  bool too_large = false, dynamic = false;
  for (size_t d = 0; d < nd; ++d) {
    const Dim& n = x[d + 2];
    dynamic = dynamic || !n.is_static();
    const int64_t smallest = n.is_static() ? n.static_value() : table ? n.lower_bound(*table) : 1;
    padded.push_back(smallest + a.pad_before[d] + a.pad_after[d]);
    too_large = too_large || a.window[d] > padded.back();
  }
  if (too_large)
    return ctx.error(std::string(what) + ": the kernel " + tuple_str(a.window) + " is larger than the " +
                     (dynamic ? "smallest " : "") + "padded input's spatial size " + tuple_str(padded) + ".");
  ctx.node.shape = flat::pool_result_shape(x, a);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_pooling(LowerCtx& c) {
  flat::Op op;
  op.kind = flat::OpKind::kPooling;
  op.operands = {c.in(0)};
  op.pooling = c.node().attrs.pooling;
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

}  // namespace

void register_pool_ops() {
  register_op({"pooling", "pooling", 1, 1, {kFloats | kInts}, true, infer_pooling, lower_pooling, attr::pooling, attr::pooling});
}

}  // namespace tripy::trace

// quantize and dequantize: saturate(round(x / scale)) into int8/int4/float8, and q * scale back
// into a float dtype, with one scale per tensor (rank 0), per channel along attrs.dims[0] (1-D),
// or block-wise for int4 (2-D [D0 / block, D1] over a [D0, D1] input). The FlatIR they lower to
// is a contract: passes recognise dequantize as mul(convert(q), broadcast(scale)) and quantize as
// div, round, max, min, convert (flat/passes), so keep these forms when changing this file.
// Shapes are symbolic; a per-channel or block-wise scale that does not fit a dynamic dim is a
// run-time error naming the user's line.
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

bool is_quantized(DType t) { return t == DType::kInt8 || t == DType::kInt4 || t == DType::kFloat8E4M3; }

// The representable range each quantized dtype saturates to.
std::pair<double, double> range_of(DType t) {
  if (t == DType::kInt8) return {-128, 127};
  if (t == DType::kInt4) return {-8, 7};
  return {-448.0, 448.0};
}

// Checks the scale's form against the input (x = input 0, scale = input 1); `quantized` is the
// quantized dtype (only int4 takes block-wise scales).
Status check_scale(InferCtx& ctx, DType quantized) {
  const Shape& x = ctx.shape(0);
  const Shape& s = ctx.shape(1);
  const SymbolTable* table = ctx.node.symbols.get();
  auto& dims = ctx.node.attrs.dims;
  if (dims.size() > 1) return ctx.error("expected one dim for per-channel scales, or none.");
  if (dims.empty()) {
    if (s.size() == 2) {
      if (quantized != DType::kInt4)
        return ctx.error("Block-wise (2-D) scales are for int4 only, but the quantized dtype is " +
                         std::string(dtype_name(quantized)) + ".");
      if (x.size() != 2)
        return ctx.error("Block-wise quantization needs a 2-D input, but it has shape " + shape_str(x, table) + ".");
      if (is_static(x) && is_static(s) &&
          (x[0].static_value() % std::max<int64_t>(s[0].static_value(), 1) != 0 || s[0].static_value() == 0 ||
           s[1].static_value() != x[1].static_value()))
        return ctx.error("A block-wise scale of shape " + shape_str(s) + " does not fit an input of shape " +
                         shape_str(x) + ": its first dimension must divide the input's first and its second must "
                         "equal the input's second.");
      return ok_status();
    }
    if (!s.empty())
      return ctx.error("A per-tensor scale must be a scalar, but it has shape " + shape_str(s, table) +
                       "; pass dim for per-channel scales, or a 2-D scale for block-wise int4.");
    return ok_status();
  }
  const int64_t rank = static_cast<int64_t>(x.size());
  if (dims[0] < -rank || dims[0] >= rank)
    return ctx.error("dim " + std::to_string(dims[0]) + " is out of range for a tensor of rank " +
                     std::to_string(rank) + ".");
  if (dims[0] < 0) dims[0] += rank;
  if (s.size() != 1)
    return ctx.error("A per-channel scale must be 1-D, but it has shape " + shape_str(s, table) + ".");
  const Dim& n = x[dims[0]];
  if (s[0].is_static() && n.is_static() && s[0].static_value() != 1 && s[0].static_value() != n.static_value())
    return ctx.error("A per-channel scale of shape " + shape_str(s) + " does not fit dimension " +
                     std::to_string(dims[0]) + " of an input of shape " + shape_str(x) + ".");
  return ok_status();
}

// The scale as a value of x's shape: per tensor and per channel broadcast (a reshape first puts a
// channel scale on its dim); block-wise repeats each scale row over its block of input rows.
// `x` is taken by value: callers pass a graph value's shape, which the ops added here may move.
flat::ValueId aligned_scale(LowerCtx& c, const Shape x) {
  const flat::ValueId scale = c.in(1);
  const Shape s = c.value(scale).shape;
  const auto& dims = c.node().attrs.dims;
  if (!dims.empty()) {
    Shape channel(x.size(), Dim(1));
    channel[dims[0]] = s[0];
    return c.broadcast_to(c.reshape(scale, channel), x, "");
  }
  if (s.size() != 2) return c.broadcast_to(scale, x, "");
  const Dim per_block = Dim::make(DimOp::kFloorDiv, x[0], s[0]);
  c.check_equal(per_block * s[0], x[0], "A block-wise scale's first dimension must divide the input's first.");
  c.check_equal(s[1], x[1], "A block-wise scale's second dimension must equal the input's second.");
  flat::ValueId rows = c.reshape(scale, {s[0], Dim(1), s[1]});
  rows = c.broadcast_to(rows, {s[0], per_block, s[1]}, "repeat each scale row over its block of input rows");
  return c.reshape(rows, x);
}

Status infer_quantize(InferCtx& ctx) {
  const DType target = ctx.node.attrs.dtype;
  const DType in = ctx.in()[0]->dtype;
  if (!is_quantized(target))
    return ctx.error("quantize supports int8, int4 and float8, not " + std::string(dtype_name(target)) + ".");
  if (!(dtype_bit(in) & kFloats))
    return ctx.error("quantize takes a floating-point tensor, but got one of dtype " + std::string(dtype_name(in)) + ".");
  if (ctx.in()[1]->dtype != in)
    return ctx.error("quantize: the scale has dtype " + std::string(dtype_name(ctx.in()[1]->dtype)) +
                     ", but the input has dtype " + std::string(dtype_name(in)) + "; they must match.");
  TRIPY_RETURN_IF_ERROR(check_scale(ctx, target));
  ctx.node.shape = ctx.shape(0);
  ctx.node.dtype = target;
  return ok_status();
}

StatusOr<flat::ValueId> lower_quantize(LowerCtx& c) {
  const Shape x = c.value(c.in(0)).shape;
  const DType dt = c.value(c.in(0)).dtype;
  const DType target = c.node().dtype;
  flat::ValueId scaled = c.ew(EwOp::kDiv, {c.in(0), aligned_scale(c, x)}, dt);
  if (target != DType::kFloat8E4M3) scaled = c.ew(EwOp::kRound, {scaled}, dt);
  const auto [lo, hi] = range_of(target);
  scaled = c.ew(EwOp::kMax, {scaled, c.splat(lo, dt, x)}, dt);
  scaled = c.ew(EwOp::kMin, {scaled, c.splat(hi, dt, x)}, dt);
  return c.ew(EwOp::kConvert, {scaled}, target);
}

Status infer_dequantize(InferCtx& ctx) {
  const DType target = ctx.node.attrs.dtype;
  const DType in = ctx.in()[0]->dtype;
  if (!is_quantized(in))
    return ctx.error("dequantize takes an int8, int4 or float8 tensor, but got one of dtype " +
                     std::string(dtype_name(in)) + ".");
  if (!(dtype_bit(target) & kFloats))
    return ctx.error("dequantize returns a floating-point dtype, not " + std::string(dtype_name(target)) + ".");
  if (ctx.in()[1]->dtype != target)
    return ctx.error("dequantize: the scale has dtype " + std::string(dtype_name(ctx.in()[1]->dtype)) +
                     ", but the result has dtype " + std::string(dtype_name(target)) + "; they must match.");
  TRIPY_RETURN_IF_ERROR(check_scale(ctx, in));
  ctx.node.shape = ctx.shape(0);
  ctx.node.dtype = target;
  return ok_status();
}

StatusOr<flat::ValueId> lower_dequantize(LowerCtx& c) {
  const DType target = c.node().dtype;
  const flat::ValueId wide = c.ew(EwOp::kConvert, {c.in(0)}, target);
  return c.ew(EwOp::kMul, {wide, aligned_scale(c, c.value(c.in(0)).shape)}, target);
}

}  // namespace

void register_quantize_ops() {
  // dtype: the quantized (or the dequantized) dtype; dims: the per-channel dim, or none.
  register_op({"quantize", "quantize", 2, 2, {}, false, infer_quantize, lower_quantize, attr::dtype | attr::dims,
               attr::dtype | attr::dims});
  register_op({"dequantize", "dequantize", 2, 2, {}, false, infer_dequantize, lower_dequantize,
               attr::dtype | attr::dims, attr::dtype | attr::dims});
}

}  // namespace tripy::trace

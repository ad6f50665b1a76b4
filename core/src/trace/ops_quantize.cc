// quantize and dequantize: saturate(round(x / scale + zero_point)) into int8/int4/float8, and
// (q - zero_point) * scale back into a float dtype, with one scale per tensor (rank 0), per channel
// along attrs.dims[0] (1-D), or block-wise for int4 (2-D over a 2-D input: [D0 / block, D1], each
// scale row covering `block` input rows, or [D0, D1 / block], each scale column `block` input
// columns). The optional zero point (input 2) has the scale's form and dtype. The FlatIR they lower
// to is a contract: passes recognise dequantize as mul(convert(q), broadcast(scale)), with zero
// points mul(sub(convert(q), broadcast(zero_point)), broadcast(scale)), and quantize as div,
// (add,) round, max, min, convert (flat/passes), so keep these forms when changing this file.
// Shapes are symbolic; a per-channel or block-wise scale that does not fit a dynamic dim is a
// run-time error naming the user's line.
//
// unpack_int4 reads int4 values held two a byte (int8 [..., ceil(K / 2)]: k even in the low nibble,
// k odd in the high one, each nibble u meaning u - 8, the weight-only product's layout,
// rt::WeightOnlyDotAttrs) as an int4 tensor [..., K]. It is a view of its data: tp.compile keeps
// it an op over the packed constant instead of freezing its result (OpDef::view_of_data), so a
// model holds its int4 weights packed once and every executable reads those bytes. Its lowering is
// a contract too (flat::unpacked_int4 recognises it and hands the packed constant to the kernel):
//   convert<int4>(add(floordiv(broadcast(convert<int32>(P)), broadcast([1, 16])), 8)) -> reshape
//   [..., 2 * ceil(K / 2)] -> slice [..., :K] where K is odd
// (floor division by 16 of the signed byte leaves the high nibble minus 16 when it is 8 or more,
// which the int4 conversion's wrap-around takes back, as it does for the low nibble's byte + 8).
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

// Whether a 2-D scale [s0, s1] over a 2-D input [x0, x1] runs blocks along the input's dim 1
// ([x0, x1 / block]) rather than dim 0 ([x0 / block, x1]): only where its second dim cannot be the
// input's (static sizes that differ) while its first is. A scale of the input's own shape is read
// either way alike.
bool blocks_along_dim1(const Shape& x, const Shape& s) {
  return s[1].is_static() && x[1].is_static() && s[1].static_value() != x[1].static_value() && s[0].is_static() &&
         x[0].is_static() && s[0].static_value() == x[0].static_value();
}

// Checks the form of input `i` (1: the scale, 2: the zero point) against the input (x = input 0);
// `quantized` is the quantized dtype (only int4 takes block-wise scales).
Status check_scale(InferCtx& ctx, DType quantized, int i) {
  const Shape& x = ctx.shape(0);
  const Shape& s = ctx.shape(i);
  const char* what = i == 1 ? "scale" : "zero point";
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
      if (is_static(x) && is_static(s)) {
        const int64_t x0 = x[0].static_value(), x1 = x[1].static_value();
        const int64_t s0 = s[0].static_value(), s1 = s[1].static_value();
        const bool rows = s1 == x1 && s0 > 0 && x0 % s0 == 0, cols = s0 == x0 && s1 > 0 && x1 % s1 == 0;
        if (!rows && !cols)
          return ctx.error("A block-wise " + std::string(what) + " of shape " + shape_str(s) +
                           " does not fit an input of shape " + shape_str(x) +
                           ": it must be [D0 / block, D1] (blocks of input rows) or [D0, D1 / block] (blocks "
                           "of input columns) for an input [D0, D1], with the block dividing the dimension.");
      }
      return ok_status();
    }
    if (!s.empty())
      return ctx.error("A per-tensor " + std::string(what) + " must be a scalar, but it has shape " +
                       shape_str(s, table) + "; pass dim for per-channel scales, or a 2-D scale for block-wise int4.");
    return ok_status();
  }
  const int64_t rank = static_cast<int64_t>(x.size());
  if (dims[0] < -rank || dims[0] >= rank)
    return ctx.error("dim " + std::to_string(dims[0]) + " is out of range for a tensor of rank " +
                     std::to_string(rank) + ".");
  if (dims[0] < 0) dims[0] += rank;
  if (s.size() != 1)
    return ctx.error("A per-channel " + std::string(what) + " must be 1-D, but it has shape " + shape_str(s, table) + ".");
  const Dim& n = x[dims[0]];
  if (s[0].is_static() && n.is_static() && s[0].static_value() != 1 && s[0].static_value() != n.static_value())
    return ctx.error("A per-channel " + std::string(what) + " of shape " + shape_str(s) + " does not fit dimension " +
                     std::to_string(dims[0]) + " of an input of shape " + shape_str(x) + ".");
  return ok_status();
}

// The zero point, where given: the scale's shape and dtype.
Status check_zero_point(InferCtx& ctx, DType quantized) {
  if (ctx.in().size() < 3) return ok_status();
  const DType scale_t = ctx.in()[1]->dtype, zero_t = ctx.in()[2]->dtype;
  if (zero_t != scale_t)
    return ctx.error("The zero point has dtype " + std::string(dtype_name(zero_t)) + ", but the scale has dtype " +
                     std::string(dtype_name(scale_t)) + "; they must match.");
  const Shape& s = ctx.shape(1);
  const Shape& z = ctx.shape(2);
  if (is_static(s) && is_static(z) && static_dims(s) != static_dims(z))
    return ctx.error("The zero point has shape " + shape_str(z) + ", but the scale has shape " + shape_str(s) +
                     "; they must match.");
  return check_scale(ctx, quantized, 2);
}

// Input `i` (the scale, or the zero point) as a value of x's shape: per tensor and per channel
// broadcast (a reshape first puts a channel scale on its dim); block-wise repeats each scale row
// over its block of input rows (or each scale column over its block of input columns).
// `x` is taken by value: callers pass a graph value's shape, which the ops added here may move.
flat::ValueId aligned_scale(LowerCtx& c, const Shape x, int i = 1) {
  const flat::ValueId scale = c.in(i);
  const Shape s = c.value(scale).shape;
  const auto& dims = c.node().attrs.dims;
  if (!dims.empty()) {
    Shape channel(x.size(), Dim(1));
    channel[dims[0]] = s[0];
    return c.broadcast_to(c.reshape(scale, channel), x, "");
  }
  if (s.size() != 2) return c.broadcast_to(scale, x, "");
  if (blocks_along_dim1(x, s)) {
    const Dim per_block = Dim::make(DimOp::kFloorDiv, x[1], s[1]);
    c.check_equal(per_block * s[1], x[1], "A block-wise scale's second dimension must divide the input's second.");
    flat::ValueId cols = c.reshape(scale, {s[0], s[1], Dim(1)});
    cols = c.broadcast_to(cols, {s[0], s[1], per_block}, "repeat each scale column over its block of input columns");
    return c.reshape(cols, x);
  }
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
  TRIPY_RETURN_IF_ERROR(check_scale(ctx, target, 1));
  TRIPY_RETURN_IF_ERROR(check_zero_point(ctx, target));
  ctx.node.shape = ctx.shape(0);
  ctx.node.dtype = target;
  return ok_status();
}

StatusOr<flat::ValueId> lower_quantize(LowerCtx& c) {
  const Shape x = c.value(c.in(0)).shape;
  const DType dt = c.value(c.in(0)).dtype;
  const DType target = c.node().dtype;
  flat::ValueId scaled = c.ew(EwOp::kDiv, {c.in(0), aligned_scale(c, x)}, dt);
  if (c.node().inputs.size() > 2) scaled = c.ew(EwOp::kAdd, {scaled, aligned_scale(c, x, 2)}, dt);
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
  TRIPY_RETURN_IF_ERROR(check_scale(ctx, in, 1));
  TRIPY_RETURN_IF_ERROR(check_zero_point(ctx, in));
  ctx.node.shape = ctx.shape(0);
  ctx.node.dtype = target;
  return ok_status();
}

StatusOr<flat::ValueId> lower_dequantize(LowerCtx& c) {
  const DType target = c.node().dtype;
  const Shape x = c.value(c.in(0)).shape;
  flat::ValueId wide = c.ew(EwOp::kConvert, {c.in(0)}, target);
  if (c.node().inputs.size() > 2) wide = c.ew(EwOp::kSub, {wide, aligned_scale(c, x, 2)}, target);
  return c.ew(EwOp::kMul, {wide, aligned_scale(c, x)}, target);
}

Status infer_unpack_int4(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  const Shape& out = ctx.node.attrs.shape;
  const SymbolTable* table = ctx.node.symbols.get();
  if (in.empty() || !in.back().is_static())
    return ctx.error("unpack_int4 takes int8 bytes of rank >= 1 with a static last dim, but got shape " +
                     shape_str(in, table) + ".");
  bool fits = out.size() == in.size() && out.back().is_static() && out.back().static_value() >= 0 &&
              (out.back().static_value() + 1) / 2 == in.back().static_value();
  for (size_t d = 0; fits && d + 1 < in.size(); ++d) fits = out[d].same_as(in[d]);
  if (!fits)
    return ctx.error("unpack_int4: bytes of shape " + shape_str(in, table) + " hold two int4 values each along the last dim, "
                     "so they cannot unpack to shape " + shape_str(out, table) + ".");
  ctx.node.shape = out;
  ctx.node.dtype = DType::kInt4;
  return ok_status();
}

StatusOr<flat::ValueId> lower_unpack_int4(LowerCtx& c) {
  const Shape in = c.value(c.in(0)).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t bytes = in.back().static_value(), K = c.node().shape.back().static_value();
  Shape pairs = in;
  pairs.push_back(Dim(2));
  flat::Op spread;  // each byte twice, along a new last dim
  spread.kind = flat::OpKind::kBroadcast;
  spread.operands = {c.ew(EwOp::kConvert, {c.in(0)}, DType::kInt32)};
  for (int64_t d = 0; d < rank; ++d) spread.dims.push_back(d);
  const flat::ValueId wide = c.emit(std::move(spread), DType::kInt32, pairs);
  flat::Op divisors;
  divisors.kind = flat::OpKind::kConstant;
  divisors.constant = Tensor::empty_host(DType::kInt32, {2});
  static_cast<int32_t*>(divisors.constant.data())[0] = 1;
  static_cast<int32_t*>(divisors.constant.data())[1] = 16;
  const flat::ValueId d = c.broadcast_to(c.emit(std::move(divisors), DType::kInt32, {Dim(2)}), pairs, "");
  flat::ValueId v = c.ew(EwOp::kFloorDiv, {wide, d}, DType::kInt32);
  v = c.ew(EwOp::kAdd, {v, c.splat(8, DType::kInt32, pairs)}, DType::kInt32);
  v = c.ew(EwOp::kConvert, {v}, DType::kInt4);
  Shape flat_shape(in.begin(), in.end() - 1);
  flat_shape.push_back(Dim(2 * bytes));
  v = c.reshape(v, flat_shape);
  if (K == 2 * bytes) return v;
  flat::Op slice;
  slice.kind = flat::OpKind::kSlice;
  slice.operands = {v};
  for (int64_t i = 0; i < rank; ++i) {
    slice.starts.push_back(Dim(0));
    slice.limits.push_back(i + 1 < rank ? flat_shape[i] : Dim(K));
    slice.steps.push_back(Dim(1));
  }
  return c.emit(std::move(slice), DType::kInt4, c.node().shape);
}

}  // namespace

void register_quantize_ops() {
  // Inputs x, scale and optionally the zero point; dtype: the quantized (or the dequantized)
  // dtype; dims: the per-channel dim, or none.
  register_op({"quantize", "quantize", 2, 3, {}, false, infer_quantize, lower_quantize, attr::dtype | attr::dims,
               attr::dtype | attr::dims});
  register_op({"dequantize", "dequantize", 2, 3, {}, false, infer_dequantize, lower_dequantize,
               attr::dtype | attr::dims, attr::dtype | attr::dims});
  // Input: the packed bytes; shape: the unpacked shape.
  OpDef unpack{"unpack_int4", "unpack_int4", 1, 1, {dtype_bit(DType::kInt8)}, false, infer_unpack_int4,
               lower_unpack_int4, attr::shape, attr::shape};
  unpack.view_of_data = true;
  register_op(std::move(unpack));
}

}  // namespace tripy::trace

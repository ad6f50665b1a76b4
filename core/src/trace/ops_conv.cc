// The convolution Trace op (N-d, strided, padded, dilated, grouped, and transposed): its checks,
// its shape rule (flat::conv_result_shape, shared with the verifier), and its lowering to the one
// FlatIR convolution primitive, which backends run as a library call (oneDNN, cuDNN).
//
// Attributes are typed (Attrs::conv, an rt::ConvolutionAttrs); the binding has checked their types, the
// rule below checks their values, so every error names the user's line.
#include <algorithm>
#include <string>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

Status check_attrs(const InferCtx& ctx, const rt::ConvolutionAttrs& a, size_t nd) {
  if (a.stride.size() != nd || a.pad_before.size() != nd || a.pad_after.size() != nd || a.dilation.size() != nd ||
      a.output_padding.size() != nd)
    return ctx.error("convolution: stride, padding and dilation need one entry per spatial dim (" + std::to_string(nd) +
                     ").");
  if (a.groups < 1) return ctx.error("convolution: groups must be at least 1, got " + std::to_string(a.groups) + ".");
  for (size_t i = 0; i < nd; ++i) {
    if (a.stride[i] < 1 || a.dilation[i] < 1)
      return ctx.error("convolution: strides and dilations must be at least 1, got stride " + tuple_str(a.stride) +
                       " and dilation " + tuple_str(a.dilation) + ".");
    if (a.pad_before[i] < 0 || a.pad_after[i] < 0) return ctx.error("convolution: paddings must be non-negative.");
    const int64_t most = std::max(a.stride[i], a.dilation[i]);
    if (a.output_padding[i] < 0 || (a.transposed ? a.output_padding[i] >= most : a.output_padding[i] != 0))
      return ctx.error(a.transposed ? "convolution: output_padding " + tuple_str(a.output_padding) +
                                          " must be non-negative and smaller than the stride or the dilation in each dim."
                                    : std::string("convolution: output_padding applies to transposed convolutions only."));
  }
  // What is left of the attributes' rule: the range that keeps the size rule's arithmetic exact.
  if (!rt::conv_attrs_error(a, nd).empty())
    return ctx.error("convolution: groups, strides, dilations and paddings must be at most 2^30 (" +
                     std::to_string(rt::kMaxConvAttr) + "), got groups " + std::to_string(a.groups) + ", stride " +
                     tuple_str(a.stride) + ", dilation " + tuple_str(a.dilation) + ", padding " +
                     tuple_str(a.pad_before) + " / " + tuple_str(a.pad_after) + ".");
  return ok_status();
}

Status infer_convolution(InferCtx& ctx) {
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  const rt::ConvolutionAttrs& a = ctx.node.attrs.convolution;
  const char* what = a.transposed ? "transposed convolution" : "convolution";
  if (x.size() < 3 || x.size() > 2 + rt::kMaxConvSpatialDims)
    return ctx.error(std::string(what) + ": the input must be (N, C, spatial...) with 1 to 3 spatial dims, but it has shape " +
                     shape_str(x) + ".");
  if (w.size() != x.size())
    return ctx.error("convolution: the weight has rank " + std::to_string(w.size()) + " (shape " + shape_str(w) +
                     "), but the input has rank " + std::to_string(x.size()) + "; they must match.");
  const size_t nd = x.size() - 2;
  TRIPY_RETURN_IF_ERROR(check_attrs(ctx, a, nd));
  if (!is_static(w)) return ctx.error("convolution: the weight's shape must be static, got " + shape_str(w) + ".");
  const std::vector<int64_t> ws = static_dims(w);
  for (int64_t d : ws)
    if (d > rt::kMaxConvAttr)
      return ctx.error("convolution: the weight's dims must be at most 2^30 (" + std::to_string(rt::kMaxConvAttr) +
                       "), got " + shape_str(w) + ".");
  const int64_t g = a.groups;
  // Forward: weight (O, C/g, k...). Transposed: weight (C, O/g, k...).
  const int64_t in_c = a.transposed ? ws[0] : ws[1] * g;
  const int64_t out_c = a.transposed ? ws[1] * g : ws[0];
  if (in_c % g != 0 || out_c % g != 0 || (x[1].is_static() && x[1].static_value() % g != 0))
    return ctx.error("convolution: the input channels (" + x[1].str(ctx.node.symbols.get()) + ") and output channels (" +
                     std::to_string(out_c) + ") must both be divisible by groups (" + std::to_string(g) + ").");
  if (x[1].is_static() && x[1].static_value() != in_c) {
    Status st = ctx.error(std::string(what) + ": the input has " + std::to_string(x[1].static_value()) +
                          " channels, but the weight of shape " + shape_str(w) + " with groups=" + std::to_string(g) +
                          " expects " + std::to_string(in_c) + ".");
    for (int j : {0, 1}) st.note(std::string(j ? "The weight" : "The input") + " was created here:", ctx.in()[j]->source);
    return st;
  }
  const SymbolTable* table = ctx.node.symbols.get();
  for (size_t i = 0; i < nd; ++i) {
    const int64_t k = ws[i + 2];
    if (k < 1) return ctx.error("convolution: the kernel " + tuple_str({ws.begin() + 2, ws.end()}) + " has an empty dim.");
    // Dynamic sizes are checked at their smallest: the compiled program must work over the range.
    const int64_t n = x[i + 2].is_static() ? x[i + 2].static_value() : table ? x[i + 2].lower_bound(*table) : 1;
    const int64_t span = (k - 1) * a.dilation[i] + 1;
    const std::string at_least = x[i + 2].is_static() ? "" : "smallest ";
    if (!a.transposed && span > n + a.pad_before[i] + a.pad_after[i])
      return ctx.error("convolution: the kernel " + tuple_str({ws.begin() + 2, ws.end()}) + " (dilation " +
                       tuple_str(a.dilation) + ") spans " + std::to_string(span) + " elements in spatial dim " +
                       std::to_string(i) + ", more than the " + at_least + "padded input's " +
                       std::to_string(n + a.pad_before[i] + a.pad_after[i]) + ".");
    if (a.transposed && rt::conv_output_size(a, i, n, k) < 1)
      return ctx.error("transposed convolution: the padding " + tuple_str(a.pad_before) + " / " + tuple_str(a.pad_after) +
                       " crops all of spatial dim " + std::to_string(i) + " (size " + std::to_string(n) + ").");
  }
  ctx.node.shape = flat::conv_result_shape(x, w, a);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_convolution(LowerCtx& c) {
  const rt::ConvolutionAttrs& a = c.node().attrs.convolution;
  const Shape& x = c.value(c.in(0)).shape;
  const std::vector<int64_t> ws = static_dims(c.value(c.in(1)).shape);
  if (!x[1].is_static())
    c.check_equal(x[1], Dim(a.transposed ? ws[0] : ws[1] * a.groups),
                  "The input's channels do not match the convolution's weight.");
  flat::Op op;
  op.kind = flat::OpKind::kConvolution;
  op.operands = {c.in(0), c.in(1)};
  op.convolution = a;
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

}  // namespace

void register_conv_ops() {
  register_op({"convolution", "convolution", 2, 2, {kFloats}, true, infer_convolution, lower_convolution, attr::convolution, attr::convolution});
}

}  // namespace tripy::trace

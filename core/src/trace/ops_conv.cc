// The convolution Trace op (N-d, strided, padded, dilated, grouped), lowered as im2col onto
// existing FlatIR primitives: zero padding by concatenation, one strided slice per kernel tap,
// one concatenation, then a single batched dot with the groups as a batch dim.
//
// Attributes (Attrs is one flat struct, so this op documents which fields it reads):
//   steps  = stride per spatial dim      starts = padding before    limits = padding after
//   dims   = dilation per spatial dim    axis   = groups
#include <string>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// Reads a Shape attribute that must hold static ints (`what` names it in errors).
StatusOr<std::vector<int64_t>> static_attr(const InferCtx& ctx, const Shape& s, const char* what) {
  std::vector<int64_t> out;
  for (const auto& d : s) {
    if (!d.is_static()) return ctx.error(std::string("convolution: the ") + what + " must be static ints.");
    out.push_back(d.static_value());
  }
  return out;
}

Status infer_convolution(InferCtx& ctx) {
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  const Attrs& a = ctx.node.attrs;
  if (x.size() < 3)
    return ctx.error("convolution: the input must be (N, C, spatial...) with at least one spatial dim, but it has shape " +
                     shape_str(x) + ".");
  if (w.size() != x.size())
    return ctx.error("convolution: the weight has rank " + std::to_string(w.size()) + " (shape " + shape_str(w) +
                     "), but the input has rank " + std::to_string(x.size()) + "; they must match.");
  size_t nd = x.size() - 2;
  if (a.steps.size() != nd || a.starts.size() != nd || a.limits.size() != nd || a.dims.size() != nd)
    return ctx.error("convolution: stride, padding and dilation need one entry per spatial dim (" + std::to_string(nd) +
                     ").");
  if (!is_static(w)) return ctx.error("convolution: the weight's shape must be static, got " + shape_str(w) + ".");
  for (size_t i = 1; i < x.size(); ++i)
    if (!x[i].is_static())
      return ctx.error("convolution: only the batch dim may be dynamic, but input dim " + std::to_string(i) + " is " +
                       x[i].str(ctx.node.symbols.get()) + ".");
  TRIPY_ASSIGN_OR_RETURN(auto stride, static_attr(ctx, a.steps, "strides"));
  TRIPY_ASSIGN_OR_RETURN(auto pad_lo, static_attr(ctx, a.starts, "paddings"));
  TRIPY_ASSIGN_OR_RETURN(auto pad_hi, static_attr(ctx, a.limits, "paddings"));
  const auto& dilation = a.dims;
  int64_t groups = a.axis;
  std::vector<int64_t> ws = static_dims(w);
  int64_t channels = x[1].static_value();
  int64_t out_channels = ws[0];
  if (groups < 1) return ctx.error("convolution: groups must be at least 1, got " + std::to_string(groups) + ".");
  if (channels % groups != 0 || out_channels % groups != 0)
    return ctx.error("convolution: the input channels (" + std::to_string(channels) + ") and output channels (" +
                     std::to_string(out_channels) + ") must both be divisible by groups (" + std::to_string(groups) +
                     ").");
  if (ws[1] * groups != channels) {
    Status st = ctx.error("convolution: the input has " + std::to_string(channels) + " channels, but the weight of shape " +
                          shape_str(w) + " with groups=" + std::to_string(groups) + " expects " +
                          std::to_string(ws[1] * groups) + ".");
    for (int j : {0, 1}) st.note(std::string(j ? "The weight" : "The input") + " was created here:", ctx.in()[j]->source);
    return st;
  }
  Shape out = {x[0], Dim(out_channels)};
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  for (size_t i = 0; i < nd; ++i) {
    if (stride[i] < 1 || dilation[i] < 1)
      return ctx.error("convolution: strides and dilations must be at least 1, got stride " + ints_str(stride) +
                       " and dilation " + ints_str(dilation) + ".");
    if (pad_lo[i] < 0 || pad_hi[i] < 0) return ctx.error("convolution: paddings must be non-negative.");
    if (kernel[i] < 1) return ctx.error("convolution: the kernel " + ints_str(kernel) + " has an empty dim.");
    int64_t padded = x[i + 2].static_value() + pad_lo[i] + pad_hi[i];
    int64_t span = (kernel[i] - 1) * dilation[i] + 1;
    if (span > padded)
      return ctx.error("convolution: the kernel " + ints_str(kernel) + " (dilation " + ints_str(dilation) +
                       ") spans " + std::to_string(span) + " elements in spatial dim " + std::to_string(i) +
                       ", more than the padded input's " + std::to_string(padded) + ".");
    out.push_back(Dim((padded - span) / stride[i] + 1));
  }
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

// Zero-pads spatial dim `d` of `v` (shape `s`) by concatenating zero blocks on either side.
flat::ValueId pad_dim(LowerCtx& c, flat::ValueId v, Shape& s, size_t d, int64_t lo, int64_t hi) {
  if (lo == 0 && hi == 0) return v;
  DType dt = c.value(v).dtype;
  flat::Op op;
  op.kind = flat::OpKind::kConcatenate;
  op.dims = {static_cast<int64_t>(d)};
  for (int64_t n : {lo, int64_t{-1}, hi}) {
    if (n == 0) continue;
    if (n < 0) {
      op.operands.push_back(v);
      continue;
    }
    Shape block = s;
    block[d] = n;
    op.operands.push_back(c.splat(0, dt, block));
  }
  s[d] = s[d] + Dim(lo + hi);
  return c.emit(std::move(op), dt, s, "zero-pad the convolution's input");
}

StatusOr<flat::ValueId> lower_convolution(LowerCtx& c) {
  const Attrs& a = c.node().attrs;
  flat::ValueId x = c.in(0);
  DType dt = c.value(x).dtype;
  Shape s = c.value(x).shape;
  std::vector<int64_t> ws = static_dims(c.value(c.in(1)).shape);
  size_t nd = s.size() - 2;
  for (size_t i = 0; i < nd; ++i)
    x = pad_dim(c, x, s, i + 2, a.starts[i].static_value(), a.limits[i].static_value());

  const Shape& out = c.node().shape;
  Dim positions = 1;  // output positions per image (P)
  for (size_t i = 0; i < nd; ++i) positions = positions * out[i + 2];
  int64_t taps = 1;  // kernel taps (K)
  for (size_t i = 0; i < nd; ++i) taps *= ws[i + 2];

  // One strided slice per kernel tap, each [N, C, 1, P]; concatenated they are the im2col
  // matrix [N, C, K, P] with channels outer and taps inner, the weight's own layout.
  flat::Op cat;
  cat.kind = flat::OpKind::kConcatenate;
  cat.dims = {2};
  std::vector<int64_t> tap(nd, 0);
  for (int64_t t = 0; t < taps; ++t) {
    flat::Op slice;
    slice.kind = flat::OpKind::kSlice;
    slice.operands = {x};
    slice.starts = {0, 0};
    slice.limits = {s[0], s[1]};
    slice.steps = {1, 1};
    Shape sliced = {s[0], s[1]};
    for (size_t i = 0; i < nd; ++i) {
      int64_t start = tap[i] * a.dims[i];
      int64_t stride = a.steps[i].static_value();
      int64_t n = out[i + 2].static_value();
      slice.starts.push_back(start);
      slice.limits.push_back(start + stride * (n - 1) + 1);
      slice.steps.push_back(stride);
      sliced.push_back(n);
    }
    flat::ValueId v = c.emit(std::move(slice), dt, sliced, "take one kernel tap of the convolution (im2col)");
    cat.operands.push_back(c.reshape(v, {s[0], s[1], 1, positions}));
    for (size_t i = nd; i-- > 0;) {  // next tap, last spatial dim fastest
      if (++tap[i] < ws[i + 2]) break;
      tap[i] = 0;
    }
  }
  flat::ValueId cols = cat.operands[0];
  if (taps > 1) cols = c.emit(std::move(cat), dt, {s[0], s[1], Dim(taps), positions}, "gather the im2col matrix");

  // Groups become a batch dim of the dot: [1, g, O/g, C/g*K] x [N, g, C/g*K, P] -> [N, g, O/g, P].
  int64_t g = a.axis;
  int64_t reduce = ws[1] * taps;
  cols = c.reshape(cols, {s[0], Dim(g), Dim(reduce), positions});
  flat::ValueId w = c.reshape(c.in(1), {1, Dim(g), Dim(ws[0] / g), Dim(reduce)});
  flat::Op dot;
  dot.kind = flat::OpKind::kDot;
  dot.operands = {w, cols};
  flat::ValueId r = c.emit(std::move(dot), dt, {s[0], Dim(g), Dim(ws[0] / g), positions});
  return c.reshape(r, out);
}

}  // namespace

void register_conv_ops() {
  register_op({"convolution", "convolution", 2, 2, {kFloats}, true, infer_convolution, lower_convolution});
}

}  // namespace tripy::trace

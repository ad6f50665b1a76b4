// resize: interpolation one dim at a time (nearest, linear and cubic are separable), as a
// composite of FlatIR gathers and a weighted sum of the gathered taps. A static dim's source
// indices and weights are computed here, in double, and enter the graph as constants; a dynamic
// dim (inside tp.compile) resized to an int size computes the same rules in the graph from iota
// and the run-time size, in exact int32 arithmetic with float32 fractions.
#include <algorithm>
#include <cmath>

#include "common/number_text.h"
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

constexpr double kCubicA = -0.75;  // the Keys kernel coefficient PyTorch and OpenCV use

// "(1.0, 2.5)": the scales as Python prints the tuple the user gave.
std::string scales_str(const std::vector<double>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    s += (i ? ", " : "") + number_text(v[i]);
  }
  return s + (v.size() == 1 ? ",)" : ")");
}

// resize(x): attrs.mode "nearest" | "linear" | "cubic", attrs.align_corners, and either
// attrs.shape (one output size per dim: an int, or a dynamic dim's own size to keep it) or
// attrs.scales (one factor per dim; size n becomes floor(n * scale), static dims only).
Status infer_resize(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  const Attrs& a = ctx.node.attrs;
  const SymbolTable* table = ctx.node.symbols.get();
  const DType dt = ctx.in()[0]->dtype;
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return ctx.error("resize: unsupported mode '" + a.mode + "'; use 'nearest', 'linear' or 'cubic'.");
  if (a.mode != "nearest" && !(dtype_bit(dt) & kFloats))
    return ctx.error("resize: " + a.mode + " interpolation needs a float tensor, but got dtype " +
                     std::string(dtype_name(dt)) + ".");
  const bool by_scales = !a.scales.empty();
  const size_t given = by_scales ? a.scales.size() : a.shape.size();
  if (given != in.size())
    return ctx.error("resize: expected " + std::to_string(in.size()) + " entries (one per dim), but got " +
                     std::to_string(given) + ": " + (by_scales ? scales_str(a.scales) : shape_str(a.shape, table)) +
                     ".");
  for (double s : a.scales)
    if (!(s > 0)) return ctx.error("resize: scales must be positive, but got " + scales_str(a.scales) + ".");
  Shape out = in;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t n_out;
    if (by_scales) {
      if (a.scales[d] == 1.0) continue;
      if (!in[d].is_static())
        return ctx.error("resize: dimension " + std::to_string(d) + " is dynamic (" + in[d].str(table) +
                         "); resize it with output_shape (an int size), not scales.");
      n_out = static_cast<int64_t>(std::floor(static_cast<double>(in[d].static_value()) * a.scales[d]));
    } else if (!a.shape[d].is_static()) {
      if (a.shape[d].same_as(in[d])) continue;  // a dynamic dim kept at its own size
      return ctx.error("resize: the output size of dimension " + std::to_string(d) + " must be an int or " +
                       "that dimension's own size, but got " + a.shape[d].str(table) + ".");
    } else {
      n_out = a.shape[d].static_value();
    }
    if (n_out < 1)
      return ctx.error("resize: dimension " + std::to_string(d) + " would have size " + std::to_string(n_out) +
                       "; sizes must be at least 1.");
    out[d] = n_out;
  }
  ctx.node.shape = std::move(out);
  ctx.node.dtype = dt;
  return ok_status();
}

// One tap of a dim's interpolation: out[i] += weight[i] * in[index[i]] (no weight: nearest).
struct Tap {
  flat::ValueId index = -1;   // int32 [n_out]
  flat::ValueId weight = -1;  // float32 [n_out], or -1
};

double near_weight(double x) { return ((x * (kCubicA + 2) - (kCubicA + 3)) * x) * x + 1.0; }  // |x| <= 1
double far_weight(double x) {  // 1 < |x| < 2
  const double a = kCubicA;
  return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a;
}

// The taps of a static dim, computed here in double (`ratio` is n_in / n_out, or 1 / scale).
std::vector<Tap> static_taps(LowerCtx& c, const std::string& mode, int64_t n_in, int64_t n_out, double ratio,
                             bool align_corners) {
  std::vector<std::vector<int32_t>> index;
  std::vector<std::vector<float>> weight;
  auto clamp = [&](int64_t i) { return static_cast<int32_t>(std::min(std::max<int64_t>(i, 0), n_in - 1)); };
  const size_t taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  index.assign(taps, {});
  weight.assign(mode == "nearest" ? 0 : taps, {});
  for (int64_t i = 0; i < n_out; ++i) {
    if (mode == "nearest") {
      index[0].push_back(clamp(static_cast<int64_t>(std::floor(static_cast<double>(i) * ratio))));
      continue;
    }
    double src;
    if (align_corners) {
      const double scale = n_out > 1 ? static_cast<double>(n_in - 1) / static_cast<double>(n_out - 1) : 0.0;
      src = static_cast<double>(i) * scale;
    } else {
      src = (static_cast<double>(i) + 0.5) * ratio - 0.5;
    }
    if (mode == "linear") {
      src = std::max(src, 0.0);
      const int64_t lo = clamp(static_cast<int64_t>(std::floor(src)));
      const double t = src - static_cast<double>(lo);
      index[0].push_back(static_cast<int32_t>(lo));
      index[1].push_back(clamp(lo + 1));
      weight[0].push_back(static_cast<float>(1.0 - t));
      weight[1].push_back(static_cast<float>(t));
    } else {
      const double base = std::floor(src);
      const double t = src - base;
      const double w[4] = {far_weight(t + 1.0), near_weight(t), near_weight(1.0 - t), far_weight(2.0 - t)};
      for (int k = 0; k < 4; ++k) {
        index[k].push_back(clamp(static_cast<int64_t>(base) + k - 1));
        weight[k].push_back(static_cast<float>(w[k]));
      }
    }
  }
  auto constant = [&](DType dt, const void* data, size_t bytes) {
    flat::Op op;
    op.kind = flat::OpKind::kConstant;
    op.constant = Tensor::empty_host(dt, {n_out});
    std::copy_n(static_cast<const char*>(data), bytes, static_cast<char*>(op.constant.data()));
    return c.emit(std::move(op), dt, {Dim(n_out)});
  };
  std::vector<Tap> out(taps);
  for (size_t k = 0; k < taps; ++k) {
    out[k].index = constant(DType::kInt32, index[k].data(), index[k].size() * sizeof(int32_t));
    if (!weight.empty()) out[k].weight = constant(DType::kFloat32, weight[k].data(), weight[k].size() * sizeof(float));
  }
  return out;
}

// The taps of a dim of run-time size `n_in` resized to the static `n_out`, built in the graph.
// Source positions are p / q with integers p and q, so their floor is an exact integer division
// and only the fractions are floats (int32: exact while 2 * n_in * n_out < 2**31).
std::vector<Tap> dynamic_taps(LowerCtx& c, const std::string& mode, const Dim& n_in, int64_t n_out,
                              bool align_corners) {
  const Shape s = {Dim(n_out)};
  auto k = [&](int64_t v) { return c.splat(static_cast<double>(v), DType::kInt32, s); };
  auto f = [&](double v) { return c.splat(v, DType::kFloat32, s); };
  auto op = [&](EwOp fn, flat::ValueId x, flat::ValueId y) { return c.ew(fn, {x, y}, c.value(x).dtype); };
  flat::Op iota;
  iota.kind = flat::OpKind::kIota;
  iota.dims = {0};
  const flat::ValueId i = c.emit(std::move(iota), DType::kInt32, s, "resize: each output position");
  const flat::ValueId n = c.broadcast_to(c.size_value(n_in), s, "resize: the run-time size of the input");
  if (mode == "nearest") return {{op(EwOp::kFloorDiv, op(EwOp::kMul, i, n), k(n_out)), -1}};  // below n_in
  flat::ValueId p;
  int64_t q;
  if (align_corners) {  // i * (n_in - 1) / (n_out - 1)
    p = op(EwOp::kMul, i, op(EwOp::kSub, n, k(1)));
    q = std::max<int64_t>(n_out - 1, 1);
  } else {  // (i + 0.5) * n_in / n_out - 0.5 = ((2i + 1) * n_in - n_out) / (2 n_out)
    p = op(EwOp::kSub, op(EwOp::kMul, op(EwOp::kAdd, op(EwOp::kMul, i, k(2)), k(1)), n), k(n_out));
    q = 2 * n_out;
  }
  if (mode == "linear") p = op(EwOp::kMax, p, k(0));  // positions before the first centre read the first element
  const flat::ValueId base = op(EwOp::kFloorDiv, p, k(q));
  const flat::ValueId t = op(EwOp::kMul, c.ew(EwOp::kConvert, {op(EwOp::kSub, p, op(EwOp::kMul, base, k(q)))},
                                               DType::kFloat32),
                             f(1.0 / static_cast<double>(q)));
  const flat::ValueId last = op(EwOp::kSub, n, k(1));
  // Positions never pass the last element (at most n_in - 1), so base is a valid index.
  if (mode == "linear")
    return {{base, op(EwOp::kSub, f(1.0), t)}, {op(EwOp::kMin, op(EwOp::kAdd, base, k(1)), last), t}};
  const double a = kCubicA;
  auto near = [&](flat::ValueId x) {
    return op(EwOp::kAdd, op(EwOp::kMul, op(EwOp::kMul, op(EwOp::kSub, op(EwOp::kMul, x, f(a + 2)), f(a + 3)), x), x),
              f(1.0));
  };
  auto far = [&](flat::ValueId x) {
    flat::ValueId y = op(EwOp::kMul, op(EwOp::kSub, op(EwOp::kMul, x, f(a)), f(5 * a)), x);
    return op(EwOp::kSub, op(EwOp::kMul, op(EwOp::kAdd, y, f(8 * a)), x), f(4 * a));
  };
  const flat::ValueId w[4] = {far(op(EwOp::kAdd, t, f(1.0))), near(t), near(op(EwOp::kSub, f(1.0), t)),
                              far(op(EwOp::kSub, f(2.0), t))};
  std::vector<Tap> out;
  for (int off = -1; off <= 2; ++off)
    out.push_back({op(EwOp::kMin, op(EwOp::kMax, op(EwOp::kAdd, base, k(off)), k(0)), last), w[off + 1]});
  return out;
}

// x resized along `dim` by its taps: the gathered taps, each scaled by its weights, summed.
flat::ValueId apply_taps(LowerCtx& c, flat::ValueId x, int64_t dim, const std::vector<Tap>& taps) {
  const DType dt = c.value(x).dtype;
  const std::string where = "resize: dimension " + std::to_string(dim);
  flat::ValueId out = -1;
  for (const Tap& tap : taps) {
    Shape shape = c.value(x).shape;
    shape[dim] = c.value(tap.index).shape[0];
    flat::Op gather;
    gather.kind = flat::OpKind::kGather;
    gather.operands = {x, tap.index};
    gather.dims = {dim};
    flat::ValueId picked = c.emit(std::move(gather), dt, shape, where + " reads its source elements");
    if (tap.weight >= 0) {
      const flat::ValueId w = dt == DType::kFloat32 ? tap.weight : c.ew(EwOp::kConvert, {tap.weight}, dt);
      flat::Op spread;
      spread.kind = flat::OpKind::kBroadcast;
      spread.operands = {w};
      spread.dims = {dim};
      const flat::ValueId wb = c.emit(std::move(spread), dt, shape, where + " spreads its weights over the other dims");
      picked = c.ew(EwOp::kMul, {picked, wb}, dt);
    }
    out = out < 0 ? picked : c.ew(EwOp::kAdd, {out, picked}, dt);
  }
  return out;
}

StatusOr<flat::ValueId> lower_resize(LowerCtx& c) {
  const Attrs& a = c.node().attrs;
  const Shape& out_shape = c.node().shape;
  flat::ValueId out = c.in(0);
  for (int64_t d = 0; d < static_cast<int64_t>(out_shape.size()); ++d) {
    const Dim n_in = c.value(c.in(0)).shape[d];
    const bool by_scales = !a.scales.empty();
    if (by_scales ? a.scales[d] == 1.0 : out_shape[d].same_as(n_in)) continue;
    const int64_t n_out = out_shape[d].static_value();  // the rule admits no other
    std::vector<Tap> taps;
    if (n_in.is_static()) {
      const double ratio = by_scales ? 1.0 / a.scales[d]
                                     : static_cast<double>(n_in.static_value()) / static_cast<double>(n_out);
      taps = static_taps(c, a.mode, n_in.static_value(), n_out, ratio, a.align_corners);
    } else {
      taps = dynamic_taps(c, a.mode, n_in, n_out, a.align_corners);
    }
    out = apply_taps(c, out, d, taps);
  }
  return out;
}

}  // namespace

void register_resize_ops() {
  register_op({"resize", "resize", 1, 1, {}, true, infer_resize, lower_resize,
               attr::shape | attr::scales | attr::mode | attr::align_corners, attr::mode});
}

}  // namespace tripy::trace

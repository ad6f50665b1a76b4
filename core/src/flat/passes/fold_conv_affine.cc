// Inference BatchNorm (and any per-channel scale and shift) folded into the convolution before it:
//   conv(x, W) * s[c] + t[c]  ->  conv(x, W * s[o]) + t[c]
// for a constant W and constant per-channel s, t. The chain may be any run of multiplies, divides,
// adds and subtracts by per-channel constants (a conv bias before the BatchNorm included), each
// value read once; it becomes one convolution with new weights and at most one bias add, which
// fusion then takes into the convolution's epilogue with the residual and the activation.
// Folding is done in double precision and rounded once into the weight's dtype. merge_conv_biases
// then sums the biases of two convolutions added together (ResNet's shortcut), so one of the two
// needs no epilogue.
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "common/half.h"
#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

// Per-channel values of `v` when it is broadcast(constant) whose only non-unit dim lands on dim 1
// of a rank-`rank` result (one value per channel), or a broadcast scalar (the same for every
// channel). Empty when it is neither.
std::vector<double> per_channel_constant(const Graph& g, ValueId v, int64_t channels) {
  const Op& b = g.def(v);
  if (b.kind != OpKind::kBroadcast) return {};
  const Op& c = g.def(b.operands[0]);
  if (c.kind != OpKind::kConstant || !c.constant.defined()) return {};
  const Shape& cs = g.values[b.operands[0]].shape;
  const int64_t n = c.constant.numel();
  if (n != 1 && n != channels) return {};
  StatusOr<Tensor> host = copy_to(c.constant, Device{});
  if (!host.ok()) return {};
  const Tensor& values = host.value();
  if (n == 1) return std::vector<double>(static_cast<size_t>(channels), read_element(values, 0));
  for (size_t j = 0; j < cs.size(); ++j) {
    const bool along_channels = b.dims[j] == 1;
    if (!cs[j].is_static() || cs[j].static_value() != (along_channels ? channels : 1)) return {};
  }
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = read_element(values, i);
  return out;
}

// y = x * scale[c] + shift[c] per output channel, accumulated along the chain.
struct Affine {
  std::vector<double> scale, shift;
};

// Applies one op of the chain to `a` (cur is the chain's value, the op's other operand a
// per-channel constant). False when the op is not of that form.
bool extend(const Graph& g, const Op& op, ValueId cur, int64_t channels, Affine& a) {
  if (op.kind != OpKind::kElementwise || op.operands.size() != 2 || op.operands[0] == op.operands[1]) return false;
  const bool cur_first = op.operands[0] == cur;
  const std::vector<double> c = per_channel_constant(g, op.operands[cur_first ? 1 : 0], channels);
  if (c.empty()) return false;
  for (size_t o = 0; o < c.size(); ++o) {
    double& s = a.scale[o];
    double& t = a.shift[o];
    switch (op.fn) {
      case EwOp::kMul: s *= c[o], t *= c[o]; break;
      case EwOp::kAdd: t += c[o]; break;
      case EwOp::kSub:
        if (cur_first) t -= c[o];
        else s = -s, t = c[o] - t;
        break;
      case EwOp::kDiv:
        if (!cur_first) return false;
        s /= c[o], t /= c[o];
        break;
      default: return false;
    }
  }
  return true;
}

// dst[i] = src[i] * s for float16 bits: the product in double, rounded to float, then to half
// (both paths alike). F16C and AVX do 8 at a time where the CPU has them: ResNet-50's 25M
// float16 weights took ~0.26 s one at a time.
void scale_half_scalar(const uint16_t* src, uint16_t* dst, int64_t n, double s) {
  for (int64_t t = 0; t < n; ++t) dst[t] = cpu::float_to_half(static_cast<float>(cpu::half_to_float(src[t]) * s));
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx,f16c"))) void scale_half_f16c(const uint16_t* src, uint16_t* dst, int64_t n, double s) {
  const __m256d sv = _mm256_set1_pd(s);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + t)));
    const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), sv));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), sv));
    const __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + t), _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
  }
  scale_half_scalar(src + t, dst + t, n - t, s);
}

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c",
// GCC's does, and <cpuid.h> is the same in both. __builtin_cpu_supports("avx") (known to both) also
// checks that the OS saves the YMM registers.
bool cpu_has_avx_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0 && __builtin_cpu_supports("avx");
}

void scale_half(const uint16_t* src, uint16_t* dst, int64_t n, double s) {
  static const bool f16c = cpu_has_avx_f16c();
  if (f16c) scale_half_f16c(src, dst, n, s);
  else scale_half_scalar(src, dst, n, s);
}
#else
void scale_half(const uint16_t* src, uint16_t* dst, int64_t n, double s) { scale_half_scalar(src, dst, n, s); }
#endif

// W * scale[output channel of the weight element]. Forward weights are (O, C/g, k...), transposed
// ones (C, O/g, k...): output channel (c / (C/g)) * (O/g) + j for element [c, j, ...]. Each run of
// elements that shares a scale (a forward weight's whole row) is scaled in one call.
Tensor scaled_weight(const Tensor& w, const rt::ConvolutionAttrs& attrs, const std::vector<double>& scale) {
  const std::vector<int64_t>& ws = w.shape();
  int64_t taps = 1;
  for (size_t i = 2; i < ws.size(); ++i) taps *= ws[i];
  const int64_t d0 = ws[0], d1 = ws[1];
  const int64_t out_per_group = attrs.transposed ? d1 : d0 / attrs.groups;
  const int64_t in_per_group = attrs.transposed ? d0 / attrs.groups : d1;
  const int64_t runs = attrs.transposed ? d0 * d1 : d0, run = attrs.transposed ? taps : d1 * taps;
  Tensor out = Tensor::empty_host(w.dtype(), ws);
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t i = attrs.transposed ? r / d1 : r, j = attrs.transposed ? r % d1 : 0;
    const int64_t o = attrs.transposed ? (i / in_per_group) * out_per_group + j : i;
    const double s = scale[static_cast<size_t>(o)];
    const int64_t base = r * run;
    switch (w.dtype()) {
      case DType::kFloat32: {
        const float* src = static_cast<const float*>(w.data()) + base;
        float* dst = static_cast<float*>(out.data()) + base;
        for (int64_t t = 0; t < run; ++t) dst[t] = static_cast<float>(src[t] * s);
        break;
      }
      case DType::kFloat16:
        scale_half(static_cast<const uint16_t*>(w.data()) + base, static_cast<uint16_t*>(out.data()) + base, run, s);
        break;
      default:
        for (int64_t t = 0; t < run; ++t) write_element(out, base + t, read_element(w, base + t) * s);
    }
  }
  return out;
}

// x + bias[c] in `val`'s dtype and shape, the bias an [O, 1, ...] constant broadcast along the
// channels: the bias form that fusion takes into a convolution's epilogue.
ValueId add_channel_bias(GraphRewrite& rw, ValueId x, const std::vector<double>& bias, const Value& val,
                         const OriginRef& origin) {
  const size_t rank = val.shape.size();
  std::vector<int64_t> bshape(rank - 1, 1);
  bshape[0] = static_cast<int64_t>(bias.size());
  Op c;
  c.kind = OpKind::kConstant;
  c.constant = Tensor::empty_host(val.dtype, bshape);
  for (size_t o = 0; o < bias.size(); ++o) write_element(c.constant, static_cast<int64_t>(o), bias[o]);
  c.origin = origin;
  Shape bs;
  for (int64_t d : bshape) bs.push_back(Dim(d));
  const ValueId b = rw.add(std::move(c), val.dtype, bs);
  Op bc;
  bc.kind = OpKind::kBroadcast;
  for (size_t d = 1; d < rank; ++d) bc.dims.push_back(static_cast<int64_t>(d));
  bc.operands = {b};
  bc.origin = origin;
  const ValueId bb = rw.add(std::move(bc), val.dtype, val.shape);
  Op add;
  add.kind = OpKind::kElementwise;
  add.fn = EwOp::kAdd;
  add.operands = {x, bb};
  add.origin = origin;
  return rw.add(std::move(add), val.dtype, val.shape);
}

struct Fold {
  int32_t conv_op = -1, last_op = -1;
  Tensor weight;  // the convolution's weight in host memory
  Affine affine;
  bool has_shift = false;
};

}  // namespace

std::optional<Graph> fold_conv_affine(const Graph& graph) {
  const Graph& g = graph;
  const std::vector<int32_t> uses = g.use_counts();
  std::vector<int32_t> user(g.values.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (ValueId v : g.ops[i].operands) user[v] = static_cast<int32_t>(i);
  std::vector<bool> is_output(g.values.size(), false);
  for (ValueId v : g.outputs) is_output[v] = true;
  auto only_user = [&](ValueId v) { return uses[v] == 1 && !is_output[v] ? user[v] : -1; };

  std::vector<Fold> folds;
  std::vector<int32_t> fold_of_conv(g.ops.size(), -1), fold_of_last(g.ops.size(), -1);
  std::vector<bool> drop(g.ops.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    // Channel dim 1: channels-first convolutions (channels_last runs after this pass).
    if (op.kind != OpKind::kConvolution || op.convolution.layout != rt::Layout::kChannelsFirst ||
        g.def(op.operands[1]).kind != OpKind::kConstant)
      continue;
    const Dim& c = g.values[op.result].shape[1];
    if (!c.is_static()) continue;
    const int64_t channels = c.static_value();
    Fold f;
    f.conv_op = static_cast<int32_t>(i);
    f.affine.scale.assign(static_cast<size_t>(channels), 1.0);
    f.affine.shift.assign(static_cast<size_t>(channels), 0.0);
    bool scaled = false;
    int32_t steps = 0;
    std::vector<int32_t> chain;
    for (ValueId cur = op.result;;) {
      const int32_t u = only_user(cur);
      if (u < 0 || !extend(g, g.ops[u], cur, channels, f.affine)) break;
      scaled = scaled || g.ops[u].fn == EwOp::kMul || g.ops[u].fn == EwOp::kDiv || g.ops[u].fn == EwOp::kSub;
      ++steps;
      chain.push_back(u);
      f.last_op = u;
      cur = g.ops[u].result;
    }
    // A lone bias add is already the epilogue's: rewriting it would change nothing.
    if (!scaled && steps < 2) continue;
    if (scaled) {
      StatusOr<Tensor> weight = copy_to(g.def(op.operands[1]).constant, Device{});
      if (!weight.ok()) continue;
      f.weight = std::move(weight.value());
    }
    for (double t : f.affine.shift) f.has_shift = f.has_shift || t != 0.0;
    for (int32_t u : chain) drop[u] = true;
    fold_of_conv[i] = static_cast<int32_t>(folds.size());
    fold_of_last[f.last_op] = static_cast<int32_t>(folds.size());
    folds.push_back(std::move(f));
  }
  if (folds.empty()) return std::nullopt;

  std::vector<ValueId> folded_conv(folds.size(), -1);  // per fold: the new convolution's value
  return dce(rewrite_ops(g, [&](size_t i, GraphRewrite& rw) {
    const Op& src = g.ops[i];
    const Value& val = g.values[src.result];
    if (fold_of_conv[i] >= 0) {
      const Fold& f = folds[static_cast<size_t>(fold_of_conv[i])];
      const Op& w = g.def(src.operands[1]);
      Op weight;
      weight.kind = OpKind::kConstant;
      weight.constant = f.weight.defined() ? scaled_weight(f.weight, src.convolution, f.affine.scale) : w.constant;
      weight.origin = w.origin;
      const Value& wv = g.values[src.operands[1]];
      ValueId nw = rw.add(std::move(weight), wv.dtype, wv.shape);
      Op conv = src;
      conv.operands = {rw[src.operands[0]], nw};
      folded_conv[static_cast<size_t>(fold_of_conv[i])] = rw.add(std::move(conv), val.dtype, val.shape);
      rw.set(src.result, folded_conv[static_cast<size_t>(fold_of_conv[i])]);
      return true;
    }
    if (fold_of_last[i] >= 0) {
      const size_t fi = static_cast<size_t>(fold_of_last[i]);
      const Fold& f = folds[fi];
      rw.set(src.result, f.has_shift ? add_channel_bias(rw, folded_conv[fi], f.affine.shift, val, src.origin)
                                     : folded_conv[fi]);
      return true;
    }
    return static_cast<bool>(drop[i]);
  }));
}

}  // namespace tripy::flat

namespace tripy::flat {
namespace {

// `v` = add(conv, per-channel constant) where nothing else reads v or the convolution: the
// convolution's value and the constant's values.
bool conv_plus_bias(const Graph& g, const std::vector<int32_t>& uses, ValueId v, ValueId* conv,
                    std::vector<double>* bias) {
  const Op& add = g.def(v);
  if (uses[v] != 1 || add.kind != OpKind::kElementwise || add.fn != EwOp::kAdd || add.operands[0] == add.operands[1])
    return false;
  const Dim& c = g.values[v].shape[1];
  if (g.values[v].shape.size() < 3 || !c.is_static()) return false;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = add.operands[side];
    if (g.def(x).kind != OpKind::kConvolution || g.def(x).convolution.layout != rt::Layout::kChannelsFirst || uses[x] != 1)
      continue;
    *bias = per_channel_constant(g, add.operands[1 - side], c.static_value());
    if (bias->empty()) continue;
    *conv = x;
    return true;
  }
  return false;
}

}  // namespace

std::optional<Graph> merge_conv_biases(const Graph& graph) {
  const Graph& g = graph;
  const std::vector<int32_t> uses = g.use_counts();
  struct Merge {
    ValueId early, late;
    std::vector<double> bias;
  };
  std::vector<int32_t> merge_at(g.ops.size(), -1);
  std::vector<bool> drop(g.ops.size(), false);
  std::vector<Merge> merges;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind != OpKind::kElementwise || op.fn != EwOp::kAdd || op.operands[0] == op.operands[1]) continue;
    ValueId c1, c2;
    std::vector<double> b1, b2;
    if (!conv_plus_bias(g, uses, op.operands[0], &c1, &b1) || !conv_plus_bias(g, uses, op.operands[1], &c2, &b2))
      continue;
    Merge m;
    m.early = g.values[c1].def < g.values[c2].def ? c1 : c2;
    m.late = m.early == c1 ? c2 : c1;
    for (size_t o = 0; o < b1.size(); ++o) m.bias.push_back(b1[o] + b2[o]);
    drop[static_cast<size_t>(g.values[op.operands[0]].def)] = true;
    drop[static_cast<size_t>(g.values[op.operands[1]].def)] = true;
    merge_at[i] = static_cast<int32_t>(merges.size());
    merges.push_back(std::move(m));
  }
  if (merges.empty()) return std::nullopt;

  return dce(rewrite_ops(g, [&](size_t i, GraphRewrite& rw) {
    if (drop[i]) return true;
    if (merge_at[i] < 0) return false;
    // add(conv_a + b_a, conv_b + b_b) -> (conv_late + (b_a + b_b)) + conv_early: the later
    // convolution's epilogue takes the summed bias and the earlier one as its residual.
    const Op& src = g.ops[i];
    const Value& val = g.values[src.result];
    const Merge& m = merges[static_cast<size_t>(merge_at[i])];
    const ValueId t = add_channel_bias(rw, rw[m.late], m.bias, val, src.origin);
    Op sum = src;
    sum.operands = {t, rw[m.early]};
    rw.set(src.result, rw.add(std::move(sum), val.dtype, val.shape));
    return true;
  }));
}

}  // namespace tripy::flat

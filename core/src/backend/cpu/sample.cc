// kSample on the CPU: one draw per row of logits, the rule of rt::SampleAttrs (kernel_kinds.h) and
// tp.sample's docstring, bit for bit as the GPU's kernel (backend/cuda/codegen/kernels/sample.cuh)
// computes it. Every quantity that decides the draw is exact or made of correctly rounded float
// operations (division, subtraction, fma, powers of two), and the weights are integers summed
// exactly, so the order of the sums (here serial, there a block of threads) cannot change a draw.
// Thresholds are found here by selection and sorting, there by radix select: two methods, one rule.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "common/half.h"

namespace tripy::cpu {
namespace {

// A float's order as an unsigned integer (larger float, larger key); -0 is +0's key. No NaN
// reaches a key: a row holding one is greedy.
uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

float pow2(int e) {  // 2**e for a normal float's exponent
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// exp(d) for d <= 0 in units of 2**-40, rounded down: 0 below about -27.7. Range reduction by
// n = rint(d / ln 2) (ln 2 in two parts) and a degree-7 Taylor polynomial on |r| <= 0.35, every
// step a correctly rounded fma, so the GPU gets the same bits (the constants are floats, in hex).
uint64_t weight_of(float d) {
  if (!(d >= -28.0f)) return 0;
  const float n = std::rint(d * 0x1.715476p+0f);
  float r = std::fma(n, -0x1.62e4p-1f, d);
  r = std::fma(n, -0x1.7f7d1cp-20f, r);
  float p = 0x1.a01a02p-13f;
  p = std::fma(p, r, 0x1.6c16c2p-10f);
  p = std::fma(p, r, 0x1.111112p-7f);
  p = std::fma(p, r, 0x1.555556p-5f);
  p = std::fma(p, r, 0x1.555556p-3f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  return static_cast<uint64_t>(p * pow2(static_cast<int>(n) + 40));
}

// The (row + 1)-th output of splitmix64 seeded with `key`.
uint64_t draw_bits(int64_t key, int64_t row) {
  uint64_t z = static_cast<uint64_t>(key) + (static_cast<uint64_t>(row) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class Load>
int32_t sample_row(const rt::SampleAttrs& a, int64_t V, int64_t key, int64_t row, Load load,
                   std::vector<float>& x, std::vector<uint32_t>& scratch) {
  x.resize(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) x[static_cast<size_t>(i)] = load(i);
  // The argmax as tp.argmax: the first NaN, else the first of the largest.
  int64_t best = 0;
  for (int64_t i = 1; i < V && !std::isnan(x[static_cast<size_t>(best)]); ++i)
    if (std::isnan(x[static_cast<size_t>(i)]) || x[static_cast<size_t>(i)] > x[static_cast<size_t>(best)]) best = i;
  if (a.temperature == 0) return static_cast<int32_t>(best);
  const float t = static_cast<float>(a.temperature);
  const float zmax = x[static_cast<size_t>(best)] / t;
  if (!std::isfinite(zmax)) return static_cast<int32_t>(best);  // NaN, or an infinite z: greedy
  // Top-k: logits whose key is at least the k-th largest key.
  uint32_t kmin = 0;
  if (a.top_k > 0 && a.top_k < V) {
    scratch.resize(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i) scratch[static_cast<size_t>(i)] = order_key(x[static_cast<size_t>(i)]);
    auto kth = scratch.begin() + (a.top_k - 1);
    std::nth_element(scratch.begin(), kth, scratch.end(), std::greater<uint32_t>());
    kmin = *kth;
  }
  auto weight = [&](int64_t i) -> uint64_t {
    const float xi = x[static_cast<size_t>(i)];
    return order_key(xi) >= kmin ? weight_of(xi / t - zmax) : 0;
  };
  uint64_t total = 0;
  for (int64_t i = 0; i < V; ++i) total += weight(i);
  // Top-p: the largest z key tau whose kept weight at or above it reaches ceil(top_p * total).
  uint32_t pmin = 0;
  if (a.top_p < 1) {
    uint64_t need = static_cast<uint64_t>(std::ceil(a.top_p * static_cast<double>(total)));
    need = std::min(std::max<uint64_t>(need, 1), total);
    std::vector<std::pair<uint32_t, uint64_t>> kept;  // (z key, weight), the top-k set
    for (int64_t i = 0; i < V; ++i)
      if (order_key(x[static_cast<size_t>(i)]) >= kmin)
        kept.push_back({order_key(x[static_cast<size_t>(i)] / t), weight(i)});
    std::sort(kept.begin(), kept.end(), [](const auto& l, const auto& r) { return l.first > r.first; });
    uint64_t above = 0;
    for (size_t i = 0; i < kept.size();) {
      size_t j = i;
      while (j < kept.size() && kept[j].first == kept[i].first) above += kept[j++].second;
      pmin = kept[i].first;
      if (above >= need) break;
      i = j;
    }
    total = above;
  }
  // u = bits / 2**53 in [0, 1); target = floor(u * total) < total; the first index whose running
  // kept weight passes it.
  const unsigned __int128 product = static_cast<unsigned __int128>(draw_bits(key, row) >> 11) * total;
  const uint64_t target = static_cast<uint64_t>(product >> 53);
  uint64_t running = 0;
  int64_t last = best;
  for (int64_t i = 0; i < V; ++i) {
    const float xi = x[static_cast<size_t>(i)];
    if (order_key(xi) < kmin || order_key(xi / t) < pmin) continue;
    running += weight(i);
    last = i;
    if (running > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);  // unreachable: target < total
}

template <class T, class Convert>
void sample_rows(const rt::SampleAttrs& a, const View& xv, int64_t key, int32_t* out, Convert convert) {
  const int64_t V = xv.shape.back(), rows = V > 0 ? xv.numel() / V : 0;
  const T* data = static_cast<const T*>(xv.data);
  parallel_for(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(V, 1)), [&](int64_t begin, int64_t end) {
    std::vector<float> x;
    std::vector<uint32_t> scratch;
    for (int64_t r = begin; r < end; ++r) {
      const T* row = data + r * V;
      out[r] = sample_row(a, V, key, r, [&](int64_t i) { return convert(row[i]); }, x, scratch);
    }
  });
}

Status run_sample(const KernelArgs& args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return kernel_error(args, "sample takes logits, a key and one output", StatusCode::kInternal);
  const View& xv = *args.inputs[0];
  const View& ov = *args.outputs[0];
  if (ov.numel() == 0) return ok_status();
  const rt::SampleAttrs& a = args.kernel->sample;
  const int64_t key = *static_cast<const int64_t*>(args.inputs[1]->data);
  int32_t* out = static_cast<int32_t*>(ov.data);
  switch (xv.dtype) {
    case DType::kFloat32: sample_rows<float>(a, xv, key, out, [](float v) { return v; }); break;
    case DType::kFloat16: sample_rows<uint16_t>(a, xv, key, out, half_to_float); break;
    case DType::kBFloat16: sample_rows<uint16_t>(a, xv, key, out, bfloat16_to_float); break;
    default: return kernel_error(args, "sample does not take " + std::string(dtype_name(xv.dtype)), StatusCode::kInternal);
  }
  return ok_status();
}

}  // namespace

const CpuKernel kSampleKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_sample(args); }};

}  // namespace tripy::cpu

// kPooling on the CPU. A work item is one output row (n, z, y) of one plane: channels-first, a plane
// is one (n, c) and a position holds one element; channels-last, a plane is one image and a
// position holds its C channels side by side, so the window loop reduces whole channel vectors
// (contiguous, which the compiler vectorises). Floats are compared and summed in float32 (float64
// sums for large windows would change nothing at the sizes pooling uses), integers (max only) in
// their own type; padded elements never win a max and count in an average only with
// count_include_pad.
#include <algorithm>
#include <limits>
#include <vector>

#include "common/half.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

// Sizes right-aligned to 3 spatial dims (missing leading ones are 1, unpadded).
struct Geometry {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, lo[3] = {0, 0, 0},
          hi[3] = {0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

// The input range [b, e) that output coordinate `pos` of spatial dim `d` reads, and how many
// positions its window spans up to the padded edge (an average with padding counts those).
struct Span {
  int64_t b, e, full;
};
Span span(const Geometry& g, int d, int64_t pos) {
  const int64_t start = pos * g.s[d] - g.lo[d];
  return {std::max<int64_t>(start, 0), std::min(start + g.k[d], g.in[d]),
          std::min(start + g.k[d], g.in[d] + g.hi[d]) - start};
}

// Storage type T and the type A it is reduced in.
template <typename T, typename A = T>
struct Plain {
  using Stored = T;
  using Acc = A;
  static A load(T v) { return static_cast<A>(v); }
  static T store(A v) { return static_cast<T>(v); }
};
struct Half {
  using Stored = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return half_to_float(v); }
  static uint16_t store(float v) { return float_to_half(v); }
};
struct BFloat {
  using Stored = uint16_t;
  using Acc = float;
  static float load(uint16_t v) { return bfloat16_to_float(v); }
  static uint16_t store(float v) { return float_to_bfloat16(v); }
};

// One output row: `cw` values per position, stored side by side (positions `cw` elements apart).
template <typename Ty>
void pool_row(const Geometry& g, int64_t z, int64_t y, const typename Ty::Stored* src, typename Ty::Stored* dst,
              int64_t cw, bool is_max, bool include_pad, typename Ty::Acc* acc) {
  using Acc = typename Ty::Acc;
  constexpr bool kFloat = !std::numeric_limits<Acc>::is_integer;
  const Span sz = span(g, 0, z), sy = span(g, 1, y);
  for (int64_t x = 0; x < g.out[2]; ++x) {
    const Span sx = span(g, 2, x);
    const Acc init = is_max ? (kFloat ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::lowest())
                            : Acc(0);
    std::fill(acc, acc + cw, init);
    for (int64_t i = sz.b; i < sz.e; ++i)
      for (int64_t j = sy.b; j < sy.e; ++j)
        for (int64_t l = sx.b; l < sx.e; ++l) {
          const typename Ty::Stored* row = src + ((i * g.in[1] + j) * g.in[2] + l) * cw;
          if (!is_max) {
            for (int64_t c = 0; c < cw; ++c) acc[c] += Ty::load(row[c]);
          } else if constexpr (kFloat) {
            // A NaN in the window wins the max, as numpy's and torch's do.
            for (int64_t c = 0; c < cw; ++c) {
              const Acc v = Ty::load(row[c]);
              acc[c] = v > acc[c] || v != v ? v : acc[c];
            }
          } else {
            for (int64_t c = 0; c < cw; ++c) acc[c] = std::max(acc[c], Ty::load(row[c]));
          }
        }
    typename Ty::Stored* out = dst + ((z * g.out[1] + y) * g.out[2] + x) * cw;
    if (is_max) {
      for (int64_t c = 0; c < cw; ++c) out[c] = Ty::store(acc[c]);
      continue;
    }
    const int64_t real = std::max<int64_t>(sz.e - sz.b, 0) * std::max<int64_t>(sy.e - sy.b, 0) *
                         std::max<int64_t>(sx.e - sx.b, 0);
    const int64_t count = include_pad ? sz.full * sy.full * sx.full : real;
    const Acc scale = count > 0 ? Acc(1) / static_cast<Acc>(count) : Acc(0);
    for (int64_t c = 0; c < cw; ++c) out[c] = Ty::store(acc[c] * scale);
  }
}

template <typename Ty>
void pool(const Geometry& g, const View& xv, const View& ov, bool last, bool is_max, bool include_pad) {
  using Stored = typename Ty::Stored;
  const int64_t channels = last ? ov.shape.back() : ov.shape[1];
  const int64_t planes = last ? ov.shape[0] : ov.shape[0] * channels;
  const int64_t cw = last ? channels : 1;  // values per position, and the distance between positions
  const int64_t in_plane = g.in_size() * cw, out_plane = g.out_size() * cw;
  const int64_t rows = g.out[0] * g.out[1];
  const auto* src = static_cast<const Stored*>(xv.data);
  auto* dst = static_cast<Stored*>(ov.data);
  parallel_for(planes * rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<typename Ty::Acc> acc(static_cast<size_t>(cw));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t p = item / rows, r = item % rows;
      pool_row<Ty>(g, r / g.out[1], r % g.out[1], src + p * in_plane, dst + p * out_plane, cw, is_max,
                   include_pad, acc.data());
    }
  });
}

}  // namespace

Status run_pool(const KernelArgs& args) {
  const rt::PoolingAttrs& a = args.kernel->pooling;
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return kernel_error(args, "pooling takes one input and one output", StatusCode::kInternal);
  const View& xv = *args.inputs[0];
  const View& ov = *args.outputs[0];
  const size_t nd = a.spatial();
  const bool last = a.layout == rt::Layout::kChannelsLast;
  const size_t first_spatial = last ? 1 : 2;
  Geometry g;
  for (size_t i = 0; i < nd; ++i) {
    const size_t j = 3 - nd + i;
    g.in[j] = xv.shape[i + first_spatial];
    g.out[j] = ov.shape[i + first_spatial];
    g.k[j] = a.window[i];
    g.s[j] = a.stride[i];
    g.lo[j] = a.pad_before[i];
    g.hi[j] = a.pad_after[i];
  }
  if (ov.numel() == 0) return ok_status();
  const bool is_max = a.kind == rt::PoolingAttrs::Kind::kMax, pad = a.count_include_pad;
  switch (xv.dtype) {
    case DType::kFloat32: pool<Plain<float>>(g, xv, ov, last, is_max, pad); break;
    case DType::kFloat16: pool<Half>(g, xv, ov, last, is_max, pad); break;
    case DType::kBFloat16: pool<BFloat>(g, xv, ov, last, is_max, pad); break;
    case DType::kInt8: pool<Plain<int8_t>>(g, xv, ov, last, is_max, pad); break;
    case DType::kInt32: pool<Plain<int32_t>>(g, xv, ov, last, is_max, pad); break;
    case DType::kInt64: pool<Plain<int64_t>>(g, xv, ov, last, is_max, pad); break;
    default: return kernel_error(args, "pooling does not take " + std::string(dtype_name(xv.dtype)), StatusCode::kInternal);
  }
  return ok_status();
}

const CpuKernel kPoolingKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_pool(args); }};

}  // namespace tripy::cpu

// kPool on the CPU: direct loops over each (n, c) plane, in parallel across planes (a plane's
// elements are C apart channels-last, adjacent channels-first). Floats are
// compared and summed in float32 (float64 sums for large windows would change nothing at the
// sizes pooling uses), integers (max only) in their own type; padded elements never win a max and
// count in an average only with count_include_pad.
#include <algorithm>
#include <limits>

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

float to_f32(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

void from_f32(DType t, void* p, int64_t i, float v) {
  switch (t) {
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(v); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bfloat16(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

// Calls visit(input index) for each unpadded element of output position (z, y, x)'s window and
// returns how many the window covers, padding included or not.
template <typename Visit>
int64_t window(const Geometry& g, int64_t z, int64_t y, int64_t x, bool include_pad, Visit visit) {
  const int64_t pos[3] = {z, y, x};
  int64_t b[3], e[3], full = 1;
  for (int i = 0; i < 3; ++i) {
    const int64_t start = pos[i] * g.s[i] - g.lo[i];
    // With padding included, a window is counted up to the padded edge (as torch does).
    full *= std::min(start + g.k[i], g.in[i] + g.hi[i]) - start;
    b[i] = std::max<int64_t>(start, 0);
    e[i] = std::min(start + g.k[i], g.in[i]);
  }
  for (int64_t i = b[0]; i < e[0]; ++i)
    for (int64_t j = b[1]; j < e[1]; ++j)
      for (int64_t l = b[2]; l < e[2]; ++l) visit((i * g.in[1] + j) * g.in[2] + l);
  const int64_t real = std::max<int64_t>(e[0] - b[0], 0) * std::max<int64_t>(e[1] - b[1], 0) *
                       std::max<int64_t>(e[2] - b[2], 0);
  return include_pad ? full : real;
}

// `step`: elements between neighbouring positions of one plane.
template <typename T>
void max_int(const Geometry& g, const T* src, T* dst, int64_t step) {
  for (int64_t z = 0; z < g.out[0]; ++z)
    for (int64_t y = 0; y < g.out[1]; ++y)
      for (int64_t x = 0; x < g.out[2]; ++x, dst += step) {
        T m = std::numeric_limits<T>::lowest();
        window(g, z, y, x, false, [&](int64_t i) { m = std::max(m, src[i * step]); });
        *dst = m;
      }
}

}  // namespace

Status run_pool(const KernelArgs& args) {
  const rt::PoolAttrs& a = args.kernel->pool;
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
  const int64_t channels = last ? ov.shape.back() : ov.shape[1];
  const int64_t planes = ov.shape[0] * channels;
  if (ov.numel() == 0) return ok_status();
  const DType t = xv.dtype;
  const bool is_max = a.kind == rt::PoolAttrs::Kind::kMax;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t esize = dtype_size(t);
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / channels, c = p % channels, step = last ? channels : 1;
      const int64_t in_at = last ? n * in_size * channels + c : p * in_size;
      const int64_t out_at = last ? n * out_size * channels + c : p * out_size;
      const char* src = static_cast<const char*>(xv.data) + in_at * esize;
      char* dst = static_cast<char*>(ov.data) + out_at * esize;
      switch (t) {
        case DType::kInt8: max_int(g, reinterpret_cast<const int8_t*>(src), reinterpret_cast<int8_t*>(dst), step); continue;
        case DType::kInt32: max_int(g, reinterpret_cast<const int32_t*>(src), reinterpret_cast<int32_t*>(dst), step); continue;
        case DType::kInt64: max_int(g, reinterpret_cast<const int64_t*>(src), reinterpret_cast<int64_t*>(dst), step); continue;
        default: break;
      }
      int64_t o = 0;
      for (int64_t z = 0; z < g.out[0]; ++z)
        for (int64_t y = 0; y < g.out[1]; ++y)
          for (int64_t x = 0; x < g.out[2]; ++x, o += step) {
            float acc = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
            const int64_t count = window(g, z, y, x, a.count_include_pad, [&](int64_t i) {
              const float v = to_f32(t, src, i * step);
              // A NaN in the window wins the max, as numpy's and torch's do.
              acc = is_max ? (v > acc || v != v ? v : acc) : acc + v;
            });
            if (!is_max) acc = count > 0 ? acc / static_cast<float>(count) : 0.0f;
            from_f32(t, dst, o, acc);
          }
    }
  });
  return ok_status();
}

}  // namespace tripy::cpu

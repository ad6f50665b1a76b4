// kWeightOnlyDot on the CPU: x [rows, K] times a weight read packed (int8, or two int4 values a
// byte) with a scale and a zero point per group of K, the rule of rt::WeightOnlyDotAttrs. Weight
// rows are dequantized into float32 one tile at a time (never the whole weight), then multiplied:
// by plain dot products for a few rows of x (a decode step: bound by reading the packed weight),
// by the blocked float32 GEMM (gemm.h) for many. Sums are float32; the result is rounded once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "common/half.h"

namespace tripy::cpu {
namespace {

// Rows of x up to which each output is one dot product (no packing for the GEMM).
constexpr int64_t kFewRows = 4;
// Weight rows dequantized at once for the GEMM path.
constexpr int64_t kTile = 64;

void to_float(const View& v, std::vector<float>& out) {
  const int64_t n = v.numel();
  out.resize(static_cast<size_t>(n));
  switch (v.dtype) {
    case DType::kFloat32: std::memcpy(out.data(), v.data, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = half_to_float(static_cast<const uint16_t*>(v.data)[i]);
      break;
    default:
      for (int64_t i = 0; i < n; ++i)
        out[static_cast<size_t>(i)] = bfloat16_to_float(static_cast<const uint16_t*>(v.data)[i]);
      break;
  }
}

void store(const View& out, int64_t i, float v) {
  switch (out.dtype) {
    case DType::kFloat32: static_cast<float*>(out.data)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(out.data)[i] = float_to_half(v); break;
    default: static_cast<uint16_t*>(out.data)[i] = float_to_bfloat16(v); break;
  }
}

struct Weight {
  const rt::WeightOnlyDotAttrs* a;
  const int8_t* bytes;  // [N, row_bytes]
  const float* scale;   // [N, groups]
  const float* zero;    // [N, groups], or null
  int64_t K, row_bytes, groups;

  // Row n of the weight, dequantized: (q - zero) * scale per element.
  void row(int64_t n, float* w) const {
    const int8_t* q = bytes + n * row_bytes;
    const float* s = scale + n * groups;
    const float* z = zero ? zero + n * groups : nullptr;
    const int64_t gs = a->group_size;
    for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += gs) {
      const int64_t k1 = std::min(K, k0 + gs);
      const float sg = s[g], zg = z ? z[g] : 0.0f;
      if (a->bits == 8) {
        for (int64_t k = k0; k < k1; ++k) w[k] = (static_cast<float>(q[k]) - zg) * sg;
      } else {
        for (int64_t k = k0; k < k1; ++k) {
          const int u = (static_cast<uint8_t>(q[k >> 1]) >> ((k & 1) * 4)) & 15;
          w[k] = (static_cast<float>(u - 8) - zg) * sg;
        }
      }
    }
  }
};

float dot(const float* x, const float* w, int64_t K) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[k + j] * w[k + j];
  float s = 0;
  for (; k < K; ++k) s += x[k] * w[k];
  return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

Status run_weight_only_dot(const KernelArgs& args) {
  const rt::WeightOnlyDotAttrs& a = args.kernel->weight_only_dot;
  const View& xv = *args.inputs[0];
  const View& out = *args.outputs[0];
  const int64_t K = xv.shape.back(), N = args.inputs[1]->shape[0];
  if (out.numel() == 0) return ok_status();
  const int64_t rows = out.numel() / N;
  std::vector<float> x, scale, zero;
  to_float(xv, x);
  to_float(*args.inputs[2], scale);
  if (a.has_zero) to_float(*args.inputs[3], zero);
  const Weight w{&a,
                 static_cast<const int8_t*>(args.inputs[1]->data),
                 scale.data(),
                 a.has_zero ? zero.data() : nullptr,
                 K,
                 args.inputs[1]->shape[1],
                 args.inputs[2]->shape[1]};
  if (rows <= kFewRows) {
    parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> wr(static_cast<size_t>(K));
      for (int64_t n = b; n < e; ++n) {
        w.row(n, wr.data());
        for (int64_t r = 0; r < rows; ++r) store(out, r * N + n, dot(x.data() + r * K, wr.data(), K));
      }
    });
    return ok_status();
  }
  const int64_t tiles = (N + kTile - 1) / kTile;
  parallel_for(tiles, 1, [&](int64_t b, int64_t e) {
    std::vector<float> wt(static_cast<size_t>(kTile * K)), c(static_cast<size_t>(rows * kTile));
    for (int64_t t = b; t < e; ++t) {
      const int64_t n0 = t * kTile, nt = std::min(kTile, N - n0);
      for (int64_t j = 0; j < nt; ++j) w.row(n0 + j, wt.data() + j * K);
      // B[k, j] = wt[j * K + k]: the tile read transposed.
      gemm_f32(rows, nt, K, MatRef<float>{x.data(), K, 1}, MatRef<float>{wt.data(), 1, K}, c.data(), 0, rows);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < nt; ++j) store(out, r * N + n0 + j, c[static_cast<size_t>(r * nt + j)]);
    }
  });
  return ok_status();
}

}  // namespace

const CpuKernel kWeightOnlyDotKernel = {nullptr,
                                        [](const KernelArgs& args, KernelState*) { return run_weight_only_dot(args); }};

}  // namespace tripy::cpu

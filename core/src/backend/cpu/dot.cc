// kDot on the CPU: batched GEMM with transposes, numpy batch broadcasting, bias and activation.
// float32 runs through oneDNN's matmul (primitives cached per shape in the kernel's state) when
// the product is big enough to repay its overhead, else through the built-in GEMM; narrow floats
// convert to float32 around it (float8 operands too, for the quantized dot's float32 result);
// int8 x int8 -> int32 (the quantized dot) has its own int32-accumulating kernel; other integers
// use an int64-accumulating loop.
#include <cmath>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/dot_dnnl.h"
#include "backend/cpu/fused_ops.h"
#include "common/half.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/thread_pool.h"

namespace tripy::cpu {
namespace {

// Path choice by multiply-adds per batch, measured with cpu_bench_test (2-core AVX2 machine):
// 1x2x8 costs 0.02 us in plain loops vs 1.6 us through a cached oneDNN primitive; the blocked
// GEMM wins up to ~32^3 (2.9 us vs 2.5 us there), oneDNN beyond.
constexpr int64_t kDnnlMinMacs = 32 * 32 * 32;
constexpr int64_t kBlockedMinMacs = 8 * 8 * 8;

class DotState final : public KernelState {
 public:
  DnnlMatmulCache dnnl;
  std::vector<float> lhs_f32, rhs_f32, bias_f32, out_f32;
  std::vector<int8_t> packed_s8;  // the quantized dot's rhs, K-contiguous per column
};

// Converts n elements of `dtype` at src to float32 (or copies float32 when it is already).
void to_f32(DType dtype, const void* src, int64_t n, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += kTile)
    load_span(dtype, src, i, 1, static_cast<int>(std::min<int64_t>(kTile, n - i)), dst.data() + i);
}

void from_f32(DType dtype, const float* src, int64_t n, void* dst) {
  for (int64_t i = 0; i < n; i += kTile)
    store_span(dtype, dst, i, src + i, static_cast<int>(std::min<int64_t>(kTile, n - i)));
}

template <class T>
void epilogue(T* out, int64_t rows, int64_t N, const T* bias, rt::Activation act) {
  for (int64_t i = 0; i < rows; ++i) {
    T* row = out + i * N;
    if (bias)
      for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
    if constexpr (std::is_same_v<T, float>) {
      activate_span(act, row, N);
    } else if (act == rt::Activation::kRelu) {  // integers: relu only (gelu is rejected before)
      for (int64_t j = 0; j < N; ++j) row[j] = row[j] > T(0) ? row[j] : T(0);
    }
  }
}

}  // namespace

std::unique_ptr<KernelState> prepare_dot() { return std::make_unique<DotState>(); }

Status run_dot(const KernelArgs& args, KernelState& state) {
  auto& st = static_cast<DotState&>(state);
  const rt::DotAttrs& attrs = args.kernel->dot;
  const size_t nin = attrs.has_bias ? 3 : 2;
  if (args.inputs.size() != nin || args.outputs.size() != 1)
    return kernel_error(args, "dot takes " + std::to_string(nin) + " inputs and one output",
                        StatusCode::kInternal);
  const View& lhs = *args.inputs[0];
  const View& rhs = *args.inputs[1];
  const View& out = *args.outputs[0];
  const View* bias = attrs.has_bias ? args.inputs[2] : nullptr;
  if (lhs.shape.size() < 2 || rhs.shape.size() < 2 || out.shape.size() < 2)
    return kernel_error(args, "dot operands need at least 2 dims", StatusCode::kInternal);
  // Quantized operands (int8, float8) may write their wider accumulator (int32, float32); float8
  // also a scaled sum in float16 or bfloat16 (rt::DotAttrs::scale).
  if (lhs.dtype != rhs.dtype || !rt::dot_kernel_writes(lhs.dtype, out.dtype) || (bias && bias->dtype != out.dtype))
    return kernel_error(args, "dot operands must share a dtype, and the output must have it or their accumulator's",
                        StatusCode::kInternal);

  DotShape s;
  const size_t lr = lhs.shape.size(), rr = rhs.shape.size();
  s.M = lhs.shape[lr - (attrs.transpose_lhs ? 1 : 2)];
  s.K = lhs.shape[lr - (attrs.transpose_lhs ? 2 : 1)];
  const int64_t k_rhs = rhs.shape[rr - (attrs.transpose_rhs ? 1 : 2)];
  s.N = rhs.shape[rr - (attrs.transpose_rhs ? 2 : 1)];
  s.batch.assign(out.shape.begin(), out.shape.end() - 2);
  const size_t nb = s.batch.size();
  bool ok = k_rhs == s.K && out.shape[nb] == s.M && out.shape[nb + 1] == s.N &&
            lr - 2 <= nb && rr - 2 <= nb && (!bias || (bias->numel() == s.N));
  // Batch dims right-aligned, each 1 or the output's.
  s.lhs_batch.assign(nb, 1);
  s.rhs_batch.assign(nb, 1);
  for (size_t d = 0; ok && d < lr - 2; ++d) s.lhs_batch[nb - (lr - 2) + d] = lhs.shape[d];
  for (size_t d = 0; ok && d < rr - 2; ++d) s.rhs_batch[nb - (rr - 2) + d] = rhs.shape[d];
  for (size_t d = 0; ok && d < nb; ++d)
    ok = (s.lhs_batch[d] == 1 || s.lhs_batch[d] == s.batch[d]) &&
         (s.rhs_batch[d] == 1 || s.rhs_batch[d] == s.batch[d]);
  if (!ok)
    return kernel_error(args, "dot operand shapes do not agree (M=" + std::to_string(s.M) +
                                  ", K=" + std::to_string(s.K) + " vs " + std::to_string(k_rhs) +
                                  ", N=" + std::to_string(s.N) + ")");
  s.transpose_lhs = attrs.transpose_lhs;
  s.transpose_rhs = attrs.transpose_rhs;
  s.has_bias = attrs.has_bias;
  s.activation = attrs.activation;
  s.rhs_constant = rhs.dtype == DType::kFloat32 && args.program->is_constant(args.kernel->inputs[1]);
  const int64_t batches = numel_of(s.batch);
  if (batches * s.M * s.N == 0) return ok_status();

  const bool floating = is_floating(out.dtype);
  if (!floating && attrs.activation == rt::Activation::kGelu)
    return kernel_error(args, "gelu needs a floating-point dot");

  // Float path: everything as float32, converted around the GEMM when the dtype is narrower.
  if (floating) {
    const float *a = static_cast<const float*>(lhs.data), *b = static_cast<const float*>(rhs.data);
    const float* bi = bias ? static_cast<const float*>(bias->data) : nullptr;
    float* c = static_cast<float*>(out.data);
    if (lhs.dtype != DType::kFloat32) {  // float8 operands widen exactly; their products sum in float32
      to_f32(lhs.dtype, lhs.data, lhs.numel(), st.lhs_f32);
      to_f32(rhs.dtype, rhs.data, rhs.numel(), st.rhs_f32);
      a = st.lhs_f32.data();
      b = st.rhs_f32.data();
    }
    if (out.dtype != DType::kFloat32) {
      if (bias) to_f32(bias->dtype, bias->data, bias->numel(), st.bias_f32);
      st.out_f32.resize(static_cast<size_t>(out.numel()));
      bi = bias ? st.bias_f32.data() : nullptr;
      c = st.out_f32.data();
    }
    bool done = false;
    if (s.M * s.N * s.K >= kDnnlMinMacs) {
      Status dn = st.dnnl.run(s, a, b, bi, c, done);
      if (!dn.ok()) return kernel_error(args, dn.message(), dn.code());
    }
    if (!done) {
      for_each_batch(s, [&](int64_t, int64_t lo, int64_t ro, int64_t oo) {
        MatRef<float> ma = s.lhs_ref(a + lo), mb = s.rhs_ref(b + ro);
        float* co = c + oo;
        if (s.M * s.N * s.K < kBlockedMinMacs) {
          gemm_f32_small(s.M, s.N, s.K, ma, mb, co);
          epilogue(co, s.M, s.N, bi, s.activation);
          return;
        }
        const int64_t work = s.M * s.N * s.K;
        auto rows = [&](int64_t m0, int64_t m1) {
          gemm_f32(s.M, s.N, s.K, ma, mb, co, m0, m1);
          epilogue(co + m0 * s.N, m1 - m0, s.N, bi, s.activation);
        };
        if (work < (1 << 21)) rows(0, s.M);
        else parallel_for(s.M, 64, rows);
      });
    }
    if (attrs.scale != 1.0) {  // no bias or activation (the rules): the sum scaled, then rounded once
      const float scale = static_cast<float>(attrs.scale);
      for (int64_t i = 0; i < out.numel(); ++i) c[i] *= scale;
    }
    if (out.dtype != DType::kFloat32) from_f32(out.dtype, c, out.numel(), out.data);
    return ok_status();
  }

  // The quantized dot: int8 operands summed exactly in int32.
  if (lhs.dtype == DType::kInt8 && out.dtype == DType::kInt32 && !bias && attrs.activation == rt::Activation::kNone) {
    st.packed_s8.resize(static_cast<size_t>(s.K * s.N));
    int64_t packed_from = -1;  // a rhs shared by every batch is packed once
    for_each_batch(s, [&](int64_t, int64_t lo, int64_t ro, int64_t oo) {
      const auto* a8 = static_cast<const int8_t*>(lhs.data) + lo;
      if (ro != packed_from)
        pack_s8_columns(s.K, s.N, s.rhs_ref(static_cast<const int8_t*>(rhs.data) + ro), st.packed_s8.data());
      packed_from = ro;
      int32_t* co = static_cast<int32_t*>(out.data) + oo;
      auto rows = [&](int64_t m0, int64_t m1) {
        gemm_s8s32(s.M, s.N, s.K, s.lhs_ref(a8), st.packed_s8.data(), co, m0, m1);
      };
      if (s.M * s.N * s.K < (1 << 21)) rows(0, s.M);
      else parallel_for(s.M, 16, rows);
    });
    return ok_status();
  }

  // Integers: widen to int64, multiply, wrap back to the dtype on store.
  std::vector<int64_t> a64(static_cast<size_t>(lhs.numel())), b64(static_cast<size_t>(rhs.numel()));
  std::vector<int64_t> c64(static_cast<size_t>(out.numel())), bias64;
  auto widen = [](const View& v, std::vector<int64_t>& dst) {
    for (int64_t i = 0; i < v.numel(); ++i) {
      switch (v.dtype) {
        case DType::kInt4: case DType::kInt8: dst[i] = static_cast<const int8_t*>(v.data)[i]; break;
        case DType::kInt32: dst[i] = static_cast<const int32_t*>(v.data)[i]; break;
        case DType::kInt64: dst[i] = static_cast<const int64_t*>(v.data)[i]; break;
        default: dst[i] = static_cast<const uint8_t*>(v.data)[i] != 0; break;
      }
    }
  };
  widen(lhs, a64);
  widen(rhs, b64);
  if (bias) {
    bias64.resize(static_cast<size_t>(bias->numel()));
    widen(*bias, bias64);
  }
  for_each_batch(s, [&](int64_t, int64_t lo, int64_t ro, int64_t oo) {
    gemm_i64(s.M, s.N, s.K, s.lhs_ref(a64.data() + lo), s.rhs_ref(b64.data() + ro), c64.data() + oo);
    epilogue(c64.data() + oo, s.M, s.N, bias ? bias64.data() : nullptr, s.activation);
  });
  for (int64_t i = 0; i < out.numel(); ++i) {
    switch (out.dtype) {
      case DType::kInt4: static_cast<int8_t*>(out.data)[i] = wrap_int4(c64[i]); break;
      case DType::kInt8: static_cast<int8_t*>(out.data)[i] = static_cast<int8_t>(c64[i]); break;
      case DType::kInt32: static_cast<int32_t*>(out.data)[i] = static_cast<int32_t>(c64[i]); break;
      case DType::kInt64: static_cast<int64_t*>(out.data)[i] = c64[i]; break;
      default: static_cast<uint8_t*>(out.data)[i] = c64[i] != 0; break;
    }
  }
  return ok_status();
}

const CpuKernel kDotKernel = {
    [](const rt::Program&, const rt::Kernel&, SourceRef) -> StatusOr<std::unique_ptr<KernelState>> { return prepare_dot(); },
    [](const KernelArgs& args, KernelState* state) { return run_dot(args, *state); }};

}  // namespace tripy::cpu

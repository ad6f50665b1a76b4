// kSample on the GPU (the module's NVRTC compile for each dtype: cuda_kernel_files_test.cc): the
// GPU draws exactly the CPU backend's tokens for the same logits and keys (greedy, temperature, top-k, top-p, ties, NaN and infinite rows,
// vocabularies up to 256K), directly and through CUDA graph replays with a new key each run.
// Python's view (statistics against numpy, both devices): tests/frontend/ops/test_sample.py.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cmath>
#include <limits>
#include <random>

#include "backend/cuda/codegen/cuda_builder.h"
#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_cases.h"

namespace tripy::cuda_testing {
namespace {

// Logits like a language model's: mostly spread out, a few tokens far ahead, some exact ties.
Tensor lm_logits(DType t, int64_t rows, int64_t V, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> v(static_cast<size_t>(rows * V));
  for (float& x : v) x = normal(rng);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v.data() + r * V;
    for (int j = 0; j < 5; ++j) row[rng() % V] = 9.0f + j * 0.5f;
    if (V > 3) row[1] = row[2] = row[3];  // a tie
  }
  if (specials && rows >= 4) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    v[static_cast<size_t>(0 * V + V / 2)] = nan;  // row 0: greedy, the NaN
    v[static_cast<size_t>(1 * V + V / 3)] = inf;  // row 1: greedy, the infinity
    for (int64_t i = 0; i < V; ++i) v[static_cast<size_t>(2 * V + i)] = -inf;  // row 2: index 0
  }
  Tensor out = Tensor::empty_host(t, {rows, V});
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) static_cast<float*>(out.data())[i] = v[i];
    if (t == DType::kFloat16) static_cast<uint16_t*>(out.data())[i] = cpu::float_to_half(v[i]);
    if (t == DType::kBFloat16) static_cast<uint16_t*>(out.data())[i] = cpu::float_to_bfloat16(v[i]);
  }
  return out;
}

struct SampleCase {
  std::string name;
  DType dtype;
  int64_t rows, V;
  SampleAttrs attrs;
};

SampleAttrs sample_attrs(double temperature, int64_t top_k = 0, double top_p = 1.0) {
  SampleAttrs a;
  a.temperature = temperature;
  a.top_k = top_k;
  a.top_p = top_p;
  return a;
}

std::vector<SampleCase> sample_cases() {
  const DType F = DType::kFloat32, H = DType::kFloat16, BF = DType::kBFloat16;
  return {
      {"greedy_f32", F, 5, 1000, sample_attrs(0)},
      // Rows spread over many blocks for the argmax: a NaN, an infinity, a row of -inf, a tie.
      {"greedy_128k_bf16", BF, 4, 128256, sample_attrs(0)},
      {"one_row_128k_bf16", BF, 1, 128256, sample_attrs(0.9, 40, 0.95)},
      {"plain_f32", F, 8, 1000, sample_attrs(1.0)},
      {"tiny_vocab", F, 4, 7, sample_attrs(1.0)},
      {"one_token", F, 4, 1, sample_attrs(0.8, 3, 0.5)},
      {"top_k_f16", H, 6, 50257, sample_attrs(0.7, 50)},
      {"top_p_bf16", BF, 6, 32000, sample_attrs(1.3, 0, 0.9)},
      {"top_k_top_p_f32", F, 64, 32000, sample_attrs(0.8, 200, 0.95)},
      {"top_k_one", F, 4, 5000, sample_attrs(2.0, 1)},
      {"small_top_p", F, 4, 5000, sample_attrs(1.0, 0, 0.05)},
      {"hot_256k", BF, 3, 262144, sample_attrs(3.0, 0, 0.99)},
      {"cold_256k", F, 2, 262144, sample_attrs(0.2, 4096, 0.8)},
  };
}

GpuCase sample_program(const SampleCase& s) {
  ProgramBuilder b;
  const int32_t x = b.input(s.dtype, {s.rows, s.V}), key = b.input(DType::kInt64, {1});
  const int32_t out = b.output(DType::kInt32, {s.rows});
  b.kernel(KernelKind::kSample, s.name, {x, key}, {out}).sample = s.attrs;
  GpuCase c = finish(s.name, b);
  c.inputs[0] = lm_logits(s.dtype, s.rows, s.V, 17, true);
  return c;
}

TEST(CudaSample, TheGpuDrawsTheCpusTokensForEveryKey) {
  if (!rt::cuda_backend()->available()) GTEST_SKIP() << "no usable GPU: " << rt::cuda_device_description();
  for (const SampleCase& s : sample_cases()) {
    SCOPED_TRACE(s.name);
    GpuCase c = sample_program(s);
    auto cpu = rt::cpu_backend()->load(std::make_shared<rt::Program>(c.program), {});
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    auto art = rt::cuda_builder()->build(c.program, rt::BuildOptions{1});
    ASSERT_TRUE(art.ok()) << art.status().message();
    auto gpu = rt::cuda_backend()->load(std::make_shared<rt::Program>(c.program), *art);
    ASSERT_TRUE(gpu.ok()) << gpu.status().message();
    auto logits = rt::cuda_backend()->copy_from_host(c.inputs[0]);
    ASSERT_TRUE(logits.ok());
    // Many keys through one loaded program: later runs replay a CUDA graph with the new key.
    for (int64_t key : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{-7}, int64_t{123456789}, int64_t{1} << 62,
                        int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6}}) {
      Tensor host_key = Tensor::empty_host(DType::kInt64, {1});
      *static_cast<int64_t*>(host_key.data()) = key;
      auto want = (*cpu)->run({c.inputs[0], host_key}, c.slots);
      ASSERT_TRUE(want.ok()) << want.status().message();
      auto dev_key = rt::cuda_backend()->copy_from_host(host_key);
      ASSERT_TRUE(dev_key.ok());
      auto got = (*gpu)->run({*logits, *dev_key}, c.slots);
      ASSERT_TRUE(got.ok()) << got.status().message();
      auto back = rt::cuda_backend()->copy_to_host((*got)[0]);
      ASSERT_TRUE(back.ok());
      const int32_t* w = static_cast<const int32_t*>((*want)[0].data());
      const int32_t* g = static_cast<const int32_t*>(back->data());
      for (int64_t r = 0; r < s.rows; ++r) EXPECT_EQ(w[r], g[r]) << "key " << key << " row " << r;
    }
  }
}

}  // namespace
}  // namespace tripy::cuda_testing

#endif

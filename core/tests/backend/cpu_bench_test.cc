// Micro-measurements of the CPU backend (disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='*CpuBench*'). They print timings and check
// results only, since the build machines are shared.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "backend/cpu/dot_dnnl.h"
#include "backend/cpu/gemm.h"
#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;

template <class Fn>
double best_us(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return best;
}

TEST(CpuBench, DISABLED_TinyAddRunLatency) {
  ProgramBuilder b;
  int32_t x = b.input(F, {2, 3}), y = b.input(F, {2, 3}), o = b.output(F, {2, 3});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_add", {x, y}, {o});
  k.fused.domain = b.dims({2, 3});
  k.fused.reduce_from = 2;
  k.fused.input_axes = {{0, 1}, {0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kAdd, F, 0, 1)};
  k.fused.output_regs = {2};
  std::vector<Tensor> in = {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {1, 1, 1, 1, 1, 1})};
  ASSERT_TRUE(b.run(in).ok());
  const int n = 20000;
  double us = best_us(5, [&] {
    for (int i = 0; i < n; ++i) (void)b.run(in);
  }) / n;
  std::printf("2x3 add, LoadedProgram::run: %.3f us/call\n", us);
  EXPECT_LT(us, 50.0);
}

TEST(CpuBench, DISABLED_TinyDot) {
  auto a = random_floats(2, -1, 1, 1), w = random_floats(16, -1, 1, 2);
  std::vector<float> c(8);
  DotShape s;
  s.M = 1, s.K = 2, s.N = 8;
  DnnlMatmulCache cache;
  bool done = false;
  (void)cache.run(s, a.data(), w.data(), nullptr, c.data(), done);
  const int n = 20000;
  double dnnl_us = best_us(3, [&] {
    for (int i = 0; i < n; ++i) (void)cache.run(s, a.data(), w.data(), nullptr, c.data(), done);
  }) / n;
  double small_us = best_us(3, [&] {
    for (int i = 0; i < n; ++i) gemm_f32_small(1, 8, 2, {a.data(), 2, 1}, {w.data(), 8, 1}, c.data());
  }) / n;
  std::printf("1x2 @ 2x8: oneDNN (cached) %.3f us (ran=%d), loops %.3f us\n", dnnl_us, done, small_us);
  for (int64_t sz : {8, 16, 32, 48, 64}) {
    auto A = random_floats(sz * sz, -1, 1, 3), B = random_floats(sz * sz, -1, 1, 4);
    std::vector<float> C(sz * sz);
    DotShape q;
    q.M = q.N = q.K = sz;
    int reps = static_cast<int>(200000 / sz / sz);
    (void)cache.run(q, A.data(), B.data(), nullptr, C.data(), done);
    double d = best_us(3, [&] { for (int i = 0; i < reps; ++i) (void)cache.run(q, A.data(), B.data(), nullptr, C.data(), done); }) / reps;
    double l = best_us(3, [&] { for (int i = 0; i < reps; ++i) gemm_f32_small(sz, sz, sz, {A.data(), sz, 1}, {B.data(), sz, 1}, C.data()); }) / reps;
    double g = best_us(3, [&] { for (int i = 0; i < reps; ++i) gemm_f32(sz, sz, sz, {A.data(), sz, 1}, {B.data(), sz, 1}, C.data(), 0, sz); }) / reps;
    std::printf("%ld^3: oneDNN %.2f us, small loops %.2f us, blocked %.2f us\n", static_cast<long>(sz), d, l, g);
  }
}

TEST(CpuBench, DISABLED_LargeGemm) {
  const int64_t M = 1024, K = 4096, N = 1024;
  auto A = random_floats(M * K, -1, 1, 5), B = random_floats(K * N, -1, 1, 6);
  std::vector<float> C(M * N), C2(M * N);
  DotShape s;
  s.M = M, s.N = N, s.K = K;
  DnnlMatmulCache cache;
  bool done = false;
  (void)cache.run(s, A.data(), B.data(), nullptr, C.data(), done);
  double d = best_us(3, [&] { (void)cache.run(s, A.data(), B.data(), nullptr, C.data(), done); });
  double g = best_us(1, [&] { gemm_f32(M, N, K, {A.data(), K, 1}, {B.data(), N, 1}, C2.data(), 0, M); });
  const double flops = 2.0 * M * N * K;
  std::printf("1024x4096x1024 f32: oneDNN %.1f GFLOP/s (ran=%d), built-in (1 thread) %.1f GFLOP/s\n",
              flops / d / 1e3, done, flops / g / 1e3);
  for (int64_t i = 0; i < M * N; i += 4099) ASSERT_NEAR(C[i], C2[i], 1e-2);
}

// Softmax over rows of `C` (row-level overhead dominates when C is small).
double softmax_us(int64_t R, int64_t C) {
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), o = b.output(F, {R, C});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_softmax", {x}, {o});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceMax, F, 0), ins(EwOp::kSub, F, 0, 1),
                    ins(EwOp::kExp, F, 2), ins(EwOp::kReduceSum, F, 3), ins(EwOp::kDiv, F, 3, 4)};
  k.fused.output_regs = {5};
  std::vector<Tensor> in = {f32({R, C}, random_floats(R * C, -5, 5, 9))};
  EXPECT_TRUE(b.run(in).ok());
  return best_us(5, [&] { (void)b.run(in); });
}

TEST(CpuBench, DISABLED_SoftmaxShortRows) {
  const int64_t R = 1 << 18, C = 8;
  double us = softmax_us(R, C);
  std::printf("softmax %ldx%ld f32: %.0f us (%.1f ns/row)\n", static_cast<long>(R),
              static_cast<long>(C), us, us * 1e3 / R);
}

TEST(CpuBench, DISABLED_SoftmaxThroughput) {
  const int64_t R = 4096, C = 1024;
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), o = b.output(F, {R, C});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_softmax", {x}, {o});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceMax, F, 0), ins(EwOp::kSub, F, 0, 1),
                    ins(EwOp::kExp, F, 2), ins(EwOp::kReduceSum, F, 3), ins(EwOp::kDiv, F, 3, 4)};
  k.fused.output_regs = {5};
  std::vector<Tensor> in = {f32({R, C}, random_floats(R * C, -5, 5, 9))};
  ASSERT_TRUE(b.run(in).ok());
  double us = best_us(5, [&] { (void)b.run(in); });
  std::printf("softmax 4096x1024 f32: %.0f us (%.2f GB/s in+out)\n", us, 2.0 * R * C * 4 / us / 1e3);
  // elementwise: gelu-like chain
  ProgramBuilder e;
  int32_t ex = e.input(F, {R, C}), eo = e.output(F, {R, C});
  Kernel& ek = e.kernel(KernelKind::kFused, "fused_gelu", {ex}, {eo});
  ek.fused.domain = e.dims({R, C});
  ek.fused.reduce_from = 2;
  ek.fused.input_axes = {{0, 1}};
  ek.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kConst, F, -1, -1, -1, 0.7071), ins(EwOp::kMul, F, 0, 1),
                     ins(EwOp::kErf, F, 2), ins(EwOp::kConst, F, -1, -1, -1, 1), ins(EwOp::kAdd, F, 3, 4),
                     ins(EwOp::kMul, F, 0, 5)};
  ek.fused.output_regs = {6};
  ASSERT_TRUE(e.run(in).ok());
  double eus = best_us(5, [&] { (void)e.run(in); });
  std::printf("gelu(erf) 4096x1024 f32: %.0f us (%.2f Gelem/s)\n", eus, R * C / eus / 1e3);
}

}  // namespace
}  // namespace tripy::cpu::testing

// Fused row reductions on the CPU backend: softmax and layernorm shaped programs, every reduce
// op, reductions over several trailing axes, per-row outputs and many rows (threaded).
#include <cmath>

#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;

// softmax over the last axis of x[R, C]: max-reduce, exp(x - max), sum-reduce, divide.
std::vector<float> run_softmax(int64_t R, int64_t C, const std::vector<float>& xv, DType dt = F) {
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), o = b.output(F, {R, C});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_softmax", {x}, {o});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}};
  k.fused.instrs = {
      ins(EwOp::kLoad, F, 0),          // %0 x
      ins(EwOp::kReduceMax, F, 0),     // %1 max (row)
      ins(EwOp::kSub, F, 0, 1),        // %2 x - max
      ins(EwOp::kExp, F, 2),           // %3
      ins(EwOp::kReduceSum, F, 3),     // %4 sum (row)
      ins(EwOp::kDiv, F, 3, 4),        // %5
  };
  k.fused.output_regs = {5};
  auto out = b.run({f32({R, C}, xv)});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? values<float>((*out)[0]) : std::vector<float>();
}

void check_softmax(int64_t R, int64_t C) {
  auto xv = random_floats(R * C, -10, 10, static_cast<uint32_t>(R * 31 + C));
  auto got = run_softmax(R, C, xv);
  ASSERT_EQ(got.size(), xv.size());
  for (int64_t i = 0; i < R; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < C; ++j) mx = std::max<double>(mx, xv[i * C + j]);
    for (int64_t j = 0; j < C; ++j) sum += std::exp(xv[i * C + j] - mx);
    for (int64_t j = 0; j < C; ++j)
      ASSERT_NEAR(got[i * C + j], std::exp(xv[i * C + j] - mx) / sum, 1e-6) << R << "x" << C;
  }
}

TEST(CpuReduce, SoftmaxSmallRows) { check_softmax(5, 3); }
TEST(CpuReduce, SoftmaxRowsLongerThanATile) { check_softmax(7, 1500); }
TEST(CpuReduce, SoftmaxManyRowsThreaded) { check_softmax(4096, 96); }

TEST(CpuReduce, LayerNormWithAffineAndRowOutputs) {
  // y = (x - mean) * rsqrt(var + eps) * gamma + beta over the last axis; also emits mean per row.
  const int64_t R = 33, C = 257;
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), g = b.input(F, {C}), be = b.input(F, {C});
  int32_t o = b.output(F, {R, C}), m = b.output(F, {R});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_layernorm", {x, g, be}, {o, m});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}, {1}, {1}};
  k.fused.instrs = {
      ins(EwOp::kLoad, F, 0),                        // %0 x
      ins(EwOp::kReduceSum, F, 0),                   // %1 sum x
      ins(EwOp::kConst, F, -1, -1, -1, 1.0 / C),     // %2 1/C
      ins(EwOp::kMul, F, 1, 2),                      // %3 mean (row)
      ins(EwOp::kSub, F, 0, 3),                      // %4 x - mean
      ins(EwOp::kMul, F, 4, 4),                      // %5 sq
      ins(EwOp::kReduceSum, F, 5),                   // %6
      ins(EwOp::kMul, F, 6, 2),                      // %7 var (row)
      ins(EwOp::kConst, F, -1, -1, -1, 1e-5),        // %8 eps
      ins(EwOp::kAdd, F, 7, 8),                      // %9
      ins(EwOp::kRsqrt, F, 9),                       // %10 (row)
      ins(EwOp::kMul, F, 4, 10),                     // %11
      ins(EwOp::kLoad, F, 1),                        // %12 gamma
      ins(EwOp::kMul, F, 11, 12),                    // %13
      ins(EwOp::kLoad, F, 2),                        // %14 beta
      ins(EwOp::kAdd, F, 13, 14),                    // %15
  };
  k.fused.output_regs = {15, 3};
  auto xv = random_floats(R * C, -3, 5, 11), gv = random_floats(C, 0.5, 1.5, 12), bv = random_floats(C, -1, 1, 13);
  auto out = b.run({f32({R, C}, xv), f32({C}, gv), f32({C}, bv)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto y = values<float>((*out)[0]), mean = values<float>((*out)[1]);
  for (int64_t i = 0; i < R; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < C; ++j) mu += xv[i * C + j];
    mu /= C;
    for (int64_t j = 0; j < C; ++j) var += (xv[i * C + j] - mu) * (xv[i * C + j] - mu);
    var /= C;
    ASSERT_NEAR(mean[i], mu, 1e-5);
    for (int64_t j = 0; j < C; ++j)
      ASSERT_NEAR(y[i * C + j], (xv[i * C + j] - mu) / std::sqrt(var + 1e-5) * gv[j] + bv[j], 2e-4);
  }
}

// One reduction over the trailing `reduced` axes of x; returns the per-row output.
template <class T>
std::vector<T> run_reduce(EwOp op, DType dt, const std::vector<int64_t>& shape, int32_t reduce_from,
                          const Tensor& x) {
  ProgramBuilder b;
  int32_t in = b.input(dt, shape);
  int32_t o = b.output(dt, std::vector<int64_t>(shape.begin(), shape.begin() + reduce_from));
  Kernel& k = b.kernel(KernelKind::kFused, "fused_reduce", {in}, {o});
  k.fused.domain = b.dims(shape);
  k.fused.reduce_from = reduce_from;
  std::vector<int32_t> axes;
  for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int32_t>(d));
  k.fused.input_axes = {axes};
  k.fused.instrs = {ins(EwOp::kLoad, dt, 0), ins(op, dt, 0)};
  k.fused.output_regs = {1};
  auto out = b.run({x});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? values<T>((*out)[0]) : std::vector<T>();
}

TEST(CpuReduce, EveryReduceOpOverTwoTrailingAxes) {
  const std::vector<int64_t> shape = {3, 4, 5};
  auto xv = random_floats(60, 0.5f, 1.5f, 5);
  Tensor x = f32(shape, xv);
  auto sum = run_reduce<float>(EwOp::kReduceSum, F, shape, 1, x);
  auto prod = run_reduce<float>(EwOp::kReduceProd, F, shape, 1, x);
  auto mx = run_reduce<float>(EwOp::kReduceMax, F, shape, 1, x);
  auto mn = run_reduce<float>(EwOp::kReduceMin, F, shape, 1, x);
  ASSERT_EQ(sum.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    double s = 0, p = 1, hi = -INFINITY, lo = INFINITY;
    for (int j = 0; j < 20; ++j) {
      double v = xv[i * 20 + j];
      s += v;
      p *= v;
      hi = std::max(hi, v);
      lo = std::min(lo, v);
    }
    EXPECT_NEAR(sum[i], s, 1e-4);
    EXPECT_NEAR(prod[i], p, 1e-4 * std::fabs(p));
    EXPECT_EQ(mx[i], static_cast<float>(hi));
    EXPECT_EQ(mn[i], static_cast<float>(lo));
  }
}

TEST(CpuReduce, IntegerAndFullReductions) {
  Tensor x = make_tensor<int64_t>(DType::kInt64, {2, 3}, {1, -2, 3, 4, 5, -6});
  EXPECT_EQ(run_reduce<int64_t>(EwOp::kReduceSum, DType::kInt64, {2, 3}, 1, x), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(run_reduce<int64_t>(EwOp::kReduceProd, DType::kInt64, {2, 3}, 1, x), (std::vector<int64_t>{-6, -120}));
  EXPECT_EQ(run_reduce<int64_t>(EwOp::kReduceMax, DType::kInt64, {2, 3}, 1, x), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(run_reduce<int64_t>(EwOp::kReduceMin, DType::kInt64, {2, 3}, 0, x), (std::vector<int64_t>{-6}));
  Tensor bx = make_tensor<uint8_t>(DType::kBool, {2, 2}, {0, 1, 1, 1});
  EXPECT_EQ(run_reduce<uint8_t>(EwOp::kReduceMin, DType::kBool, {2, 2}, 1, bx), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(run_reduce<uint8_t>(EwOp::kReduceMax, DType::kBool, {2, 2}, 1, bx), (std::vector<uint8_t>{1, 1}));
}

TEST(CpuReduce, SumOfALongRowIsAccurate) {
  const int64_t n = 1 << 18;
  std::vector<float> xv(n, 0.1f);
  auto s = run_reduce<float>(EwOp::kReduceSum, F, {n}, 0, f32({n}, xv));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_NEAR(s[0], 0.1 * n, 0.1 * n * 1e-4);
}

TEST(CpuReduce, EmptyRowsGiveTheIdentity) {
  auto s = run_reduce<float>(EwOp::kReduceSum, F, {3, 0}, 1, f32({3, 0}, {}));
  EXPECT_EQ(s, (std::vector<float>{0, 0, 0}));
  auto m = run_reduce<float>(EwOp::kReduceMax, F, {2, 0}, 1, f32({2, 0}, {}));
  EXPECT_EQ(m, (std::vector<float>{-INFINITY, -INFINITY}));
}

TEST(CpuReduce, ReduceOverAMiddleBroadcastInput) {
  // out[i] = sum_j x[i, j] * w[j] with w broadcast along rows (a GEMV as a fused reduction).
  const int64_t R = 9, C = 1030;
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), w = b.input(F, {1, C}), o = b.output(F, {R});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_gemv", {x, w}, {o});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}, {0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kMul, F, 0, 1),
                    ins(EwOp::kReduceSum, F, 2)};
  k.fused.output_regs = {3};
  auto xv = random_floats(R * C, -1, 1, 21), wv = random_floats(C, -1, 1, 22);
  auto out = b.run({f32({R, C}, xv), f32({1, C}, wv)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto got = values<float>((*out)[0]);
  for (int64_t i = 0; i < R; ++i) {
    double s = 0;
    for (int64_t j = 0; j < C; ++j) s += static_cast<double>(xv[i * C + j]) * wv[j];
    EXPECT_NEAR(got[i], s, 1e-4);
  }
}

}  // namespace
}  // namespace tripy::cpu::testing

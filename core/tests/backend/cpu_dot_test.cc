// kDot on the CPU backend: every transpose combination, batch broadcasting, bias, relu/gelu,
// sizes on both sides of the oneDNN threshold, narrow floats and integers.
#include <cmath>

#include "common/half.h"
#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;

struct DotCase {
  std::vector<int64_t> lhs_batch, rhs_batch;
  int64_t M, N, K;
  bool tl = false, tr = false, bias = false;
  Activation act = Activation::kNone;
};

std::vector<int64_t> cat(std::vector<int64_t> a, std::vector<int64_t> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Reference: loops in double over broadcast batches.
void check_dot(const DotCase& c, DType dt = F, double tol = 1e-4) {
  const std::vector<int64_t> lshape = cat(c.lhs_batch, c.tl ? std::vector<int64_t>{c.K, c.M} : std::vector<int64_t>{c.M, c.K});
  const std::vector<int64_t> rshape = cat(c.rhs_batch, c.tr ? std::vector<int64_t>{c.N, c.K} : std::vector<int64_t>{c.K, c.N});
  const size_t nb = std::max(c.lhs_batch.size(), c.rhs_batch.size());
  std::vector<int64_t> lb(nb, 1), rb(nb, 1), ob(nb, 1);
  std::copy(c.lhs_batch.begin(), c.lhs_batch.end(), lb.end() - c.lhs_batch.size());
  std::copy(c.rhs_batch.begin(), c.rhs_batch.end(), rb.end() - c.rhs_batch.size());
  for (size_t d = 0; d < nb; ++d) ob[d] = std::max(lb[d], rb[d]);
  const std::vector<int64_t> oshape = cat(ob, {c.M, c.N});

  ProgramBuilder b;
  int32_t l = b.input(dt, lshape), r = b.input(dt, rshape);
  std::vector<int32_t> ins_ids = {l, r};
  if (c.bias) ins_ids.push_back(b.input(dt, {c.N}));
  int32_t o = b.output(dt, oshape);
  Kernel& k = b.kernel(KernelKind::kDot, "dot", ins_ids, {o});
  k.dot.transpose_lhs = c.tl;
  k.dot.transpose_rhs = c.tr;
  k.dot.has_bias = c.bias;
  k.dot.activation = c.act;

  auto lv = random_floats(numel_of(lshape), -1, 1, 3), rv = random_floats(numel_of(rshape), -1, 1, 4);
  auto bv = random_floats(c.N, -1, 1, 5);
  auto make = [&](std::vector<int64_t> shape, std::vector<float>& v) {
    if (dt == F) return f32(shape, v);
    Tensor t = Tensor::empty_host(dt, shape);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = dt == DType::kFloat16 ? float_to_half(v[i]) : float_to_bfloat16(v[i]);
      static_cast<uint16_t*>(t.data())[i] = h;
      v[i] = dt == DType::kFloat16 ? half_to_float(h) : bfloat16_to_float(h);
    }
    return t;
  };
  std::vector<Tensor> args = {make(lshape, lv), make(rshape, rv)};
  if (c.bias) args.push_back(make({c.N}, bv));
  auto out = b.run(args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const Tensor& t = (*out)[0];
  ASSERT_EQ(t.shape(), oshape);

  const int64_t batches = numel_of(ob);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t lo = 0, ro = 0, q = bi, lstride = 1, rstride = 1;
    for (size_t d = nb; d-- > 0;) {
      int64_t cidx = q % ob[d];
      q /= ob[d];
      lo += (lb[d] == 1 ? 0 : cidx) * lstride;
      ro += (rb[d] == 1 ? 0 : cidx) * rstride;
      lstride *= lb[d];
      rstride *= rb[d];
    }
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < c.K; ++kk) {
          double a = lv[lo * c.M * c.K + (c.tl ? kk * c.M + i : i * c.K + kk)];
          double w = rv[ro * c.K * c.N + (c.tr ? j * c.K + kk : kk * c.N + j)];
          s += a * w;
        }
        if (c.bias) s += bv[j];
        if (c.act == Activation::kRelu) s = std::max(s, 0.0);
        if (c.act == Activation::kGelu) s = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
        const int64_t at = (bi * c.M + i) * c.N + j;
        double got = dt == F ? static_cast<const float*>(t.data())[at]
                   : dt == DType::kFloat16 ? half_to_float(static_cast<const uint16_t*>(t.data())[at])
                                           : bfloat16_to_float(static_cast<const uint16_t*>(t.data())[at]);
        ASSERT_NEAR(got, s, tol * (1 + std::fabs(s)) * std::max<int64_t>(1, c.K / 16))
            << "batch " << bi << " (" << i << ", " << j << ")";
      }
  }
}

TEST(CpuDot, EveryTransposeCombinationTiny) {
  for (bool tl : {false, true})
    for (bool tr : {false, true}) check_dot({{}, {}, 3, 5, 4, tl, tr});
}

TEST(CpuDot, EveryTransposeCombinationLarge) {
  // Large enough for oneDNN (when built with it) and the blocked GEMM's edge handling.
  for (bool tl : {false, true})
    for (bool tr : {false, true}) check_dot({{}, {}, 67, 45, 129, tl, tr});
}

TEST(CpuDot, BatchBroadcasting) {
  check_dot({{2, 3}, {3}, 4, 5, 6});
  check_dot({{2, 1}, {1, 3}, 17, 33, 40, true, false});
  check_dot({{}, {4}, 8, 8, 8, false, true});
}

TEST(CpuDot, BiasAndActivations) {
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    check_dot({{}, {}, 2, 8, 2, false, false, true, act});        // tiny path
    check_dot({{}, {}, 40, 70, 50, false, true, true, act});      // library path
    check_dot({{3}, {1}, 40, 70, 50, false, false, true, act});   // batched
  }
}

TEST(CpuDot, LargeGemmMatches) { check_dot({{}, {}, 300, 200, 500}); }

TEST(CpuDot, NarrowFloats) {
  check_dot({{}, {}, 5, 7, 9}, DType::kFloat16, 2e-3);
  check_dot({{}, {}, 40, 33, 50, false, true, true, Activation::kRelu}, DType::kBFloat16, 1e-2);
}

TEST(CpuDot, Integers) {
  ProgramBuilder b;
  int32_t l = b.input(DType::kInt32, {2, 3}), r = b.input(DType::kInt32, {3, 2}), bi = b.input(DType::kInt32, {2});
  int32_t o = b.output(DType::kInt32, {2, 2});
  Kernel& k = b.kernel(KernelKind::kDot, "dot_int", {l, r, bi}, {o});
  k.dot.has_bias = true;
  k.dot.activation = Activation::kRelu;
  auto out = b.run({make_tensor<int32_t>(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                    make_tensor<int32_t>(DType::kInt32, {3, 2}, {1, -1, 2, -2, 3, -3}),
                    make_tensor<int32_t>(DType::kInt32, {2}, {10, 100})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // [[14, -14], [32, -32]] + [10, 100] -> relu
  EXPECT_EQ(values<int32_t>((*out)[0]), (std::vector<int32_t>{24, 86, 42, 68}));
}

TEST(CpuDot, MismatchedInnerDimsAreAnError) {
  ProgramBuilder b;
  int32_t l = b.input(F, {2, 3}), r = b.input(F, {4, 2}), o = b.output(F, {2, 2});
  b.kernel(KernelKind::kDot, "dot_bad", {l, r}, {o}).source = 0;
  b.program().sources = {{{"model.py", 12, "forward"}}};
  auto out = b.run({f32({2, 3}, std::vector<float>(6, 1)), f32({4, 2}, std::vector<float>(8, 1))});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("dot_bad"), std::string::npos);
  ASSERT_NE(out.status().where(), nullptr);
  EXPECT_EQ((*out.status().where())[0].line, 12);
}

TEST(CpuDot, RepeatedRunsReuseTheProgram) {
  ProgramBuilder b;
  int32_t l = b.input(F, {64, 64}), r = b.input(F, {64, 64}), o = b.output(F, {64, 64});
  b.kernel(KernelKind::kDot, "dot", {l, r}, {o});
  auto lv = random_floats(64 * 64, -1, 1, 8);
  std::vector<float> eye(64 * 64, 0);
  for (int i = 0; i < 64; ++i) eye[i * 64 + i] = 1;
  for (int rep = 0; rep < 3; ++rep) {
    auto out = b.run({f32({64, 64}, lv), f32({64, 64}, eye)});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(values<float>((*out)[0]), lv);
  }
}

}  // namespace
}  // namespace tripy::cpu::testing

// kWeightOnlyDot on the CPU (backend/cpu/weight_only_dot.cc) through hand-built programs, against a
// double-precision reference of the rule in rt::WeightOnlyDotAttrs written here from the packed
// bytes: int8 and int4 weights, groups that divide K and groups that leave a short last one, zero
// points, few rows (sums on the stored integers, groups ending mid-vector) and many (the GEMM path),
// N off the GEMM path's tile, bfloat16.
// The frontend's tests check the same against numpy through tp.Linear (tests/frontend/ops/
// test_weight_only_dot.py); the GPU's kernel against both there (test_weight_only_dot_gpu.py).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/half.h"
#include "cpu_test_util.h"
#include "runtime/kernel_rules.h"

namespace tripy::cpu::testing {
namespace {

struct Case {
  int64_t rows, N, K;
  int bits;
  int64_t group;
  bool zero;
  DType dtype = DType::kFloat32;
  bool norm = false, residual = false;  // x RMS-normalized first (eps 1e-5), R added after
};

// Tensors in `dtype` (float32 values rounded to it), and their values as rounded.
Tensor floats(DType dtype, std::vector<int64_t> shape, std::vector<float>& v) {
  if (dtype == DType::kFloat32) return f32(std::move(shape), v);
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = float_to_bfloat16(v[i]);
    v[i] = bfloat16_to_float(bits[i]);
  }
  return make_tensor(DType::kBFloat16, std::move(shape), bits);
}

void check(const Case& c) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) +
               " bits " + std::to_string(c.bits) + " group " + std::to_string(c.group) + (c.zero ? " zero" : ""));
  const int64_t groups = (c.K + c.group - 1) / c.group, row_bytes = weight_only_row_bytes(c.bits, c.K);
  // Values q in the bits' range, packed as the kernel reads them.
  std::vector<int> q(static_cast<size_t>(c.N * c.K));
  std::vector<int8_t> packed(static_cast<size_t>(c.N * row_bytes), 0);
  uint32_t s = 7;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k) {
      s = s * 1664525u + 1013904223u;
      const int v = c.bits == 8 ? static_cast<int>(s >> 24) - 128 : static_cast<int>(s >> 28) - 8;
      q[static_cast<size_t>(n * c.K + k)] = v;
      if (c.bits == 8) {
        packed[static_cast<size_t>(n * row_bytes + k)] = static_cast<int8_t>(v);
      } else {
        uint8_t& b = reinterpret_cast<uint8_t&>(packed[static_cast<size_t>(n * row_bytes + k / 2)]);
        b = static_cast<uint8_t>(b | ((v + 8) << (4 * (k % 2))));
      }
    }
  std::vector<float> x = random_floats(static_cast<size_t>(c.rows * c.K), -1, 1, 3);
  std::vector<float> scale = random_floats(static_cast<size_t>(c.N * groups), 0.001f, 0.02f, 5);
  std::vector<float> zero = random_floats(static_cast<size_t>(c.N * groups), -3, 3, 9);
  ProgramBuilder b;
  const int32_t xb = b.input(c.dtype, {c.rows, c.K});
  const int32_t wb = b.input(DType::kInt8, {c.N, row_bytes});
  const int32_t sb = b.input(c.dtype, {c.N, groups});
  std::vector<int32_t> ins = {xb, wb, sb};
  if (c.zero) ins.push_back(b.input(c.dtype, {c.N, groups}));
  if (c.norm) ins.push_back(b.input(DType::kFloat32, {c.K}));  // gamma
  if (c.residual) ins.push_back(b.input(c.dtype, {c.rows, c.N}));
  const int32_t out = b.output(c.dtype, {c.rows, c.N});
  WeightOnlyDotAttrs& a = b.kernel(KernelKind::kWeightOnlyDot, "weight_only_dot", ins, {out}).weight_only_dot;
  a.bits = c.bits;
  a.group_size = c.group;
  a.has_zero = c.zero;
  a.norm = c.norm;
  a.norm_eps = 1e-5;
  a.residual = c.residual;
  std::vector<float> gamma = random_floats(static_cast<size_t>(c.K), 0.5f, 1.5f, 11);
  std::vector<float> res = random_floats(static_cast<size_t>(c.rows * c.N), -2, 2, 13);
  std::vector<Tensor> args = {floats(c.dtype, {c.rows, c.K}, x), make_tensor(DType::kInt8, {c.N, row_bytes}, packed),
                              floats(c.dtype, {c.N, groups}, scale)};
  if (c.zero) args.push_back(floats(c.dtype, {c.N, groups}, zero));
  if (c.norm) args.push_back(f32({c.K}, gamma));
  if (c.residual) args.push_back(floats(c.dtype, {c.rows, c.N}, res));
  auto got = b.run(args);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const Tensor& o = (*got)[0];
  for (int64_t r = 0; r < c.rows; ++r) {
    // The row as the product takes it: RMS-normalized and times gamma where asked.
    std::vector<double> xr(static_cast<size_t>(c.K));
    double squares = 0;
    for (int64_t k = 0; k < c.K; ++k) squares += double{x[static_cast<size_t>(r * c.K + k)]} * x[static_cast<size_t>(r * c.K + k)];
    const double factor = c.norm ? 1.0 / std::sqrt(squares / static_cast<double>(c.K) + 1e-5) : 1.0;
    for (int64_t k = 0; k < c.K; ++k)
      xr[static_cast<size_t>(k)] = x[static_cast<size_t>(r * c.K + k)] * factor * (c.norm ? gamma[static_cast<size_t>(k)] : 1.0f);
    for (int64_t n = 0; n < c.N; ++n) {
      const int64_t i = r * c.N + n;
      double want = c.residual ? res[static_cast<size_t>(i)] : 0.0, mag = std::fabs(want);
      for (int64_t k = 0; k < c.K; ++k) {
        const size_t g = static_cast<size_t>(n * groups + k / c.group);
        const double w = (q[static_cast<size_t>(n * c.K + k)] - (c.zero ? zero[g] : 0.0)) * scale[g];
        want += xr[static_cast<size_t>(k)] * w;
        mag += std::fabs(xr[static_cast<size_t>(k)] * w);
      }
      const double v = c.dtype == DType::kFloat32 ? static_cast<const float*>(o.data())[i]
                                                  : bfloat16_to_float(static_cast<const uint16_t*>(o.data())[i]);
      const double tol = c.dtype == DType::kFloat32 ? 1e-5 * mag + 1e-6 : 1e-2 * mag + 1e-3;
      ASSERT_NEAR(v, want, tol) << "row " << r << " column " << n;
    }
  }
}

TEST(CpuWeightOnlyDot, Int8PerChannelMatchesTheReference) {
  for (int64_t rows : {1, 3, 5, 37})
    check({rows, 33, 96, 8, 96, false});
}

TEST(CpuWeightOnlyDot, Int4GroupsOf32To128WithAndWithoutZeroPoints) {
  for (int64_t group : {32, 64, 128})
    for (bool zero : {false, true}) {
      check({1, 70, 384, 4, group, zero});   // 3 to 12 groups
      check({20, 70, 384, 4, group, zero});  // the GEMM path
    }
}

TEST(CpuWeightOnlyDot, AShortLastGroupAndAnOddK) {
  check({2, 9, 100, 4, 32, true});  // 4 groups, the last of 4 values
  check({7, 9, 99, 4, 64, false});  // odd K: the last byte's high nibble is unused
  check({7, 9, 99, 8, 40, true});
  // A few rows summed on the stored integers: groups whose bytes end past the last whole 8.
  check({4, 9, 99, 8, 40, true});
  check({4, 70, 200, 4, 40, true});
  check({3, 70, 200, 4, 40, false});
}

TEST(CpuWeightOnlyDot, ManyRowsAndBfloat16) {
  check({300, 65, 128, 4, 32, true});
  check({9, 600, 160, 4, 32, true});  // N past two 256-row tiles of dequantized weight
  check({6, 300, 72, 8, 72, false});
  check({1, 65, 128, 4, 64, false, DType::kBFloat16});
  check({300, 65, 128, 8, 128, true, DType::kBFloat16});
}

TEST(CpuWeightOnlyDot, RmsNormalizedRowsAndAResidualAdded) {
  for (int64_t rows : {1, 3, 37}) {
    check({rows, 70, 384, 4, 64, true, DType::kFloat32, true, false});
    check({rows, 70, 384, 8, 384, false, DType::kFloat32, false, true});
    check({rows, 33, 128, 4, 32, true, DType::kBFloat16, true, true});
  }
}

TEST(CpuWeightOnlyDot, TheRulesRefuseANormsWeightOrAResidualOfAnotherShape) {
  ProgramBuilder b;
  const int32_t x = b.input(DType::kFloat32, {1, 64}), w = b.input(DType::kInt8, {8, 64});
  const int32_t s = b.input(DType::kFloat32, {8, 1}), gamma = b.input(DType::kFloat32, {32});
  const int32_t r = b.input(DType::kFloat32, {1, 8}), out = b.output(DType::kFloat32, {1, 8});
  Kernel& k = b.kernel(KernelKind::kWeightOnlyDot, "weight_only_dot", {x, w, s, gamma, r}, {out});
  k.weight_only_dot.group_size = 64;
  k.weight_only_dot.norm = k.weight_only_dot.residual = true;
  EXPECT_EQ(kernel_load_error(b.program(), k), "");
  std::vector<std::vector<int64_t>> shapes = {{1, 64}, {8, 64}, {8, 1}, {32}, {1, 8}, {1, 8}};
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("rows of 64 with a weight (32,)"), std::string::npos);
  shapes[3] = {64};
  EXPECT_EQ(kernel_run_error(b.program(), k, shapes, b.slots()), "");
  shapes[4] = {1, 9};
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("adds a residual (1, 9)"), std::string::npos);
  k.weight_only_dot.gated = true;
  EXPECT_NE(kernel_load_error(b.program(), k).find("normalizes a gated x"), std::string::npos);
  k.weight_only_dot.gated = false;
  k.weight_only_dot.residual = false;  // one input too many
  EXPECT_NE(kernel_load_error(b.program(), k).find("needs x"), std::string::npos);
}

TEST(CpuWeightOnlyDot, TheRulesGiveAGatedOutputHalfTheWeightsRowsAndNoResidual) {
  ProgramBuilder b;
  const int32_t x = b.input(DType::kFloat32, {1, 64}), w = b.input(DType::kInt8, {8, 64});
  const int32_t s = b.input(DType::kFloat32, {8, 1}), r = b.input(DType::kFloat32, {1, 4});
  const int32_t out = b.output(DType::kFloat32, {1, 4});
  Kernel& k = b.kernel(KernelKind::kWeightOnlyDot, "weight_only_dot", {x, w, s}, {out});
  k.weight_only_dot.group_size = 64;
  k.weight_only_dot.gate_output = true;
  EXPECT_EQ(kernel_load_error(b.program(), k), "");
  // Each buffer's shape: x, w, the scales, r (unread until the residual), the output.
  std::vector<std::vector<int64_t>> shapes = {{1, 64}, {8, 64}, {8, 1}, {1, 4}, {1, 4}};
  EXPECT_EQ(kernel_run_error(b.program(), k, shapes, b.slots()), "");
  shapes[4] = {1, 8};  // the product's whole width
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("into (1, 8)"), std::string::npos);
  shapes = {{1, 64}, {7, 64}, {7, 1}, {1, 3}, {1, 3}};  // an odd count of weight rows
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("odd count of weight rows 7"), std::string::npos);
  k.inputs.push_back(r);
  k.weight_only_dot.residual = true;
  EXPECT_NE(kernel_load_error(b.program(), k).find("adds a residual to a gated output"), std::string::npos);
}

TEST(CpuWeightOnlyDot, TheRulesRefuseAWeightOfTheWrongPackedWidthOrScales) {
  ProgramBuilder b;
  const int32_t x = b.input(DType::kFloat32, {1, 64}), w = b.input(DType::kInt8, {8, 64});
  const int32_t s = b.input(DType::kFloat32, {8, 2}), out = b.output(DType::kFloat32, {1, 8});
  Kernel& k = b.kernel(KernelKind::kWeightOnlyDot, "weight_only_dot", {x, w, s}, {out});
  k.weight_only_dot.bits = 4;  // 64 values need 32 bytes a row, not 64
  k.weight_only_dot.group_size = 32;
  const std::vector<std::vector<int64_t>> shapes = {{1, 64}, {8, 64}, {8, 2}, {1, 8}};
  EXPECT_EQ(kernel_load_error(b.program(), k), "");
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("4-bit weight (8, 64)"), std::string::npos);
  k.weight_only_dot.bits = 8;
  EXPECT_EQ(kernel_run_error(b.program(), k, shapes, b.slots()), "");
  k.weight_only_dot.group_size = 16;  // 4 groups, 2 scales
  EXPECT_NE(kernel_run_error(b.program(), k, shapes, b.slots()).find("8 rows of 4 groups"), std::string::npos);
  k.weight_only_dot.bits = 3;
  EXPECT_NE(kernel_load_error(b.program(), k).find("3 bits"), std::string::npos);
}

}  // namespace
}  // namespace tripy::cpu::testing

// Row phases for GEMM outputs whose rows are not 16-byte aligned (vocabulary 50257): the calls
// are replayed here in order by a plain column-major GEMM on the host, so the split is checked
// (every output element right, every phase call aligned, nothing written outside) without a GPU.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cmath>
#include <limits>
#include <random>

#include "backend/cuda/cuda_gemm_shape.h"

namespace tripy::rt::cuda {
namespace {

DotProblem problem(DType dtype, int64_t rows, int64_t cols, int64_t depth) {
  DotProblem pr;
  pr.dtype = dtype;
  pr.trans_a = true;  // the weight stored [N, K], as x @ W.T reads it
  pr.m = cols;
  pr.n = rows;
  pr.k = depth;
  return pr;
}

// out = x @ w.T with x [rows, depth] and w [cols, depth], by replaying `calls` in order.
std::vector<double> replay(const DotProblem& pr, const std::vector<GemmCall>& calls, const std::vector<double>& x,
                           const std::vector<double>& w) {
  std::vector<double> d(static_cast<size_t>(pr.m * pr.n), std::numeric_limits<double>::quiet_NaN());
  for (const GemmCall& c : calls) {
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t i = 0; i < c.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < pr.k; ++l)
          acc += w[static_cast<size_t>(c.offset_a + i * c.lda + l)] * x[static_cast<size_t>(c.offset_b + j * c.ldb + l)];
        const int64_t at = c.offset_d + j * c.ldd + i;
        EXPECT_TRUE(at >= 0 && at < pr.m * pr.n) << "a call writes outside the output";
        if (at >= 0 && at < pr.m * pr.n) d[static_cast<size_t>(at)] = acc;
      }
    }
  }
  return d;
}

void check(DType dtype, int64_t rows, int64_t cols, int64_t depth) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(rows) + "x" + std::to_string(cols) + "x" +
               std::to_string(depth));
  const DotProblem pr = problem(dtype, rows, cols, depth);
  const std::vector<GemmCall> calls = row_phase_calls(pr);
  const int64_t P = 16 / dtype_size(dtype);
  ASSERT_EQ(calls.size(), static_cast<size_t>(P + 1));
  // Every phase (all but the first, thin call) is aligned: offsets and leading dimensions.
  for (size_t i = 1; i < calls.size(); ++i) {
    for (int64_t v : {calls[i].offset_a, calls[i].offset_b, calls[i].offset_d, calls[i].lda, calls[i].ldb, calls[i].ldd})
      EXPECT_EQ(v % P, 0) << "phase " << i;
  }
  EXPECT_EQ(calls[0].m, P);
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(static_cast<size_t>(rows * depth)), w(static_cast<size_t>(cols * depth));
  for (double& v : x) v = u(gen);
  for (double& v : w) v = u(gen);
  const std::vector<double> d = replay(pr, calls, x, w);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      double want = 0;
      for (int64_t l = 0; l < depth; ++l) want += x[static_cast<size_t>(r * depth + l)] * w[static_cast<size_t>(c * depth + l)];
      ASSERT_NEAR(d[static_cast<size_t>(r * cols + c)], want, 1e-9) << "row " << r << " col " << c;
    }
  }
}

TEST(CudaGemmRowPhases, CoverEveryElementOfUnalignedRows) {
  check(DType::kFloat16, 64, 50257 % 997, 16);  // odd row lengths
  check(DType::kFloat16, 29, 37, 8);            // rows not a multiple of the phase count
  check(DType::kBFloat16, 17, 12, 24);          // even but not 8-aligned
  check(DType::kFloat32, 23, 21, 4);
  check(DType::kFloat32, 9, 10, 12);
}

TEST(CudaGemmRowPhases, OnlyWhereTheyApply) {
  EXPECT_TRUE(row_phase_calls(problem(DType::kFloat16, 64, 50304, 768)).empty());  // rows aligned already
  EXPECT_TRUE(row_phase_calls(problem(DType::kFloat16, 64, 50257, 770)).empty());  // K unaligned: x's rows
  EXPECT_TRUE(row_phase_calls(problem(DType::kFloat16, 8, 50257, 768)).empty());   // too few rows
  DotProblem plain = problem(DType::kFloat16, 64, 50257, 768);
  plain.trans_a = false;  // weight stored [K, N]: its rows are unaligned too
  EXPECT_TRUE(row_phase_calls(plain).empty());
  DotProblem bias = problem(DType::kFloat16, 64, 50257, 768);
  bias.bias = true;
  EXPECT_TRUE(row_phase_calls(bias).empty());
  DotProblem batched = problem(DType::kFloat16, 64, 50257, 768);
  batched.batch = 2;
  EXPECT_TRUE(row_phase_calls(batched).empty());
  EXPECT_EQ(row_phase_calls(problem(DType::kFloat16, 8192, 50257, 768)).size(), 9u);
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

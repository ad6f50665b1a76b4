// kSample on the CPU (backend/cpu/sample.cc) through hand-built programs: greedy and non-finite
// rows are the argmax, draws stay inside the top-k and top-p sets, a key decides a draw, and the
// draws of fixed keys are pinned (the GPU must draw the same: cuda/codegen/cuda_sample_test.cc).
// The distribution against numpy is tests/frontend/ops/test_sample.py's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

// Draws one token per row of `logits` (rows x V float32) with `key`.
std::vector<int32_t> draw(const std::vector<float>& logits, int64_t rows, SampleAttrs a, int64_t key) {
  ProgramBuilder b;
  const int64_t V = static_cast<int64_t>(logits.size()) / rows;
  const int32_t x = b.input(DType::kFloat32, {rows, V}), k = b.input(DType::kInt64, {1});
  const int32_t out = b.output(DType::kInt32, {rows});
  b.kernel(KernelKind::kSample, "sample", {x, k}, {out}).sample = a;
  auto got = b.run({f32({rows, V}, logits), make_tensor<int64_t>(DType::kInt64, {1}, {key})});
  EXPECT_TRUE(got.ok()) << got.status().message();
  return got.ok() ? values<int32_t>((*got)[0]) : std::vector<int32_t>{};
}

SampleAttrs attrs(double temperature, int64_t top_k = 0, double top_p = 1.0) {
  SampleAttrs a;
  a.temperature = temperature;
  a.top_k = top_k;
  a.top_p = top_p;
  return a;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CpuSample, GreedyIsTheArgmaxWithTheFirstNaNWinning) {
  const std::vector<float> x = {1, 3, 3, 2, /**/ 1, kNaN, 5, kNaN, /**/ -kInf, -kInf, -kInf, -kInf};
  EXPECT_EQ(draw(x, 3, attrs(0), 7), (std::vector<int32_t>{1, 1, 0}));
}

TEST(CpuSample, RowsWithANaNOrAnInfiniteLargestLogitAreGreedy) {
  const std::vector<float> x = {1, 3, kNaN, 2, /**/ 1, kInf, 5, kInf, /**/ -kInf, -kInf, -kInf, -kInf};
  for (int64_t key = 0; key < 20; ++key) EXPECT_EQ(draw(x, 3, attrs(1.0), key), (std::vector<int32_t>{2, 1, 0}));
  // A tiny temperature makes z infinite: greedy too.
  EXPECT_EQ(draw({1, 30, 2, 29}, 1, attrs(1e-38), 3), (std::vector<int32_t>{1}));
}

TEST(CpuSample, TopKOfOneIsTheArgmaxWhateverTheTemperature) {
  const std::vector<float> x = random_floats(5 * 300, -4, 4, 3);
  std::vector<int32_t> argmax;
  for (int r = 0; r < 5; ++r) argmax.push_back(static_cast<int32_t>(
      std::max_element(x.begin() + r * 300, x.begin() + (r + 1) * 300) - (x.begin() + r * 300)));
  for (double t : {0.1, 1.0, 50.0})
    for (int64_t key = 0; key < 10; ++key) EXPECT_EQ(draw(x, 5, attrs(t, 1), key), argmax);
}

TEST(CpuSample, DrawsStayInsideTheTopKAndTopPSets) {
  // Top-3 keeps 9, 8 and both 7s (ties at the boundary are kept).
  const std::vector<float> x = {0, 9, 7, 1, 8, 7, 2, 0.5f};
  for (int64_t key = 0; key < 200; ++key) {
    const int32_t i = draw(x, 1, attrs(5.0, 3), key)[0];
    EXPECT_TRUE(i == 1 || i == 2 || i == 4 || i == 5) << i;
  }
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.8 keeps the first two (0.8 reached), 0.81 three.
  const std::vector<float> p = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  std::vector<int> seen(4, 0), seen_wider(4, 0);
  for (int64_t key = 0; key < 400; ++key) {
    ++seen[draw(p, 1, attrs(1.0, 0, 0.79), key)[0]];
    ++seen_wider[draw(p, 1, attrs(1.0, 0, 0.81), key)[0]];
  }
  EXPECT_EQ(seen[0] + seen[2], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[3], 0);
  EXPECT_GT(seen_wider[0], 0);
  EXPECT_EQ(seen_wider[2], 0);
}

TEST(CpuSample, AKeyDecidesTheDrawAndRowsDrawApart) {
  const std::vector<float> row(64, 0.0f);  // uniform
  std::vector<float> x;
  for (int r = 0; r < 8; ++r) x.insert(x.end(), row.begin(), row.end());
  const std::vector<int32_t> a = draw(x, 8, attrs(1.0), 12345);
  EXPECT_EQ(draw(x, 8, attrs(1.0), 12345), a);
  EXPECT_NE(draw(x, 8, attrs(1.0), 12346), a);
  int distinct = 0;
  for (int r = 1; r < 8; ++r) distinct += a[r] != a[0];
  EXPECT_GT(distinct, 4);
}

TEST(CpuSample, TheFrequenciesFollowTheWeights) {
  const std::vector<float> x = {std::log(0.25f), std::log(0.75f)};
  int ones = 0;
  const int n = 4000;
  for (int64_t key = 0; key < n; ++key) ones += draw(x, 1, attrs(1.0), key)[0];
  EXPECT_NEAR(ones, 0.75 * n, 4 * std::sqrt(n * 0.75 * 0.25));
}

// The exact rule, pinned: a change to the generator, the weights or the search changes these, and
// the GPU's kernel must change with it (it is compared with this backend draw for draw).
TEST(CpuSample, FixedKeysDrawPinnedTokens) {
  const std::vector<float> x = random_floats(3 * 1000, -3, 3, 11);
  EXPECT_EQ(draw(x, 3, attrs(1.0), 0), (std::vector<int32_t>{900, 455, 27}));
  EXPECT_EQ(draw(x, 3, attrs(0.7, 50, 0.9), 2024), (std::vector<int32_t>{687, 90, 293}));
}

}  // namespace
}  // namespace tripy::cpu::testing

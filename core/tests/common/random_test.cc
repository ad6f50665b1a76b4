// The generator behind tp.random: Philox4x32-10 against the published known-answer vectors, and
// the streams it makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/random.h"

namespace tripy {
namespace {

TEST(Random, Philox4x32MatchesThePublishedKnownAnswers) {
  using W = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (W{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (W{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (W{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Random, UniformValuesAreMultiplesOfTwoToTheMinus24InZeroToOne) {
  for (uint64_t b = 0; b < 1000; ++b)
    for (double v : random_block(RandomKind::kUniform, 7, b)) {
      EXPECT_GE(v, 0.0);
      EXPECT_LT(v, 1.0);
      EXPECT_EQ(v * 0x1p24, std::floor(v * 0x1p24));
    }
}

TEST(Random, ABlockDependsOnTheSeedTheKindAndItsIndexAlone) {
  EXPECT_EQ(random_block(RandomKind::kNormal, 3, 12345), random_block(RandomKind::kNormal, 3, 12345));
  EXPECT_NE(random_block(RandomKind::kNormal, 3, 12345), random_block(RandomKind::kNormal, 4, 12345));
  EXPECT_NE(random_block(RandomKind::kNormal, 3, 12345), random_block(RandomKind::kNormal, 3, 12346));
  // The high words of the seed and the index count too.
  EXPECT_NE(random_block(RandomKind::kUniform, 1, 0), random_block(RandomKind::kUniform, 1 + (uint64_t{1} << 32), 0));
  EXPECT_NE(random_block(RandomKind::kUniform, 1, 5), random_block(RandomKind::kUniform, 1, 5 + (uint64_t{1} << 32)));
}

TEST(Random, NormalValuesHaveMeanZeroAndVarianceOne) {
  double sum = 0, squares = 0, most = 0;
  const int blocks = 50000;  // 200,000 values: the mean's standard error is 0.0022
  for (int b = 0; b < blocks; ++b)
    for (double v : random_block(RandomKind::kNormal, 11, static_cast<uint64_t>(b))) {
      sum += v, squares += v * v;
      most = std::max(most, std::abs(v));
    }
  const double n = 4.0 * blocks, mean = sum / n;
  EXPECT_LT(std::abs(mean), 5 * 0.0022);
  EXPECT_LT(std::abs(squares / n - mean * mean - 1.0), 0.02);
  EXPECT_GT(most, 4.0);   // tails reached
  EXPECT_LT(most, 5.78);  // 24-bit uniforms bound |z| by sqrt(2 ln 2^24)
}

}  // namespace
}  // namespace tripy

// The narrow-float conversion helpers: exhaustive float16 round trips, round-to-nearest-even at
// ties, and float8/bfloat16 spot values; plus stores through a fused kernel.
#include <cmath>

#include "common/half.h"
#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

TEST(CpuHalf, EveryFloat16RoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(CpuHalf, Float16RoundsToNearestEven) {
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 2048)), 1.0f);          // tie -> even
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(half_to_float(float_to_half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(65520.0f))));
  EXPECT_EQ(half_to_float(float_to_half(65519.0f)), 65504.0f);
  EXPECT_EQ(half_to_float(float_to_half(5.9604645e-8f)), 5.9604645e-8f);      // smallest subnormal
  EXPECT_EQ(half_to_float(float_to_half(2.0e-8f)), 0.0f);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
}

TEST(CpuHalf, BFloat16AndFloat8) {
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f)), 1.0f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.00390625f)), 1.0f);  // tie -> even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.01171875f)), 1.015625f);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(NAN))));
  for (uint32_t v = 0; v < 256; ++v) {
    float f = float8_to_float(static_cast<uint8_t>(v));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_float8(f), v) << v;
  }
  EXPECT_EQ(float8_to_float(float_to_float8(448.0f)), 448.0f);
  EXPECT_EQ(float8_to_float(float_to_float8(1000.0f)), 448.0f);  // saturates
  EXPECT_EQ(float8_to_float(float_to_float8(0.3f)), 0.3125f);
}

TEST(CpuHalf, FusedKernelConvertsThroughFloat16) {
  // out16 = convert(x, f16); back = convert(out16 * 2, f32)
  constexpr DType F = DType::kFloat32, H = DType::kFloat16, BF = DType::kBFloat16;
  ProgramBuilder b;
  int32_t x = b.input(F, {3}), o16 = b.output(H, {3}), obf = b.output(BF, {3}), back = b.output(F, {3});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_cast", {x}, {o16, obf, back});
  k.fused.domain = b.dims({3});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kConvert, H, 0), ins(EwOp::kConvert, BF, 0),
                    ins(EwOp::kConst, H, -1, -1, -1, 2), ins(EwOp::kMul, H, 1, 3),
                    ins(EwOp::kConvert, F, 4)};
  k.fused.output_regs = {1, 2, 5};
  auto out = b.run({f32({3}, {1.0f + 1.0f / 4096, 3.14159f, -70000.0f})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto h = values<uint16_t>((*out)[0]);
  EXPECT_EQ(half_to_float(h[0]), 1.0f);
  EXPECT_NEAR(half_to_float(h[1]), 3.14159f, 2e-3);
  EXPECT_TRUE(std::isinf(half_to_float(h[2])));
  auto bf = values<uint16_t>((*out)[1]);
  EXPECT_NEAR(bfloat16_to_float(bf[1]), 3.14159f, 2e-2);
  EXPECT_NEAR(bfloat16_to_float(bf[2]), -70000.0f, 300);
  auto f = values<float>((*out)[2]);
  EXPECT_EQ(f[0], 2.0f);  // the convert rounded to float16 before the multiply
}

}  // namespace
}  // namespace tripy::cpu::testing

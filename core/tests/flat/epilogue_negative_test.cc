// The rewrites around GEMMs and convolutions where one firing condition fails: fusion's dot and
// convolution epilogues (bias, residual, relu), fold_conv_affine, merge_conv_biases and
// quantized_dot. Each graph is a matched form (fusion_test.cc, fusion_conv_test.cc,
// fold_conv_affine_test.cc, quantized_dot_test.cc) with one thing changed; a control beside each
// family shows the unchanged form still fires.
#include <gtest/gtest.h>

#include <string>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

// max(x @ W + b, 0): one dot kernel with a bias and a relu.
const char* kLinearRelu = R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 8] = parameter() {index = 1}
%2 : f32[8] = parameter() {index = 2}
%3 : f32[4, 8] = dot(%0, %1)
%4 : f32[4, 8] = broadcast(%2) {dims = [1]}
%5 : f32[4, 8] = add(%3, %4)
%6 : f32[] = constant() {value = [0]}
%7 : f32[4, 8] = broadcast(%6) {dims = []}
%8 : f32[4, 8] = max(%5, %7)
return %8
)";

TEST(DotEpilogueNegative, OnlyAPerColumnBiasAndMaxWithZeroJoinTheGemm) {
  EXPECT_EQ(plan_of(kLinearRelu), "%8 = dot(%0, %1, %2) {bias, relu}\n");
  // A bias per row; a one-element bias stretched over the columns; a full-shape addend.
  EXPECT_FALSE(has(plan_of(replaced(replaced(kLinearRelu, "%2 : f32[8]", "%2 : f32[4]"), "broadcast(%2) {dims = [1]}",
                                    "broadcast(%2) {dims = [0]}")),
                   "bias"));
  EXPECT_FALSE(has(plan_of(replaced(kLinearRelu, "%2 : f32[8]", "%2 : f32[1]")), "bias"));
  EXPECT_FALSE(has(plan_of(replaced(replaced(kLinearRelu, "%2 : f32[8] = parameter", "%2 : f32[4, 8] = parameter"),
                                    "broadcast(%2) {dims = [1]}", "broadcast(%2) {dims = [0, 1]}")),
                   "bias"));
  // max with 0.5, min with 0, max of the product with itself: not relu.
  EXPECT_FALSE(has(plan_of(replaced(kLinearRelu, "value = [0]", "value = [0.5]")), "relu"));
  EXPECT_FALSE(has(plan_of(replaced(kLinearRelu, "max(%5, %7)", "min(%5, %7)")), "relu"));
  EXPECT_FALSE(has(plan_of(replaced(kLinearRelu, "max(%5, %7)", "max(%5, %5)")), "relu"));
  // The product also read by another op: neither the bias nor the relu can join it.
  EXPECT_EQ(plan_of(replaced(kLinearRelu, "return %8", "%9 : f32[4, 8] = neg(%3)\nreturn %8, %9")).find("%8 = dot"),
            std::string::npos);
}

// relu(conv(x) + b[c] + r): one convolution kernel with a bias, a residual and a relu.
const char* kConvBlock = R"(%0 : f32[1, 2, 3, 3] = parameter() {index = 0}
%1 : f32[2, 2, 1, 1] = constant() {value = [1, 2, 3, 4]}
%2 : f32[1, 2, 3, 3] = parameter() {index = 1}
%3 : f32[1, 2, 3, 3] = convolution(%0, %1) {CONV}
%4 : f32[2, 1, 1] = constant() {value = [1, 2]}
%5 : f32[1, 2, 3, 3] = broadcast(%4) {dims = [1, 2, 3]}
%6 : f32[1, 2, 3, 3] = add(%3, %5)
%7 : f32[1, 2, 3, 3] = add(%6, %2)
%8 : f32[] = constant() {value = [0]}
%9 : f32[1, 2, 3, 3] = broadcast(%8) {dims = []}
%10 : f32[1, 2, 3, 3] = max(%7, %9)
return %10
)";

TEST(ConvolutionEpilogueNegative, OnlyPerChannelBiasesEarlierResidualsAndReluJoin) {
  EXPECT_TRUE(has(plan_of(with_conv(kConvBlock)), "has_bias = true, has_residual = true, activation = relu"))
      << plan_of(with_conv(kConvBlock));
  // A one-element bias (two channels), a residual computed after the convolution.
  const std::string one = plan_of(with_conv(replaced(kConvBlock, "%4 : f32[2, 1, 1] = constant() {value = [1, 2]}",
                                                     "%4 : f32[1, 1, 1] = constant() {value = [1]}")));
  EXPECT_FALSE(has(one, "has_bias")) << one;
  const std::string late = plan_of(with_conv(replaced(replaced(kConvBlock, "add(%6, %2)", "add(%6, %11)"),
                                                      "%7 : f32", "%11 : f32[1, 2, 3, 3] = exp(%2)\n%7 : f32")));
  EXPECT_FALSE(has(late, "has_residual")) << late;
}

std::string folded(const std::string& text) { return pass_on_text(with_conv(text), fold_conv_affine); }

// conv(x, W) * s[c] + t[c].
const char* kConvAffine = R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [3, 0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 2, 2, 2] = mul(%2, %4)
%6 : f32[2, 1, 1] = constant() {value = [1, -1]}
%7 : f32[1, 2, 2, 2] = broadcast(%6) {dims = [1, 2, 3]}
%8 : f32[1, 2, 2, 2] = add(%5, %7)
return %8
)";

TEST(FoldConvAffineNegative, OnlyAffineOpsByPerChannelConstantsOnAChannelsFirstConvolutionFold) {
  EXPECT_NE(folded(kConvAffine), "unchanged");
  // A constant divided by the convolution; a max instead of the multiply; the scale given at run
  // time; a channels-last convolution; a lone bias add (already the epilogue's).
  EXPECT_EQ(folded(replaced(replaced(kConvAffine, "mul(%2, %4)", "div(%4, %2)"), "add(%5, %7)", "neg(%5)")), "unchanged");
  EXPECT_EQ(folded(replaced(replaced(kConvAffine, "mul(%2, %4)", "max(%2, %4)"), "add(%5, %7)", "neg(%5)")), "unchanged");
  EXPECT_EQ(folded(replaced(replaced(kConvAffine, "%3 : f32[2, 1, 1] = constant() {value = [3, 0.5]}",
                                     "%3 : f32[2, 1, 1] = parameter() {index = 1}"),
                            "add(%5, %7)", "neg(%5)")),
            "unchanged");
  EXPECT_EQ(folded(R"(%0 : f32[1, 2, 2, 1] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0], layout = channels_last}
%3 : f32[2] = constant() {value = [3, 0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [3]}
%5 : f32[1, 2, 2, 2] = mul(%2, %4)
return %5
)"),
            "unchanged");
  EXPECT_EQ(folded(replaced(replaced(kConvAffine, "mul(%2, %4)", "add(%2, %4)"), "add(%5, %7)", "neg(%5)")), "unchanged");
}

std::string merged(const std::string& text) { return pass_on_text(with_conv(text), merge_conv_biases); }

// (conv_a + [1, 2]) + (conv_b + [10, 20]).
const char* kTwoBiased = R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [1, 2]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 2, 2, 2] = add(%2, %4)
%6 : f32[2, 1, 1, 1] = constant() {value = [3, 4]}
%7 : f32[1, 2, 2, 2] = convolution(%0, %6) {CONV}
%8 : f32[2, 1, 1] = constant() {value = [10, 20]}
%9 : f32[1, 2, 2, 2] = broadcast(%8) {dims = [1, 2, 3]}
%10 : f32[1, 2, 2, 2] = add(%9, %7)
%11 : f32[1, 2, 2, 2] = add(%5, %10)
return %11
)";

TEST(MergeConvBiasesNegative, OnlyTwoSingleUseBiasedConvolutionsMerge) {
  EXPECT_NE(merged(kTwoBiased), "unchanged");
  // A convolution read again, a biased sum read again, a bias along the width, a parameter
  // instead of a convolution.
  EXPECT_EQ(merged(replaced(kTwoBiased, "return %11", "return %11, %2")), "unchanged");
  EXPECT_EQ(merged(replaced(kTwoBiased, "return %11", "return %11, %10")), "unchanged");
  EXPECT_EQ(merged(replaced(replaced(kTwoBiased, "%8 : f32[2, 1, 1] = constant() {value = [10, 20]}",
                                     "%8 : f32[2] = constant() {value = [10, 20]}"),
                            "broadcast(%8) {dims = [1, 2, 3]}", "broadcast(%8) {dims = [3]}")),
            "unchanged");
  EXPECT_EQ(merged(replaced(kTwoBiased, "%7 : f32[1, 2, 2, 2] = convolution(%0, %6) {CONV}",
                            "%7 : f32[1, 2, 2, 2] = parameter() {index = 1}")),
            "unchanged");
}

std::string quantized(const std::string& text) {
  return pass_on_text(text, [](const Graph& g) { return quantized_dot(g); });
}

// dequantize(x int8, 0.5) @ dequantize(w int8, 0.25).
const char* kDequantizedDot = R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 3] = parameter() {index = 1}
%2 : f32[2, 4] = convert(%0)
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[2, 4] = broadcast(%3) {dims = []}
%5 : f32[2, 4] = mul(%2, %4)
%6 : f32[4, 3] = convert(%1)
%7 : f32[] = constant() {value = [0.25]}
%8 : f32[4, 3] = broadcast(%7) {dims = []}
%9 : f32[4, 3] = mul(%6, %8)
%10 : f32[2, 3] = dot(%5, %9)
return %10
)";

TEST(QuantizedDotNegative, OnlyPerTensorActivationScalesAndOneQuantizedDtypeMatch) {
  EXPECT_NE(quantized(kDequantizedDot), "unchanged");
  // The activation scaled per row; a weight of another quantized dtype; an infinite scale; int32
  // values widened (not a quantized dtype).
  EXPECT_EQ(quantized(replaced(replaced(kDequantizedDot, "%3 : f32[] = constant() {value = [0.5]}",
                                        "%3 : f32[2] = constant() {value = [0.5, 2]}"),
                               "broadcast(%3) {dims = []}", "broadcast(%3) {dims = [0]}")),
            "unchanged");
  EXPECT_EQ(quantized(replaced(kDequantizedDot, "%1 : i8[4, 3]", "%1 : f8[4, 3]")), "unchanged");
  EXPECT_EQ(quantized(replaced(kDequantizedDot, "value = [0.25]", "value = [inf]")), "unchanged");
  EXPECT_EQ(quantized(replaced(replaced(kDequantizedDot, "%0 : i8[2, 4]", "%0 : i32[2, 4]"), "%1 : i8[4, 3]",
                               "%1 : i32[4, 3]")),
            "unchanged");
}

// What flat::quantized_dot makes of float8 x float8 -> bfloat16 with per-tensor scales: the
// float32 sum, its rescale by 0.125 and the convert, all inside the dot kernel.
const char* kFloat8Rescale = R"(%0 : f8[2, 16] = parameter() {index = 0}
%1 : f8[16, 8] = parameter() {index = 1}
%2 : f32[2, 8] = dot(%0, %1)
%3 : f32[] = constant() {value = [0.125]}
%4 : f32[2, 8] = broadcast(%3) {dims = []}
%5 : f32[2, 8] = mul(%2, %4)
%6 : bf16[2, 8] = convert(%5)
return %6
)";

TEST(DotEpilogueNegative, OnlyAFloat8DotsScalarRescaleJoinsItsGemm) {
  EXPECT_EQ(plan_of(kFloat8Rescale), "%6 = dot(%0, %1) {scale 0.125}\n");
  // The float32 result kept (no convert), and a convert to float32's neighbours that the GEMM writes.
  EXPECT_EQ(plan_of(replaced(replaced(kFloat8Rescale, "%6 : bf16[2, 8] = convert(%5)\n", ""), "return %6",
                             "return %5")),
            "%5 = dot(%0, %1) {scale 0.125}\n");
  EXPECT_TRUE(has(plan_of(replaced(kFloat8Rescale, "%6 : bf16", "%6 : f16")), "%6 = dot(%0, %1) {scale 0.125}"));
  // A scale per column; int8 operands (their int32 sums convert first); the sum read twice; a
  // convert to an integer: the rescale stays a kernel of its own (or the convert does).
  EXPECT_FALSE(has(plan_of(replaced(replaced(kFloat8Rescale, "%3 : f32[] = constant() {value = [0.125]}",
                                             "%3 : f32[8] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}"),
                                    "broadcast(%3) {dims = []}", "broadcast(%3) {dims = [1]}")),
                   "scale"));
  const std::string int8 = replaced(replaced(kFloat8Rescale, "f8[2, 16]", "i8[2, 16]"), "f8[16, 8]", "i8[16, 8]");
  EXPECT_FALSE(has(plan_of(replaced(int8, "%2 : f32[2, 8] = dot(%0, %1)",
                                    "%7 : i32[2, 8] = dot(%0, %1)\n%2 : f32[2, 8] = convert(%7)")),
                   "scale"));
  EXPECT_FALSE(has(plan_of(replaced(kFloat8Rescale, "return %6", "return %6, %2")), "scale"));
  EXPECT_EQ(plan_of(replaced(kFloat8Rescale, "%6 : bf16", "%6 : i32")).find("%6 = dot"), std::string::npos);
}

}  // namespace
}  // namespace tripy::flat

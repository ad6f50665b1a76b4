// Convolutions in FlatIR: the text form round-trips their attributes, the verifier checks their
// shapes, and fusion folds bias, residual and relu into the convolution kernel (ResNet's block).
#include <gtest/gtest.h>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

TEST(ConvolutionIr, TextRoundTripsEveryAttribute) {
  const char* text = R"(sym n [1, 2, 4]
%0 : f32[n, 4, 5, 5] = parameter() {index = 0}
%1 : f32[4, 2, 3, 3] = constant() {value = <72 elements>}
%2 : f32[n, 4, 3, 2] = convolution(%0, %1) {stride = [2, 2], pad_before = [1, 0], pad_after = [1, 2], dilation = [1, 2], output_padding = [0, 0], groups = 2}
%3 : f32[n, 4, 7, 6] = convolution(%2, %1) {stride = [2, 3], pad_before = [1, 1], pad_after = [0, 1], dilation = [1, 1], output_padding = [1, 2], groups = 2, transposed = true}
return %3
)";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok()) << verify(*g).message();
  auto again = parse_graph(g->str());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->str(), g->str());
  EXPECT_NE(g->str().find("output_padding = [1, 2], groups = 2, transposed = true"), std::string::npos) << g->str();
}

TEST(ConvolutionIr, VerifierRejectsAWrongResultShape) {
  const std::string error = verify_error(R"(%0 : f32[1, 2, 5, 5] = parameter() {index = 0}
%1 : f32[3, 2, 3, 3] = constant() {value = <54 elements>}
%2 : f32[1, 3, 4, 3] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
return %2
)");
  EXPECT_TRUE(has(error, "expected (1, 3, 3, 3)")) << error;
}

TEST(ConvolutionFusion, GeluAndSiluJoinTheConvolutionAsThePrimitivesTheyAre) {
  for (const char* act : {"gelu", "silu"}) {
    const std::string text = std::string(R"(%0 : f32[2, 4, 5, 5] = parameter() {index = 0}
%1 : f32[4, 4, 3, 3] = constant() {value = <144 elements>}
%2 : f32[2, 4, 5, 5] = convolution(%0, %1) {stride = [1, 1], pad_before = [1, 1], pad_after = [1, 1], dilation = [1, 1], output_padding = [0, 0]}
%3 : f32[2, 4, 5, 5] = )") + act + R"((%2)
return %3
)";
    EXPECT_EQ(plan_of(text.c_str()),
              "%3 = convolution(%0, %1) {stride = [1, 1], pad_before = [1, 1], pad_after = [1, 1], dilation = [1, 1], "
              "output_padding = [0, 0], activation = " + std::string(act) + "}\n");
  }
}

TEST(ConvolutionFusion, BiasResidualAndReluJoinTheConvolution) {
  // relu(conv(x) + bias[C, 1, 1] + x): one kernel.
  EXPECT_EQ(plan_of(R"(%0 : f32[2, 4, 5, 5] = parameter() {index = 0}
%1 : f32[4, 4, 3, 3] = constant() {value = <144 elements>}
%2 : f32[2, 4, 5, 5] = convolution(%0, %1) {stride = [1, 1], pad_before = [1, 1], pad_after = [1, 1], dilation = [1, 1], output_padding = [0, 0]}
%3 : f32[4, 1, 1] = constant() {value = [1, 2, 3, 4]}
%4 : f32[2, 4, 5, 5] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[2, 4, 5, 5] = add(%2, %4)
%6 : f32[2, 4, 5, 5] = add(%0, %5)
%7 : f32[] = constant() {value = [0]}
%8 : f32[2, 4, 5, 5] = broadcast(%7) {dims = []}
%9 : f32[2, 4, 5, 5] = max(%6, %8)
return %9
)"),
            "%9 = convolution(%0, %1, %3, %0) {stride = [1, 1], pad_before = [1, 1], pad_after = [1, 1], dilation = [1, 1], "
            "output_padding = [0, 0], has_bias = true, has_residual = true, activation = relu}\n");
}

TEST(ConvolutionFusion, ALaterConvolutionTakesAnEarlierOneAsItsResidual) {
  // ResNet's downsampling block: out = relu(conv_a(x) + b_a + conv_b(x) + b_b); conv_b comes later
  // in graph order, so it is the one that can read conv_a's result as its residual.
  EXPECT_EQ(plan_of(R"(%0 : f32[1, 2, 4, 4] = parameter() {index = 0}
%1 : f32[3, 2, 1, 1] = constant() {value = <6 elements>}
%2 : f32[1, 3, 4, 4] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%3 : f32[3] = constant() {value = [1, 2, 3]}
%4 : f32[1, 3, 4, 4] = broadcast(%3) {dims = [1]}
%5 : f32[1, 3, 4, 4] = add(%2, %4)
%6 : f32[1, 3, 4, 4] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%7 : f32[1, 3, 4, 4] = add(%6, %4)
%8 : f32[1, 3, 4, 4] = add(%5, %7)
%9 : f32[] = constant() {value = [0]}
%10 : f32[1, 3, 4, 4] = broadcast(%9) {dims = []}
%11 : f32[1, 3, 4, 4] = max(%8, %10)
return %11
)"),
            "%5 = convolution(%0, %1, %3) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], "
            "output_padding = [0, 0], has_bias = true}\n"
            "%11 = convolution(%0, %1, %3, %5) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], "
            "output_padding = [0, 0], has_bias = true, has_residual = true, activation = relu}\n");
}

TEST(ConvolutionFusion, AnAddOfABroadcastAlongAnotherDimIsNotABias) {
  EXPECT_EQ(plan_of(R"(%0 : f32[1, 3, 3, 3] = parameter() {index = 0}
%1 : f32[3, 3, 1, 1] = constant() {value = <9 elements>}
%2 : f32[1, 3, 3, 3] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%3 : f32[3] = constant() {value = [1, 2, 3]}
%4 : f32[1, 3, 3, 3] = broadcast(%3) {dims = [3]}
%5 : f32[1, 3, 3, 3] = add(%2, %4)
return %5
)"),
            "%2 = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}\n"
            "%5 = fused(%2, %3) {domain = (1, 3, 3, 3), ops = 1}\n");
}

}  // namespace
}  // namespace tripy::flat

namespace tripy::flat {
namespace {

TEST(ConvolutionFusion, ABiasReshapedAfterTheConvolutionIsReadThroughTheReshape) {
  // Eager mode lowers tp.Conv's bias add without simplification: reshape(b) comes after the conv.
  EXPECT_EQ(plan_of(R"(%0 : f32[1, 2, 4, 4] = parameter() {index = 0}
%1 : f32[3, 2, 1, 1] = parameter() {index = 1}
%2 : f32[3] = parameter() {index = 2}
%3 : f32[1, 3, 4, 4] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%4 : f32[3, 1, 1] = reshape(%2)
%5 : f32[1, 3, 4, 4] = broadcast(%4) {dims = [1, 2, 3]}
%6 : f32[1, 3, 4, 4] = add(%3, %5)
return %6
)"),
            "%4 = alias(%2)\n"
            "%6 = convolution(%0, %1, %2) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], "
            "output_padding = [0, 0], has_bias = true}\n");
}

}  // namespace
}  // namespace tripy::flat

// channels_last, text in and text out: convolutions of narrow floats run channels-last with the
// bias, activation, residual and pooling between them; layouts change only at the chain's edges
// (one transpose in, one out) and constant weights are re-laid out (KRSC) at compile time.
#include <gtest/gtest.h>

#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

std::string rewritten(const std::string& text, const ChannelsLastRule& rule = {}) {
  return pass_on_text(text, [&](const Graph& g) { return channels_last(g, rule); });
}

std::string fill(std::string text, const char* dtype = "f16") {
  const std::pair<std::string, std::string> subs[] = {
      {"{CONV}", "{stride = [1, 1], pad_before = [0, 0], pad_after = [0, 1], dilation = [1, 1], output_padding = [0, 0]}"},
      {"{CONV_CL}", "{stride = [1, 1], pad_before = [0, 0], pad_after = [0, 1], dilation = [1, 1], output_padding = [0, 0], "
                    "layout = channels_last}"},
      {"DT", dtype}};
  for (const auto& [from, to] : subs)
    for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
  return text;
}

// x -> conv(w) + bias -> relu -> conv(w) + x -> sum over the spatial dims.
constexpr const char* kChain = R"(sym n [1, 2, 4]
%0 : DT[n, 2, 3, 4] = parameter() {index = 0}
%1 : DT[2, 2, 1, 2] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : DT[n, 2, 3, 4] = convolution(%0, %1) {CONV}
%3 : DT[2, 1, 1] = constant() {value = [1, -1]}
%4 : DT[n, 2, 3, 4] = broadcast(%3) {dims = [1, 2, 3]}
%5 : DT[n, 2, 3, 4] = add(%2, %4)
%6 : DT[] = constant() {value = [0]}
%7 : DT[n, 2, 3, 4] = broadcast(%6) {dims = []}
%8 : DT[n, 2, 3, 4] = max(%5, %7)
%9 : DT[n, 2, 3, 4] = convolution(%8, %1) {CONV}
%10 : DT[n, 2, 3, 4] = add(%9, %0)
%11 : DT[n, 2] = reduce_sum(%10) {dims = [2, 3]}
return %11
)";

TEST(ChannelsLast, AConvolutionChainTransposesOnlyAtItsEdges) {
  // One transpose in (read by the first convolution and by the residual add), one out (before
  // the reduction); the weight is stored (O, k, C): [[1, 3], [2, 4]] for [[1, 2], [3, 4]]; the
  // bias [2, 1, 1] broadcasts as [1, 1, 2] along the last dim.
  EXPECT_EQ(rewritten(fill(kChain)), fill(R"(sym n [1, 2, 4]
%0 : f16[n, 2, 3, 4] = parameter() {index = 0}
%1 : f16[n, 3, 4, 2] = transpose(%0) {dims = [0, 2, 3, 1]}
%2 : f16[2, 1, 2, 2] = constant() {value = [1, 3, 2, 4, 5, 7, 6, 8]}
%3 : f16[n, 3, 4, 2] = convolution(%1, %2) {CONV_CL}
%4 : f16[2, 1, 1] = constant() {value = [1, -1]}
%5 : f16[1, 1, 2] = reshape(%4)
%6 : f16[n, 3, 4, 2] = broadcast(%5) {dims = [1, 2, 3]}
%7 : f16[n, 3, 4, 2] = add(%3, %6)
%8 : f16[] = constant() {value = [0]}
%9 : f16[n, 3, 4, 2] = broadcast(%8) {dims = []}
%10 : f16[n, 3, 4, 2] = max(%7, %9)
%11 : f16[n, 3, 4, 2] = convolution(%10, %2) {CONV_CL}
%12 : f16[n, 3, 4, 2] = add(%11, %1)
%13 : f16[n, 2, 3, 4] = transpose(%12) {dims = [0, 3, 1, 2]}
%14 : f16[n, 2] = reduce_sum(%13) {dims = [2, 3]}
return %14
)"));
}

// A float16 mean is computed in float32: the convert that widens the chain's last value is
// redone after the transpose back, which so moves float16, and the convert joins the reduction.
constexpr const char* kWidenedMean = R"(%0 : f16[1, 2, 3, 4] = parameter() {index = 0}
%1 : f16[2, 2, 1, 2] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f16[1, 2, 3, 4] = convolution(%0, %1) {CONV}
%3 : CT[1, 2, 3, 4] = convert(%2)
%4 : CT[1, 2] = reduce_sum(%3) {dims = [2, 3]}
return %4
)";

TEST(ChannelsLast, AWideningConvertLeavesAfterTheTransposeOfItsNarrowOperand) {
  auto with = [](const char* to) {
    std::string t = fill(kWidenedMean);
    for (size_t at; (at = t.find("CT")) != std::string::npos;) t.replace(at, 2, to);
    return t;
  };
  EXPECT_EQ(rewritten(with("f32")), fill(R"(%0 : f16[1, 2, 3, 4] = parameter() {index = 0}
%1 : f16[1, 3, 4, 2] = transpose(%0) {dims = [0, 2, 3, 1]}
%2 : f16[2, 1, 2, 2] = constant() {value = [1, 3, 2, 4, 5, 7, 6, 8]}
%3 : f16[1, 3, 4, 2] = convolution(%1, %2) {CONV_CL}
%4 : f16[1, 2, 3, 4] = transpose(%3) {dims = [0, 3, 1, 2]}
%5 : f32[1, 2, 3, 4] = convert(%4)
%6 : f32[1, 2] = reduce_sum(%5) {dims = [2, 3]}
return %6
)"));
  // A convert to a dtype of the same size (or narrower) runs channels-last and is transposed back.
  const std::string same = rewritten(with("bf16"));
  EXPECT_NE(same.find("bf16[1, 3, 4, 2] = convert("), std::string::npos) << same;
  EXPECT_NE(same.find("bf16[1, 2, 3, 4] = transpose("), std::string::npos) << same;
}

TEST(ChannelsLast, TheRuleNamesTheDtypes) {
  EXPECT_EQ(rewritten(fill(kChain, "f32")), "unchanged");
  const std::string f32 = rewritten(fill(kChain, "f32"), {{DType::kFloat32}, 1});
  EXPECT_NE(f32.find("layout = channels_last"), std::string::npos) << f32;
  EXPECT_EQ(rewritten(fill(kChain, "f16"), {{DType::kFloat32}, 1}), "unchanged");
}

TEST(ChannelsLast, AChainShorterThanTheRulesMinimumStaysChannelsFirst) {
  // kChain has two convolutions.
  EXPECT_EQ(rewritten(fill(kChain), {{DType::kFloat16}, 3}), "unchanged");
  EXPECT_NE(rewritten(fill(kChain), {{DType::kFloat16}, 2}).find("layout = channels_last"), std::string::npos);
}

TEST(ChannelsLast, PoolingFollowsAConvolutionAndAloneStaysChannelsFirst) {
  const char* pool = "{window = [2, 2], stride = [2, 2], pad_before = [0, 0], pad_after = [0, 0]}";
  std::string text = R"(%0 : f16[1, 2, 4, 4] = parameter() {index = 0}
%1 : f16[1, 2, 2, 2] = pooling(%0) POOL
%2 : f16[2, 2, 1, 1] = constant() {value = [1, 2, 3, 4]}
%3 : f16[1, 2, 2, 2] = convolution(%1, %2) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%4 : f16[1, 2, 1, 1] = pooling(%3) POOL
return %4
)";
  text.replace(text.find("POOL"), 4, pool);
  text.replace(text.find("POOL"), 4, pool);
  EXPECT_EQ(rewritten(text), std::string(R"(%0 : f16[1, 2, 4, 4] = parameter() {index = 0}
%1 : f16[1, 2, 2, 2] = pooling(%0) {window = [2, 2], stride = [2, 2], pad_before = [0, 0], pad_after = [0, 0]}
%2 : f16[1, 2, 2, 2] = transpose(%1) {dims = [0, 2, 3, 1]}
%3 : f16[2, 1, 1, 2] = constant() {value = [1, 2, 3, 4]}
%4 : f16[1, 2, 2, 2] = convolution(%2, %3) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0], layout = channels_last}
%5 : f16[1, 1, 1, 2] = pooling(%4) {window = [2, 2], stride = [2, 2], pad_before = [0, 0], pad_after = [0, 0], layout = channels_last}
%6 : f16[1, 2, 1, 1] = transpose(%5) {dims = [0, 3, 1, 2]}
return %6
)"));
}

TEST(ChannelsLast, ABroadcastWhoseDimsCrossIsReorderedByATranspose) {
  // A [2, 3] operand along (channels, width): channels-last its dims land at (3, 2), so the
  // operand is transposed to [3, 2] (a per-channel [2, 1, 1] bias only needs a reshape).
  const std::string out = rewritten(fill(R"(%0 : f16[1, 2, 1, 3] = parameter() {index = 0}
%1 : f16[2, 2, 1, 1] = constant() {value = [1, 2, 3, 4]}
%2 : f16[1, 2, 1, 3] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%3 : f16[2, 3] = parameter() {index = 1}
%4 : f16[1, 2, 1, 3] = broadcast(%3) {dims = [1, 3]}
%5 : f16[1, 2, 1, 3] = mul(%2, %4)
return %5
)"));
  EXPECT_NE(out.find("f16[3, 2] = transpose(%4) {dims = [1, 0]}"), std::string::npos) << out;
  EXPECT_NE(out.find("broadcast(%5) {dims = [2, 3]}"), std::string::npos) << out;
}

TEST(ChannelsLast, TransposedAndThreeDimensionalConvolutionsAreRewrittenToo) {
  // A transposed weight (C, O / groups, k...) is stored (C, k..., O / groups).
  const std::string out = rewritten(R"(%0 : f16[1, 2, 2, 2, 2] = parameter() {index = 0}
%1 : f16[2, 2, 1, 1, 2] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f16[1, 2, 2, 2, 3] = convolution(%0, %1) {stride = [1, 1, 1], pad_before = [0, 0, 0], pad_after = [0, 0, 0], dilation = [1, 1, 1], output_padding = [0, 0, 0], transposed = true}
return %2
)");
  EXPECT_NE(out.find("f16[2, 1, 1, 2, 2] = constant() {value = [1, 3, 2, 4, 5, 7, 6, 8]}"), std::string::npos) << out;
  EXPECT_NE(out.find("f16[1, 2, 2, 3, 2] = convolution"), std::string::npos) << out;
  EXPECT_NE(out.find("output_padding = [0, 0, 0], transposed = true, layout = channels_last"), std::string::npos) << out;
}

TEST(ChannelsLast, VerifyChecksChannelsLastShapes) {
  // The input's channels are its last dim: 3 channels do not match a weight for 2.
  const std::string error = verify_error(R"(%0 : f16[1, 4, 4, 3] = parameter() {index = 0}
%1 : f16[2, 1, 1, 2] = constant() {value = [1, 2, 3, 4]}
%2 : f16[1, 4, 4, 2] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0], layout = channels_last}
return %2
)");
  EXPECT_TRUE(has(error, "channels do not match")) << error;
}

TEST(ChannelsLast, AConcatenationOfChannelsLastValuesStaysChannelsLast) {
  // UNet's skip: concat([conv(x), x], channels) feeds a convolution with no layout change between.
  const std::string out = rewritten(R"(%0 : f16[1, 2, 3, 3] = parameter() {index = 0}
%1 : f16[2, 2, 1, 1] = constant() {value = [1, 2, 3, 4]}
%2 : f16[1, 2, 3, 3] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
%3 : f16[1, 4, 3, 3] = concatenate(%2, %0) {dims = [1]}
%4 : f16[1, 4, 1, 1] = constant() {value = [1, 2, 3, 4]}
%5 : f16[1, 1, 3, 3] = convolution(%3, %4) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0]}
return %5
)");
  EXPECT_NE(out.find("f16[1, 3, 3, 4] = concatenate(%3, %1) {dims = [3]}"), std::string::npos) << out;
  size_t transposes = 0;
  for (size_t at = 0; (at = out.find("transpose(", at)) != std::string::npos; ++at) ++transposes;
  EXPECT_EQ(transposes, 2u) << out;
}

}  // namespace
}  // namespace tripy::flat

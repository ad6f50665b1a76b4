// fold_conv_affine, text in and text out: inference BatchNorm's multiply-add after a convolution
// becomes scaled weights and one bias add (which fusion then puts into the convolution's epilogue).
#include <gtest/gtest.h>

#include "common/half.h"
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

std::string folded(const std::string& text) { return pass_on_text(text, fold_conv_affine); }

TEST(FoldConvAffine, BatchNormBecomesScaledWeightsAndABias) {
  // relu(conv(x, [1, 2]) * [3, 0.5] + [1, -1]): weights [3, 1], bias [1, -1], the relu stays.
  EXPECT_EQ(folded(with_conv(R"(sym n [1, 2, 4]
%0 : f32[n, 1, 3, 3] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[n, 2, 3, 3] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [3, 0.5]}
%4 : f32[n, 2, 3, 3] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[n, 2, 3, 3] = mul(%2, %4)
%6 : f32[2, 1, 1] = constant() {value = [1, -1]}
%7 : f32[n, 2, 3, 3] = broadcast(%6) {dims = [1, 2, 3]}
%8 : f32[n, 2, 3, 3] = add(%5, %7)
%9 : f32[] = constant() {value = [0]}
%10 : f32[n, 2, 3, 3] = broadcast(%9) {dims = []}
%11 : f32[n, 2, 3, 3] = max(%8, %10)
return %11
)").c_str()),
            with_conv(R"(sym n [1, 2, 4]
%0 : f32[n, 1, 3, 3] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [3, 1]}
%2 : f32[n, 2, 3, 3] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [1, -1]}
%4 : f32[n, 2, 3, 3] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[n, 2, 3, 3] = add(%2, %4)
%6 : f32[] = constant() {value = [0]}
%7 : f32[n, 2, 3, 3] = broadcast(%6) {dims = []}
%8 : f32[n, 2, 3, 3] = max(%5, %7)
return %8
)"));
}

TEST(FoldConvAffine, AConvolutionBiasBeforeTheBatchNormIsScaledToo) {
  // ((conv + [1, 2]) - [0, 4]) / [2, 4] with the operands in either order: scale [0.5, 0.25],
  // shift ([1, 2] - [0, 4]) / [2, 4] = [0.5, -0.5]; a [2] vector broadcast along dim 1 is per channel.
  EXPECT_EQ(folded(with_conv(R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [4, 8]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2] = constant() {value = [1, 2]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1]}
%5 : f32[1, 2, 2, 2] = add(%4, %2)
%6 : f32[2] = constant() {value = [0, 4]}
%7 : f32[1, 2, 2, 2] = broadcast(%6) {dims = [1]}
%8 : f32[1, 2, 2, 2] = sub(%5, %7)
%9 : f32[2] = constant() {value = [2, 4]}
%10 : f32[1, 2, 2, 2] = broadcast(%9) {dims = [1]}
%11 : f32[1, 2, 2, 2] = div(%8, %10)
return %11
)").c_str()),
            with_conv(R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [2, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [0.5, -0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 2, 2, 2] = add(%2, %4)
return %5
)"));
}

TEST(FoldConvAffine, TransposedAndGroupedWeightsScaleTheirOutputChannels) {
  // Transposed, groups = 2: weight (C = 2, O/g = 2, 1, 1); element [c, j] feeds output channel
  // c * 2 + j, so scales [1, 10, 100, 1000] multiply [[1, 1], [1, 1]] to [[1, 10], [100, 1000]].
  // A scale alone adds no bias.
  EXPECT_EQ(folded(R"(%0 : f32[1, 2, 2, 2] = parameter() {index = 0}
%1 : f32[2, 2, 1, 1] = constant() {value = [1, 1, 1, 1]}
%2 : f32[1, 4, 2, 2] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0], groups = 2, transposed = true}
%3 : f32[4, 1, 1] = constant() {value = [1, 10, 100, 1000]}
%4 : f32[1, 4, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 4, 2, 2] = mul(%4, %2)
return %5
)"),
            R"(%0 : f32[1, 2, 2, 2] = parameter() {index = 0}
%1 : f32[2, 2, 1, 1] = constant() {value = [1, 10, 100, 1000]}
%2 : f32[1, 4, 2, 2] = convolution(%0, %1) {stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], dilation = [1, 1], output_padding = [0, 0], groups = 2, transposed = true}
return %2
)");
}

TEST(FoldConvAffine, Float16WeightsRoundLikeTheScalarConversion) {
  // 2 x 19 weights: rows longer than one 8-wide step with a tail, values from subnormal to the
  // largest half; the vector path (F16C where present) must give the software conversion's bits.
  std::string values;
  std::vector<double> w;
  for (int i = 0; i < 38; ++i) {
    const double v = i == 0 ? 6e-8 : i == 1 ? 65504.0 : i == 2 ? -3e-5 : (i * 0.37 - 7.0) / (i % 5 + 1);
    w.push_back(v);
    values += (i ? ", " : "") + std::to_string(v);
  }
  const std::string text = "%0 : f16[1, 19, 2, 2] = parameter() {index = 0}\n"
                           "%1 : f16[2, 19, 1, 1] = constant() {value = [" + values + "]}\n"
                           "%2 : f16[1, 2, 2, 2] = convolution(%0, %1) {CONV}\n"
                           "%3 : f16[2, 1, 1] = constant() {value = [0.3, 1.7]}\n"
                           "%4 : f16[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}\n"
                           "%5 : f16[1, 2, 2, 2] = mul(%2, %4)\n"
                           "return %5\n";
  auto g = parse_graph(with_conv(text));
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = fold_conv_affine(*g);
  ASSERT_TRUE(out.has_value());
  const Op* conv = nullptr;
  for (const Op& op : out->ops)
    if (op.kind == OpKind::kConvolution) conv = &op;
  ASSERT_NE(conv, nullptr);
  const Tensor& folded_w = out->def(conv->operands[1]).constant;
  const Tensor& original = g->def(g->ops[2].operands[1]).constant;
  const Tensor& scales = g->def(g->ops[3].result).constant;
  ASSERT_EQ(folded_w.numel(), 38);
  for (int i = 0; i < 38; ++i) {
    const double s = cpu::half_to_float(static_cast<const uint16_t*>(scales.data())[i / 19]);
    const float x = cpu::half_to_float(static_cast<const uint16_t*>(original.data())[i]);
    EXPECT_EQ(static_cast<const uint16_t*>(folded_w.data())[i], cpu::float_to_half(static_cast<float>(x * s)))
        << "element " << i << " (" << w[static_cast<size_t>(i)] << ")";
  }
}

TEST(FoldConvAffine, LeavesRuntimeWeightsSharedResultsAndOtherAxes) {
  // A weight given at run time (eager mode), a result read twice, and a scale along the width.
  const char* cases[] = {
      R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = parameter() {index = 1}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [3, 0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 2, 2, 2] = mul(%2, %4)
return %5
)",
      R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1] = constant() {value = [3, 0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [1, 2, 3]}
%5 : f32[1, 2, 2, 2] = mul(%2, %4)
return %5, %2
)",
      R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2] = constant() {value = [3, 0.5]}
%4 : f32[1, 2, 2, 2] = broadcast(%3) {dims = [3]}
%5 : f32[1, 2, 2, 2] = mul(%2, %4)
return %5
)",
  };
  for (const char* text : cases) EXPECT_EQ(folded(with_conv(text).c_str()), "unchanged") << text;
}

}  // namespace
}  // namespace tripy::flat

namespace tripy::flat {
namespace {

TEST(MergeConvBiases, TwoBiasedConvolutionsAddedShareOneBias) {
  // relu((conv_a + [1, 2]) + (conv_b + [10, 20])) -> relu((conv_b + [11, 22]) + conv_a).
  auto g = parse_graph(with_conv(R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
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
%12 : f32[] = constant() {value = [0]}
%13 : f32[1, 2, 2, 2] = broadcast(%12) {dims = []}
%14 : f32[1, 2, 2, 2] = max(%11, %13)
return %14
)"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = merge_conv_biases(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok()) << verify(*out).message();
  EXPECT_EQ(out->str(), with_conv(R"(%0 : f32[1, 1, 2, 2] = parameter() {index = 0}
%1 : f32[2, 1, 1, 1] = constant() {value = [1, 2]}
%2 : f32[1, 2, 2, 2] = convolution(%0, %1) {CONV}
%3 : f32[2, 1, 1, 1] = constant() {value = [3, 4]}
%4 : f32[1, 2, 2, 2] = convolution(%0, %3) {CONV}
%5 : f32[2, 1, 1] = constant() {value = [11, 22]}
%6 : f32[1, 2, 2, 2] = broadcast(%5) {dims = [1, 2, 3]}
%7 : f32[1, 2, 2, 2] = add(%4, %6)
%8 : f32[1, 2, 2, 2] = add(%7, %2)
%9 : f32[] = constant() {value = [0]}
%10 : f32[1, 2, 2, 2] = broadcast(%9) {dims = []}
%11 : f32[1, 2, 2, 2] = max(%8, %10)
return %11
)"));
}

}  // namespace
}  // namespace tripy::flat

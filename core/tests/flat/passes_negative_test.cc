// The graph-cleaning passes (simplify, cse, constant_fold, the sinking passes, split_dot_slices and
// pad_dot_columns) where one firing condition fails: text in, and the same text (or only the part
// whose conditions hold) out. Each family has a positive control in passes_test.cc.
#include <gtest/gtest.h>

#include "../compiler/compile_text.h"
#include "compiler/compile.h"  // the evaluator constant folding is given
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

TEST(SimplifyNegative, OpsThatAreIdentitiesOnlyOnOneSideOrForSomeValuesStay) {
  // 0 - x and 1 / x (the identity is x - 0, x / 1), x * [1, 2] (not all ones), a round trip
  // through float16 (it rounds), a reversing slice, a slice from 1, a reshape that moves
  // elements read by a broadcast, and transposes that compose to a non-identity.
  const char* text = R"(%0 : f32[2] = parameter() {index = 0}
%1 : f32[] = constant() {value = [0]}
%2 : f32[2] = broadcast(%1) {dims = []}
%3 : f32[2] = sub(%2, %0)
%4 : f32[] = constant() {value = [1]}
%5 : f32[2] = broadcast(%4) {dims = []}
%6 : f32[2] = div(%5, %0)
%7 : f32[2] = constant() {value = [1, 2]}
%8 : f32[2] = mul(%0, %7)
%9 : f16[2] = convert(%0)
%10 : f32[2] = convert(%9)
%11 : f32[2] = slice(%0) {starts = [1], limits = [-1], steps = [-1]}
%12 : f32[1] = slice(%0) {starts = [1], limits = [2], steps = [1]}
%13 : f32[2, 3] = parameter() {index = 1}
%14 : f32[3, 2] = reshape(%13)
%15 : f32[4, 3, 2] = broadcast(%14) {dims = [1, 2]}
%16 : f32[3, 2] = transpose(%13) {dims = [1, 0]}
%17 : f32[4, 3, 2] = broadcast(%16) {dims = [1, 2]}
%18 : f32[3, 4, 2] = transpose(%17) {dims = [1, 0, 2]}
return %3, %6, %8, %10, %11, %12, %15, %18
)";
  EXPECT_EQ(simplify(parsed(text)).str(), parsed(text).str());
}

TEST(SimplifyNegative, ASizeTheBoundsDoNotDecideAndItsCheckStay) {
  // T may exceed 1024 (by one, or by far): min(T, 1024) is not T, the slice keeps its size and the
  // run-time check stays (with T <= 1024, passes_test.cc's control, both go).
  for (const char* most : {"1025", "2048"}) {
    const std::string text = std::string("sym T [1, 512, ") + most + R"(]
%0 : f32[T] = parameter() {index = 0}
%1 : f32[1024] = parameter() {index = 1}
%2 : f32[min(T, 1024)] = slice(%1) {starts = [0], limits = [min(T, 1024)], steps = [1]}
%3 : f32[max(T, min(T, 1024))] = broadcast(%2) {dims = [0]}
%4 : f32[max(T, min(T, 1024))] = add(%0, %3)
assert_broadcast(T, min(T, 1024)) "T and the mask"
return %4
)";
    const std::string out = simplify(parsed(text)).str();
    EXPECT_NE(out.find("slice(%1) {starts = [0], limits = [min(T, 1024)]"), std::string::npos) << out;
    EXPECT_NE(out.find("assert_broadcast(T, min(T, 1024))"), std::string::npos) << out;
    EXPECT_NE(out.find("broadcast(%2)"), std::string::npos) << out;
  }
}

TEST(CseNegative, OpsThatDifferInAnyAttributeOrTypeStayApart) {
  // Converts to two dtypes, transposes, slices, broadcasts and iotas along other dims,
  // reductions of another fn or dims, constants of the same bytes in two dtypes, two parameters,
  // and attentions with other scales.
  const char* text = R"(%0 : f32[3, 3] = parameter() {index = 0}
%1 : f32[3, 3] = parameter() {index = 1}
%2 : f16[3, 3] = convert(%0)
%3 : bf16[3, 3] = convert(%0)
%4 : f32[3, 3] = transpose(%0) {dims = [1, 0]}
%5 : f32[3, 3] = transpose(%0) {dims = [0, 1]}
%6 : f32[2, 3] = slice(%0) {starts = [0, 0], limits = [2, 3], steps = [1, 1]}
%7 : f32[2, 3] = slice(%0) {starts = [1, 0], limits = [3, 3], steps = [1, 1]}
%8 : f32[3] = reduce_sum(%0) {dims = [1]}
%9 : f32[3] = reduce_sum(%0) {dims = [0]}
%10 : f32[3] = reduce_max(%0) {dims = [1]}
%11 : f32[3, 3] = broadcast(%8) {dims = [0]}
%12 : f32[3, 3] = broadcast(%8) {dims = [1]}
%13 : i32[3, 3] = iota() {dims = [0]}
%14 : i32[3, 3] = iota() {dims = [1]}
%15 : i32[] = constant() {value = [0]}
%16 : f32[] = constant() {value = [0]}
%17 : f32[1, 1, 3, 3] = reshape(%0)
%18 : f32[1, 1, 3, 3] = attention(%17, %17, %17) {scale = 0.5}
%19 : f32[1, 1, 3, 3] = attention(%17, %17, %17) {scale = 0.25}
%20 : f32[3, 3] = sub(%0, %1)
%21 : f32[3, 3] = sub(%1, %0)
return %1, %2, %3, %4, %5, %6, %7, %9, %10, %11, %12, %13, %14, %15, %16, %18, %19, %20, %21
)";
  EXPECT_EQ(cse(parsed(text)).str(), parsed(text).str());
}

TEST(ConstantFoldNegative, RunTimeValuesDynamicResultsAndKernelOpsAreNotEvaluated) {
  // An op with a parameter operand, a constant sliced to a dynamic size, and a sampler over
  // constant logits (it runs when called, with the key it is given then).
  const char* text = R"(sym n [1, 2, 4]
%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = constant() {value = [1, 2, 3, 4]}
%2 : f32[4] = add(%0, %1)
%3 : f32[n] = slice(%1) {starts = [0], limits = [n], steps = [1]}
%4 : f32[n] = exp(%3)
%5 : i64[1] = constant() {value = [7]}
%6 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 4, 3, 2, 1]}
%7 : i32[2] = sample(%6, %5) {temperature = 1, top_k = 0, top_p = 1}
return %2, %4, %7
)";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto folded = constant_fold(*g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(folded->str(), g->str());
}

TEST(SinkUnitReshapesNegative, AnOperandBroadcastAlongDimsOrAMovingReshapeStays) {
  // add(reshape(x) to [3, 1], broadcast of a [3] vector): not a splat; and a reshape that moves
  // the unit dim (a [1, 3] reshaped to [3, 1]).
  EXPECT_EQ(result_text(sink_unit_reshapes(parsed(R"(%0 : f32[3] = parameter() {index = 0}
%1 : f32[3] = parameter() {index = 1}
%2 : f32[3, 1] = reshape(%0)
%3 : f32[3, 1] = broadcast(%1) {dims = [0]}
%4 : f32[3, 1] = add(%2, %3)
return %4
)"))),
            "unchanged");
  EXPECT_EQ(result_text(sink_unit_reshapes(parsed(R"(%0 : f32[1, 3] = parameter() {index = 0}
%1 : f32[3, 1] = reshape(%0)
%2 : f32[3, 1] = exp(%1)
return %2
)"))),
            "unchanged");
}

TEST(SinkElementwiseNegative, AnOpThatIsAnOutputOrFeedsANonElementwiseOpStays) {
  // exp(dot) is an output; neg(dot) feeds a reduction, not an elementwise op; abs is already next
  // to its reader (no kernel between).
  EXPECT_EQ(result_text(sink_elementwise(parsed(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[8, 2] = parameter() {index = 1}
%2 : f32[4, 2] = dot(%0, %1)
%3 : f32[4, 2] = exp(%2)
%4 : f32[4, 2] = neg(%2)
%5 : f32[4, 2] = dot(%0, %1)
%6 : f32[4] = reduce_sum(%4) {dims = [1]}
%7 : f32[4, 2] = mul(%3, %5)
%8 : f32[4, 2] = abs(%5)
%9 : f32[4, 2] = add(%8, %7)
return %9, %3, %6
)"))),
            "unchanged");
}

// x (n, 2) @ W (2, 4) + bias, read through [:, :2] and [:, 2:]; `bias` and `slices` replace parts.
std::string biased_dot(const std::string& bias = "%3 : f32[4] = constant() {value = [10, 20, 30, 40]}\n"
                                                 "%4 : f32[3, 4] = broadcast(%3) {dims = [1]}\n",
                       const std::string& second = "starts = [0, 2], limits = [3, 4], steps = [1, 1]") {
  return R"(%0 : f32[3, 2] = parameter() {index = 0}
%1 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[3, 4] = dot(%0, %1)
)" + bias + R"(%5 : f32[3, 4] = add(%2, %4)
%6 : f32[3, 2] = slice(%5) {starts = [0, 0], limits = [3, 2], steps = [1, 1]}
%7 : f32[3, 2] = slice(%5) {)" + second + R"(}
%8 : f32[3, 2] = mul(%6, %7)
return %8
)";
}

TEST(SplitDotSlicesNegative, OnlyAPerColumnConstantBiasAndUnitStepColumnSlicesSplit) {
  EXPECT_NE(result_text(split_dot_slices(parsed(biased_dot()))), "unchanged");  // the control
  // A one-element bias stretched over the columns has no columns to slice; a bias given at run
  // time; a bias along the rows.
  EXPECT_EQ(result_text(split_dot_slices(parsed(biased_dot("%3 : f32[1] = constant() {value = [5]}\n"
                                                   "%4 : f32[3, 4] = broadcast(%3) {dims = [1]}\n")))),
            "unchanged");
  EXPECT_EQ(result_text(split_dot_slices(parsed(biased_dot("%3 : f32[4] = parameter() {index = 1}\n"
                                                   "%4 : f32[3, 4] = broadcast(%3) {dims = [1]}\n")))),
            "unchanged");
  EXPECT_EQ(result_text(split_dot_slices(parsed(biased_dot("%3 : f32[3] = constant() {value = [10, 20, 30]}\n"
                                                   "%4 : f32[3, 4] = broadcast(%3) {dims = [0]}\n")))),
            "unchanged");
  // Every other column; rows instead of columns.
  EXPECT_EQ(result_text(split_dot_slices(parsed(biased_dot(
                "%3 : f32[4] = constant() {value = [10, 20, 30, 40]}\n%4 : f32[3, 4] = broadcast(%3) {dims = [1]}\n",
                "starts = [0, 1], limits = [3, 4], steps = [1, 2]")))),
            "unchanged");
}

TEST(SplitDotSlicesNegative, AOneElementBiasComputesTheSameCompiled) {
  // x @ W + [5], sliced into halves and multiplied: against the product written out.
  auto exe = testing::compile_text(biased_dot("%3 : f32[1] = constant() {value = [5]}\n"
                                              "%4 : f32[3, 4] = broadcast(%3) {dims = [1]}\n"));
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  const std::vector<float> x = {1, -1, 0.5f, 2, -3, 0.25f};
  auto out = exe->run({testing::host({3, 2}, x)});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  const std::vector<float> got = testing::values((*out)[0]);
  const float w[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c) {
      auto y = [&](int col) { return x[r * 2] * w[0][col] + x[r * 2 + 1] * w[1][col] + 5; };
      EXPECT_FLOAT_EQ(got[r * 2 + c], y(c) * y(c + 2)) << r << ", " << c;
    }
}

TEST(PadDotColumnsNegative, AlignedColumnsUnalignedKAndWideDtypesAreNotPadded) {
  // 8 float32 columns (32-byte rows), K = 3 (rows of the weight unaligned), and a batched weight.
  for (const char* text : {R"(%0 : f32[2, 4] = parameter() {index = 0}
%1 : f32[4, 8] = constant() {value = <32 elements>}
%2 : f32[2, 8] = dot(%0, %1)
return %2
)",
                           R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[3, 5] = constant() {value = <15 elements>}
%2 : f32[2, 5] = dot(%0, %1)
return %2
)",
                           R"(%0 : f32[2, 2, 4] = parameter() {index = 0}
%1 : f32[2, 4, 5] = constant() {value = <40 elements>}
%2 : f32[2, 2, 5] = dot(%0, %1)
return %2
)"})
    EXPECT_EQ(result_text(pad_dot_columns(parsed(text), 4)), "unchanged") << text;
}

}  // namespace
}  // namespace tripy::flat

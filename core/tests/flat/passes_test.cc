// FlatIR passes, text in and text out: each test writes the input IR, runs one pass and compares
// the printed result.
#include <gtest/gtest.h>

#include "compiler/compile.h"  // the evaluator constant folding is given
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

std::string checked(const Graph& g) {
  Status st = verify(g);
  EXPECT_TRUE(st.ok()) << st.message();
  return g.str();
}

TEST(Dce, DropsUnusedOpsButKeepsParameters) {
  Graph g = parsed(R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = parameter() {index = 1}
%2 : f32[4] = exp(%0)
%3 : f32[4] = neg(%0)
return %3
)");
  EXPECT_EQ(checked(dce(g)), R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = parameter() {index = 1}
%2 : f32[4] = neg(%0)
return %2
)");
}

TEST(SinkElementwise, MovesAnOpToItsOneElementwiseReader) {
  // SwiGLU: silu(x @ W1) * (x @ W3). The silu moves past the second GEMM, next to the multiply;
  // the exp, read twice, and the neg, already next to its reader, stay.
  Graph g = parsed(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[8, 2] = parameter() {index = 1}
%2 : f32[8, 2] = parameter() {index = 2}
%3 : f32[4, 2] = dot(%0, %1)
%4 : f32[4, 2] = silu(%3)
%5 : f32[4, 2] = exp(%3)
%6 : f32[4, 2] = dot(%0, %2)
%7 : f32[4, 2] = neg(%6)
%8 : f32[4, 2] = mul(%4, %7)
%9 : f32[4, 2] = add(%8, %5)
%10 : f32[4, 2] = sub(%9, %5)
return %10
)");
  auto sunk = sink_elementwise(g);
  ASSERT_TRUE(sunk.has_value());
  EXPECT_EQ(checked(*sunk), R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[8, 2] = parameter() {index = 1}
%2 : f32[8, 2] = parameter() {index = 2}
%3 : f32[4, 2] = dot(%0, %1)
%4 : f32[4, 2] = exp(%3)
%5 : f32[4, 2] = dot(%0, %2)
%6 : f32[4, 2] = neg(%5)
%7 : f32[4, 2] = silu(%3)
%8 : f32[4, 2] = mul(%7, %6)
%9 : f32[4, 2] = add(%8, %4)
%10 : f32[4, 2] = sub(%9, %4)
return %10
)");
  EXPECT_FALSE(sink_elementwise(*sunk).has_value());  // nothing left to move
}

TEST(Cse, MergesEqualOpsAndCommutedOperands) {
  Graph g = parsed(R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = parameter() {index = 1}
%2 : f32[4] = add(%0, %1)
%3 : f32[4] = add(%1, %0)
%4 : f32[4] = sub(%0, %1)
%5 : f32[4] = sub(%1, %0)
%6 : f32[] = constant() {value = [2]}
%7 : f32[] = constant() {value = [2]}
%8 : f32[4] = broadcast(%6) {dims = []}
%9 : f32[4] = broadcast(%7) {dims = []}
%10 : f32[4] = mul(%2, %8)
%11 : f32[4] = mul(%3, %9)
return %10, %11, %4, %5
)");
  EXPECT_EQ(checked(cse(g)), R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = parameter() {index = 1}
%2 : f32[4] = add(%0, %1)
%3 : f32[4] = sub(%0, %1)
%4 : f32[4] = sub(%1, %0)
%5 : f32[] = constant() {value = [2]}
%6 : f32[4] = broadcast(%5) {dims = []}
%7 : f32[4] = mul(%2, %6)
return %7, %7, %3, %4
)");
}

TEST(Simplify, RemovesIdentities) {
  Graph g = parsed(R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[] = constant() {value = [1]}
%2 : f32[2, 3] = broadcast(%1) {dims = []}
%3 : f32[2, 3] = mul(%0, %2)
%4 : f32[] = constant() {value = [0]}
%5 : f32[2, 3] = broadcast(%4) {dims = []}
%6 : f32[2, 3] = add(%5, %3)
%7 : f32[2, 3] = convert(%6)
%8 : f32[2, 3] = reshape(%7)
%9 : f32[2, 3] = transpose(%8) {dims = [0, 1]}
%10 : f32[2, 3] = broadcast(%9) {dims = [0, 1]}
%11 : f32[2, 3] = slice(%10) {starts = [0, 0], limits = [2, 3], steps = [1, 1]}
%12 : f32[2, 3] = exp(%11)
return %12
)");
  EXPECT_EQ(checked(simplify(g)), R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[2, 3] = exp(%0)
return %1
)");
}

// GPT-2's causal mask sliced to a dynamic length T <= 1024: the bounds make its shape T's, the
// broadcast to max(T, min(T, 1024)) becomes an identity and the run-time check goes.
TEST(Simplify, SizesSimplifyUnderTheSymbolsBounds) {
  Graph g = parsed(R"(sym T [1, 512, 1024]
%0 : f32[T] = parameter() {index = 0}
%1 : f32[1024] = parameter() {index = 1}
%2 : f32[min(T, 1024)] = slice(%1) {starts = [0], limits = [min(T, 1024)], steps = [1]}
%3 : f32[max(T, min(T, 1024))] = broadcast(%2) {dims = [0]}
%4 : f32[max(T, min(T, 1024))] = add(%0, %3)
assert_broadcast(T, min(T, 1024)) "T and the mask"
return %4
)");
  EXPECT_EQ(checked(simplify(g)), R"(sym T [1, 512, 1024]
%0 : f32[T] = parameter() {index = 0}
%1 : f32[1024] = parameter() {index = 1}
%2 : f32[T] = slice(%1) {starts = [0], limits = [T], steps = [1]}
%3 : f32[T] = add(%0, %2)
return %3
)");
}

TEST(Simplify, ComposesTransposesReshapesAndBroadcasts) {
  Graph g = parsed(R"(%0 : f32[2, 3, 4] = parameter() {index = 0}
%1 : f32[3, 4, 2] = transpose(%0) {dims = [1, 2, 0]}
%2 : f32[4, 2, 3] = transpose(%1) {dims = [1, 2, 0]}
%3 : f32[2, 3, 4] = transpose(%2) {dims = [1, 2, 0]}
%4 : f32[6, 4] = reshape(%3)
%5 : f32[24] = reshape(%4)
%6 : f32[4] = parameter() {index = 1}
%7 : f32[3, 4] = broadcast(%6) {dims = [1]}
%8 : f32[2, 3, 4] = broadcast(%7) {dims = [1, 2]}
%9 : f32[4, 2, 3] = transpose(%1) {dims = [1, 2, 0]}
return %5, %8, %9
)");
  EXPECT_EQ(checked(simplify(g)), R"(%0 : f32[2, 3, 4] = parameter() {index = 0}
%1 : f32[24] = reshape(%0)
%2 : f32[4] = parameter() {index = 1}
%3 : f32[2, 3, 4] = broadcast(%2) {dims = [2]}
%4 : f32[4, 2, 3] = transpose(%0) {dims = [2, 0, 1]}
return %1, %3, %4
)");
}

TEST(Simplify, BroadcastReadsThroughUnitDimReshapes) {
  Graph g = parsed(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[4] = reduce_max(%0) {dims = [1]}
%2 : f32[4, 1] = reshape(%1)
%3 : f32[4, 8] = broadcast(%2) {dims = [0, 1]}
%4 : f32[4, 8] = sub(%0, %3)
return %4, %2
)");
  EXPECT_EQ(checked(simplify(g)), R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[4] = reduce_max(%0) {dims = [1]}
%2 : f32[4, 1] = reshape(%1)
%3 : f32[4, 8] = broadcast(%1) {dims = [0]}
%4 : f32[4, 8] = sub(%0, %3)
return %4, %2
)");
}

TEST(Simplify, KeepsOpsThatChangeSomething) {
  const char* text = R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[] = constant() {value = [2]}
%2 : f32[2, 3] = broadcast(%1) {dims = []}
%3 : f32[2, 3] = mul(%0, %2)
%4 : f16[2, 3] = convert(%3)
%5 : f16[3, 2] = transpose(%4) {dims = [1, 0]}
%6 : f16[3, 1] = slice(%5) {starts = [0, 1], limits = [3, 2], steps = [1, 1]}
return %6
)";
  EXPECT_EQ(checked(simplify(parsed(text))), text);
}

TEST(UnitTransposes, BecomeReshapesWhereOnlyUnitDimsMove) {
  // A token's head split on its way into a (B, H, S, D) cache, and one under a dynamic length
  // (T is not a static 1, but only a unit dim moves past it), become reshapes. Transposes that
  // move other dims stay, as does a swap of the last two dims (a dot reads it as a flag) even
  // of a unit dim.
  Graph g = parsed(R"(sym T [1, 8, 64]
%0 : f32[2, 1, 4, 8] = parameter() {index = 0}
%1 : f32[2, 4, 1, 8] = transpose(%0) {dims = [0, 2, 1, 3]}
%2 : f32[T, 1, 4] = parameter() {index = 1}
%3 : f32[1, T, 4] = transpose(%2) {dims = [1, 0, 2]}
%4 : f32[2, 3, 4] = parameter() {index = 2}
%5 : f32[3, 2, 4] = transpose(%4) {dims = [1, 0, 2]}
%6 : f32[4, 1] = parameter() {index = 3}
%7 : f32[1, 4] = transpose(%6) {dims = [1, 0]}
%8 : f32[T, 1, 4] = transpose(%3) {dims = [1, 0, 2]}
return %1, %3, %5, %7, %8
)");
  auto out = unit_transposes_to_reshapes(g);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(checked(*out), R"(sym T [1, 8, 64]
%0 : f32[2, 1, 4, 8] = parameter() {index = 0}
%1 : f32[2, 4, 1, 8] = reshape(%0)
%2 : f32[T, 1, 4] = parameter() {index = 1}
%3 : f32[1, T, 4] = reshape(%2)
%4 : f32[2, 3, 4] = parameter() {index = 2}
%5 : f32[3, 2, 4] = transpose(%4) {dims = [1, 0, 2]}
%6 : f32[4, 1] = parameter() {index = 3}
%7 : f32[1, 4] = transpose(%6) {dims = [1, 0]}
%8 : f32[T, 1, 4] = reshape(%3)
return %1, %3, %5, %7, %8
)");
  // Nothing to do: no graph.
  EXPECT_FALSE(unit_transposes_to_reshapes(parsed(R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[3, 2] = transpose(%0) {dims = [1, 0]}
return %1
)")).has_value());
}

TEST(CanonicalizeReductions, MovesReducedDimsLast) {
  Graph g = parsed(R"(%0 : f32[2, 3, 4] = parameter() {index = 0}
%1 : f32[3] = reduce_max(%0) {dims = [0, 2]}
%2 : f32[2, 3] = reduce_sum(%0) {dims = [2]}
return %1, %2
)");
  EXPECT_EQ(checked(canonicalize_reductions(g)), R"(%0 : f32[2, 3, 4] = parameter() {index = 0}
%1 : f32[3, 2, 4] = transpose(%0) {dims = [1, 0, 2]}
%2 : f32[3] = reduce_max(%1) {dims = [1, 2]}
%3 : f32[2, 3] = reduce_sum(%0) {dims = [2]}
return %2, %3
)");
}

TEST(ConstantFold, EvaluatesConstantSubgraphs) {
  Graph g = parsed(R"(%0 : f32[3] = parameter() {index = 0}
%1 : f32[3] = constant() {value = [1, 2, 3]}
%2 : f32[3] = constant() {value = [10, 20, 30]}
%3 : f32[3] = add(%1, %2)
%4 : f32[3] = neg(%3)
%5 : f32[3] = mul(%0, %4)
return %5
)");
  auto folded = constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), R"(%0 : f32[3] = parameter() {index = 0}
%1 : f32[3] = constant() {value = [-11, -22, -33]}
%2 : f32[3] = mul(%0, %1)
return %2
)");
}

// A reshape of a constant folds to a view of the same bytes (a quantized model's scales, reshaped
// for each product's groups, are not copied at compile time); a reshape of a broadcast evaluates.
TEST(ConstantFold, AReshapedConstantIsAViewOfItsBytes) {
  Graph g = parsed(R"(%0 : f32[2, 3] = constant() {value = [1, 2, 3, 4, 5, 6]}
%1 : f32[3, 2] = reshape(%0)
%2 : f32[2] = constant() {value = [7, 8]}
%3 : f32[2, 2] = broadcast(%2) {dims = [1]}
%4 : f32[4] = reshape(%3)
return %1, %4
)");
  auto folded = constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), R"(%0 : f32[3, 2] = constant() {value = [1, 2, 3, 4, 5, 6]}
%1 : f32[4] = constant() {value = [7, 8, 7, 8]}
return %0, %1
)");
  EXPECT_EQ(folded->def(folded->outputs[0]).constant.data(), g.ops[0].constant.data());
  EXPECT_EQ(folded->def(folded->outputs[0]).constant.shape(), (std::vector<int64_t>{3, 2}));
}

// x @ W.T of a constant W: the dot reads W transposed in place, so folding would only copy the
// weight at compile time (and keep both layouts). A transpose read otherwise still folds.
TEST(ConstantFold, KeepsTransposesThatDotsReadInPlace) {
  Graph g = parsed(R"(%0 : f32[4, 3] = parameter() {index = 0}
%1 : f32[2, 3] = constant() {value = [1, 2, 3, 4, 5, 6]}
%2 : f32[3, 2] = transpose(%1) {dims = [1, 0]}
%3 : f32[4, 2] = dot(%0, %2)
%4 : f32[3, 2] = transpose(%1) {dims = [1, 0]}
%5 : f32[3, 2] = neg(%4)
return %3, %5
)");
  auto folded = constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), R"(%0 : f32[4, 3] = parameter() {index = 0}
%1 : f32[2, 3] = constant() {value = [1, 2, 3, 4, 5, 6]}
%2 : f32[3, 2] = transpose(%1) {dims = [1, 0]}
%3 : f32[4, 2] = dot(%0, %2)
%4 : f32[3, 2] = constant() {value = [-1, -4, -2, -5, -3, -6]}
return %3, %4
)");
}

TEST(ConstantFold, KeepsSplatsAndLargeResults) {
  const char* text = R"(%0 : f32[] = constant() {value = [1]}
%1 : f32[4096, 4096] = broadcast(%0) {dims = []}
%2 : f32[4096] = constant() {value = <4096 elements>}
%3 : f32[4096, 4096] = broadcast(%2) {dims = [1]}
%4 : f32[4096, 4096] = add(%1, %3)
return %4
)";
  auto folded = constant_fold(parsed(text), evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), text);
}

TEST(ConstantFold, KeepsWideningConvertsOfLargeWeightsThatKernelsRead) {
  // LayerNorm's float16 weight applied in float32: folding would double its bytes.
  const char* text = R"(%0 : f32[4, 4096] = parameter() {index = 0}
%1 : f16[4096] = constant() {value = <4096 elements>}
%2 : f32[4096] = convert(%1)
%3 : f32[4, 4096] = broadcast(%2) {dims = [1]}
%4 : f32[4, 4096] = mul(%0, %3)
return %4
)";
  auto folded = constant_fold(parsed(text), evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), text);
  // A dot needs the converted bytes, so there the convert folds.
  auto for_dot = constant_fold(parsed(R"(%0 : f32[4, 4096] = parameter() {index = 0}
%1 : f16[4096, 2] = constant() {value = <8192 elements>}
%2 : f32[4096, 2] = convert(%1)
%3 : f32[4, 2] = dot(%0, %2)
return %3
)"), evaluate_constant_graph);
  ASSERT_TRUE(for_dot.ok()) << for_dot.status().message();
  EXPECT_EQ(checked(*for_dot).find("convert"), std::string::npos);
}

TEST(SplitDotSlices, ADotReadThroughColumnSlicesBecomesOneDotPerSlice) {
  Graph g = parsed(R"(sym n [1, 2, 8]
%0 : f32[n, 2] = parameter() {index = 0}
%1 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[4] = constant() {value = [10, 20, 30, 40]}
%3 : f32[n, 4] = dot(%0, %1)
%4 : f32[n, 4] = broadcast(%2) {dims = [1]}
%5 : f32[n, 4] = add(%4, %3)
%6 : f32[n, 2] = slice(%5) {starts = [0, 0], limits = [n, 2], steps = [1, 1]}
%7 : f32[n, 2] = slice(%5) {starts = [0, 2], limits = [n, 4], steps = [1, 1]}
%8 : f32[n, 2] = mul(%6, %7)
return %8
)");
  std::optional<Graph> split = split_dot_slices(g);
  ASSERT_TRUE(split.has_value());
  auto folded = constant_fold(*split, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(dce(*folded)), R"(sym n [1, 2, 8]
%0 : f32[n, 2] = parameter() {index = 0}
%1 : f32[2, 2] = constant() {value = [1, 2, 5, 6]}
%2 : f32[n, 2] = dot(%0, %1)
%3 : f32[2] = constant() {value = [10, 20]}
%4 : f32[n, 2] = broadcast(%3) {dims = [1]}
%5 : f32[n, 2] = add(%2, %4)
%6 : f32[2, 2] = constant() {value = [3, 4, 7, 8]}
%7 : f32[n, 2] = dot(%0, %6)
%8 : f32[2] = constant() {value = [30, 40]}
%9 : f32[n, 2] = broadcast(%8) {dims = [1]}
%10 : f32[n, 2] = add(%7, %9)
%11 : f32[n, 2] = mul(%5, %10)
return %11
)");
}

TEST(SplitDotSlices, LeavesDotsWithOtherReadersOrRuntimeWeights) {
  // The whole result is also returned.
  EXPECT_FALSE(split_dot_slices(parsed(R"(%0 : f32[3, 2] = parameter() {index = 0}
%1 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[3, 4] = dot(%0, %1)
%3 : f32[3, 2] = slice(%2) {starts = [0, 0], limits = [3, 2], steps = [1, 1]}
return %3, %2
)")).has_value());
  // The weight is an input: slicing it would copy it on every call.
  EXPECT_FALSE(split_dot_slices(parsed(R"(%0 : f32[3, 2] = parameter() {index = 0}
%1 : f32[2, 4] = parameter() {index = 1}
%2 : f32[3, 4] = dot(%0, %1)
%3 : f32[3, 2] = slice(%2) {starts = [0, 0], limits = [3, 2], steps = [1, 1]}
return %3
)")).has_value());
}

TEST(SplitDotSlices, LeavesOneRowProductsWhole) {
  // A decode step's one row x (1, C) @ W + b: one product reads x once; the slices read it in place.
  EXPECT_FALSE(split_dot_slices(parsed(R"(%0 : f32[1, 2] = parameter() {index = 0}
%1 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[1, 4] = dot(%0, %1)
%3 : f32[4] = constant() {value = [10, 20, 30, 40]}
%4 : f32[1, 4] = broadcast(%3) {dims = [1]}
%5 : f32[1, 4] = add(%2, %4)
%6 : f32[1, 2] = slice(%5) {starts = [0, 0], limits = [1, 2], steps = [1, 1]}
%7 : f32[1, 2] = slice(%5) {starts = [0, 2], limits = [1, 4], steps = [1, 1]}
%8 : f32[1, 2] = mul(%6, %7)
return %8
)")));
}

TEST(SplitDotSlices, LeavesProductsWithoutABiasWhole) {
  // SwiGLU's gate/up stack: its slices' readers take the one product in place, and a split would
  // copy the weight for nothing.
  EXPECT_FALSE(split_dot_slices(parsed(R"(sym n [1, 2, 8]
%0 : f32[n, 2] = parameter() {index = 0}
%1 : f32[2, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[n, 4] = dot(%0, %1)
%3 : f32[n, 2] = slice(%2) {starts = [0, 0], limits = [n, 2], steps = [1, 1]}
%4 : f32[n, 2] = slice(%2) {starts = [0, 2], limits = [n, 4], steps = [1, 1]}
%5 : f32[n, 2] = mul(%3, %4)
return %5
)")));
}

TEST(Simplify, UnitStepSlicesOfSlicesComposeIntoOneSlice) {
  Graph g = simplify(parsed(R"(sym n [1, 2, 8]
%0 : f32[n, 8, 4] = parameter() {index = 0}
%1 : f32[n, 6, 4] = slice(%0) {starts = [0, 0, 0], limits = [n, 6, 4], steps = [1, 1, 1]}
%2 : f32[n, 2, 2] = slice(%1) {starts = [0, 4, 2], limits = [n, 6, 4], steps = [1, 1, 1]}
%3 : f32[n, 4, 4] = slice(%0) {starts = [0, 0, 0], limits = [n, 8, 4], steps = [1, 2, 1]}
%4 : f32[n, 2, 4] = slice(%3) {starts = [0, 1, 0], limits = [n, 3, 4], steps = [1, 1, 1]}
return %2, %4
)"));
  EXPECT_EQ(checked(g), R"(sym n [1, 2, 8]
%0 : f32[n, 8, 4] = parameter() {index = 0}
%1 : f32[n, 2, 2] = slice(%0) {starts = [0, 4, 2], limits = [n, 6, 4], steps = [1, 1, 1]}
%2 : f32[n, 4, 4] = slice(%0) {starts = [0, 0, 0], limits = [n, 8, 4], steps = [1, 2, 1]}
%3 : f32[n, 2, 4] = slice(%2) {starts = [0, 1, 0], limits = [n, 3, 4], steps = [1, 1, 1]}
return %1, %3
)");
}

TEST(SinkUnitReshapes, ANormsRowChainRunsOnTheReducedValuesAndItsReshapeFoldsIntoTheBroadcast) {
  // mean(x * x, keepdim) + eps, rsqrt, times x: the add and rsqrt move above the keepdim reshape.
  std::optional<Graph> sunk = sink_unit_reshapes(parsed(R"(sym n [1, 2, 8]
%0 : f32[n, 4] = parameter() {index = 0}
%1 : f32[n, 4] = mul(%0, %0)
%2 : f32[n] = reduce_sum(%1) {dims = [1]}
%3 : f32[n, 1] = reshape(%2)
%4 : f32[] = constant() {value = [0.5]}
%5 : f32[n, 1] = broadcast(%4) {dims = []}
%6 : f32[n, 1] = add(%3, %5)
%7 : f32[n, 1] = rsqrt(%6)
%8 : f32[n, 4] = broadcast(%7) {dims = [0, 1]}
%9 : f32[n, 4] = mul(%0, %8)
return %9
)"));
  ASSERT_TRUE(sunk.has_value());
  EXPECT_EQ(checked(simplify(*sunk)), R"(sym n [1, 2, 8]
%0 : f32[n, 4] = parameter() {index = 0}
%1 : f32[n, 4] = mul(%0, %0)
%2 : f32[n] = reduce_sum(%1) {dims = [1]}
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[n] = broadcast(%3) {dims = []}
%5 : f32[n] = add(%2, %4)
%6 : f32[n] = rsqrt(%5)
%7 : f32[n, 4] = broadcast(%6) {dims = [0]}
%8 : f32[n, 4] = mul(%0, %7)
return %8
)");
}

TEST(SinkUnitReshapes, LeavesReshapesThatMoveElementsAndOperandsThatAreNotSplats) {
  EXPECT_FALSE(sink_unit_reshapes(parsed(R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[3, 2] = reshape(%0)
%2 : f32[3, 2] = exp(%1)
return %2
)")));
  EXPECT_FALSE(sink_unit_reshapes(parsed(R"(%0 : f32[3] = parameter() {index = 0}
%1 : f32[3, 1] = parameter() {index = 1}
%2 : f32[3, 1] = reshape(%0)
%3 : f32[3, 1] = add(%2, %1)
return %3
)")));
}

TEST(PadDotColumns, UnalignedRowsReadAPaddedWeightThroughASlice) {
  // x @ W.T with 5 float32 columns (rows of 20 bytes): W gains 3 zero rows, the dot 3 columns.
  Graph g = parsed(R"(%0 : f32[2, 4] = parameter() {index = 0}
%1 : f32[5, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}
%2 : f32[4, 5] = transpose(%1) {dims = [1, 0]}
%3 : f32[2, 5] = dot(%0, %2)
return %3
)");
  std::optional<Graph> padded = pad_dot_columns(g, 4);
  ASSERT_TRUE(padded.has_value());
  auto folded = constant_fold(*padded, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(dce(*folded)), R"(%0 : f32[2, 4] = parameter() {index = 0}
%1 : f32[8, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}
%2 : f32[4, 8] = transpose(%1) {dims = [1, 0]}
%3 : f32[2, 8] = dot(%0, %2)
%4 : f32[2, 5] = slice(%3) {starts = [0, 0], limits = [2, 5], steps = [1, 1]}
return %4
)");
  // Aligned rows, unaligned K, a runtime weight, or too few columns: unchanged.
  EXPECT_FALSE(pad_dot_columns(g).has_value());
  EXPECT_FALSE(pad_dot_columns(parsed(R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[3, 5] = parameter() {index = 1}
%2 : f32[2, 5] = dot(%0, %1)
return %2
)"), 4).has_value());
}

TEST(ConstantFold, FoldsReductionsOfSplats) {
  Graph g = parsed(R"(%0 : f32[] = constant() {value = [1]}
%1 : f32[4, 8] = broadcast(%0) {dims = []}
%2 : f32[4] = reduce_sum(%1) {dims = [1]}
return %2
)");
  auto folded = constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok()) << folded.status().message();
  EXPECT_EQ(checked(*folded), R"(%0 : f32[4] = constant() {value = [8, 8, 8, 8]}
return %0
)");
}

TEST(ConstantFold, FoldedConstantKeepsTheOrigin) {
  Graph g = parsed(R"(%0 : f32[2] = constant() {value = [1, 4]}
%1 : f32[2] = sqrt(%0)
return %1
)");
  auto origin = std::make_shared<Origin>();
  origin->trace_op = "sqrt";
  g.ops[1].origin = origin;
  auto folded = constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok());
  ASSERT_EQ(folded->ops.size(), 1u);
  EXPECT_EQ(folded->ops[0].origin, origin);
  EXPECT_EQ(folded->str(), "%0 : f32[2] = constant() {value = [1, 2]}\nreturn %0\n");
}

}  // namespace
}  // namespace tripy::flat

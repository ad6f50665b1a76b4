// match_attention and fold_attention_layouts where one firing condition fails: each graph below is
// the hand-written attention (or a repeated-heads read) with one thing changed, and the pass must
// leave it as it was, or match it only as far as the changed part allows. A positive control
// beside each family shows the unchanged form still fires, so no case passes by accident.
#include <gtest/gtest.h>

#include <string>

#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

// q @ k^T * 0.5, kept where the bool mask %30 holds (else -inf), softmax over keys, @ v; q, k and v
// (1, 2, 3, 4). `scale` defines %7 from the product %4, `mask` defines %30 (i1[1, 2, 3, 3]).
const char* kScale = R"(%5 : f32[] = constant() {value = [0.5]}
%6 : f32[1, 2, 3, 3] = broadcast(%5) {dims = []}
%7 : f32[1, 2, 3, 3] = mul(%4, %6)
)";
const char* kParamMask = R"(%20 : i1[1, 1, 3, 3] = parameter() {index = 3, name = "m"}
%30 : i1[1, 2, 3, 3] = broadcast(%20) {dims = [0, 1, 2, 3]}
)";

std::string attention(const std::string& scale = kScale, const std::string& mask = kParamMask,
                      const std::string& tail = "return %48\n") {
  return R"(%0 : f32[1, 2, 3, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 3, 4] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 3, 4] = parameter() {index = 2, name = "v"}
%3 : f32[1, 2, 4, 3] = transpose(%1) {dims = [0, 1, 3, 2]}
%4 : f32[1, 2, 3, 3] = dot(%0, %3)
)" + scale + mask +
         R"(%31 : f32[] = constant() {value = [-inf]}
%32 : f32[1, 2, 3, 3] = broadcast(%31) {dims = []}
%40 : f32[1, 2, 3, 3] = select(%30, %7, %32)
%41 : f32[1, 2, 3] = reduce_max(%40) {dims = [3]}
%42 : f32[1, 2, 3, 3] = broadcast(%41) {dims = [0, 1, 2]}
%43 : f32[1, 2, 3, 3] = sub(%40, %42)
%44 : f32[1, 2, 3, 3] = exp(%43)
%45 : f32[1, 2, 3] = reduce_sum(%44) {dims = [3]}
%46 : f32[1, 2, 3, 3] = broadcast(%45) {dims = [0, 1, 2]}
%47 : f32[1, 2, 3, 3] = div(%44, %46)
%48 : f32[1, 2, 3, 4] = dot(%47, %2)
)" + tail;
}

// The matched graph's text, or "unchanged".
std::string matched(const std::string& text) { return pass_on_text(text, match_attention); }

TEST(MatchAttentionNegative, TheControlMatches) {
  EXPECT_TRUE(has(matched(attention()), "attention(%0, %1, %2, %3) {scale = 0.5, mask = bool}")) << matched(attention());
}

TEST(MatchAttentionNegative, AScaleThatIsNotOneSplatValueOrDividesTheScoresIsLeft) {
  // One scale per head, a constant divided by the scores, a scale given at run time.
  EXPECT_EQ(matched(attention(R"(%5 : f32[1, 2, 1, 1] = constant() {value = [0.5, 0.25]}
%6 : f32[1, 2, 3, 3] = broadcast(%5) {dims = [0, 1, 2, 3]}
%7 : f32[1, 2, 3, 3] = mul(%4, %6)
)")),
            "unchanged");
  EXPECT_EQ(matched(replaced(attention(), "mul(%4, %6)", "div(%6, %4)")), "unchanged");
  EXPECT_EQ(matched(attention(R"(%5 : f32[] = parameter() {index = 4, name = "c"}
%6 : f32[1, 2, 3, 3] = broadcast(%5) {dims = []}
%7 : f32[1, 2, 3, 3] = mul(%4, %6)
)")),
            "unchanged");
}

TEST(MatchAttentionNegative, ASoftmaxThatIsNotOverTheKeysOfTheScoresIsLeft) {
  // The max over the query axis; the max of the unscaled product; the sum of other values.
  EXPECT_EQ(matched(replaced(replaced(attention(), "reduce_max(%40) {dims = [3]}", "reduce_max(%40) {dims = [2]}"),
                             "broadcast(%41) {dims = [0, 1, 2]}", "broadcast(%41) {dims = [0, 1, 3]}")),
            "unchanged");
  EXPECT_EQ(matched(replaced(attention(), "reduce_max(%40)", "reduce_max(%4)")), "unchanged");
  EXPECT_EQ(matched(replaced(attention(), "reduce_sum(%44)", "reduce_sum(%43)")), "unchanged");
  // exp(x - max) divided by the sum over the query axis.
  EXPECT_EQ(matched(replaced(replaced(attention(), "reduce_sum(%44) {dims = [3]}", "reduce_sum(%44) {dims = [2]}"),
                             "broadcast(%45) {dims = [0, 1, 2]}", "broadcast(%45) {dims = [0, 1, 3]}")),
            "unchanged");
}

TEST(MatchAttentionNegative, AnIntermediateWithASecondReaderIsLeft) {
  // The scaled scores, the masked scores, the exponentials and the probabilities each read again.
  for (const char* v : {"%7", "%40", "%44", "%47", "%4"}) {
    const std::string text = attention(kScale, kParamMask,
                                       std::string("%49 : f32[1, 2, 3, 3] = neg(") + v + ")\nreturn %48, %49\n");
    EXPECT_EQ(matched(text), "unchanged") << v;
  }
}

TEST(MatchAttentionNegative, MasksThatAreNotAttentionsAreLeft) {
  // Filled with +inf (or kept where the fill is): not a mask; an additive "mask" that is itself a
  // product of q and k: which operand the scores are is ambiguous.
  EXPECT_EQ(matched(replaced(attention(), "value = [-inf]", "value = [inf]")), "unchanged");
  EXPECT_EQ(matched(replaced(attention(), "select(%30, %7, %32)", "select(%30, %7, %7)")), "unchanged");
  EXPECT_EQ(matched(replaced(attention(kScale, "%30 : f32[1, 2, 3, 3] = dot(%0, %3)\n"), "select(%30, %7, %32)",
                             "add(%7, %30)")),
            "unchanged");
}

// A constant bool mask over the scores' last two dims: causal only when it is the whole lower
// triangle, not a row or a column of one stretched over the queries or the keys.
std::string constant_mask(const std::string& shape, const std::string& values) {
  return "%20 : i1[" + shape + "] = constant() {value = [" + values +
         "]}\n%30 : i1[1, 2, 3, 3] = broadcast(%20) {dims = [0, 1, 2, 3]}\n";
}

TEST(MatchAttentionNegative, AMaskRowOrColumnStretchedOverTheScoresIsNotTheCausalRule) {
  EXPECT_TRUE(has(matched(attention(kScale, constant_mask("1, 1, 3, 3", "1, 0, 0, 1, 1, 0, 1, 1, 1"))),
                  "attention(%0, %1, %2) {causal = true, scale = 0.5}"));
  // Every query sees key 0 only: the first row of a triangle, broadcast over the queries.
  const std::string row = matched(attention(kScale, constant_mask("1, 1, 1, 3", "1, 0, 0")));
  EXPECT_FALSE(has(row, "causal = true")) << row;
  EXPECT_TRUE(has(row, "mask = bool")) << row;
  // Every query sees every key: the first column of a triangle, broadcast over the keys; and one
  // true value broadcast over both.
  for (const std::string& shape : {"1, 1, 3, 1", "1, 1, 1, 1"}) {
    const std::string out = matched(attention(kScale, constant_mask(shape, shape == "1, 1, 1, 1" ? "1" : "1, 1, 1")));
    EXPECT_FALSE(has(out, "causal = true")) << shape << "\n" << out;
    EXPECT_TRUE(has(out, "mask = bool")) << shape << "\n" << out;
  }
}

// fold_attention_layouts on k and v repeated along the heads.
std::string layouts(const std::string& text) { return pass_on_text(text, layouts_folded); }

// q with 6 heads; k with 2 heads repeated 3 times along the heads, v with `v_heads` heads repeated
// 6 / v_heads times: head h of a repeat is head h / G of its source (dims [0, 1, 3, 4]).
std::string repeated(int v_heads = 2) {
  const std::string g = std::to_string(6 / v_heads), h = std::to_string(v_heads);
  return R"(%0 : f32[1, 6, 4, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 4, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, )" + h + R"(, 4, 8] = parameter() {index = 2, name = "v"}
%3 : f32[1, 2, 3, 4, 8] = broadcast(%1) {dims = [0, 1, 3, 4]}
%4 : f32[1, 6, 4, 8] = reshape(%3)
%5 : f32[1, )" + h + ", " + g + R"(, 4, 8] = broadcast(%2) {dims = [0, 1, 3, 4]}
%6 : f32[1, 6, 4, 8] = reshape(%5)
%7 : f32[1, 6, 4, 8] = attention(%0, %4, %6) {scale = 0.5}
return %7
)";
}

TEST(AttentionLayoutsNegative, OnlyARepeatOfEachKvHeadInTurnIsReadUnrepeated) {
  EXPECT_TRUE(has(layouts(repeated()), "attention(%0, %1, %2) {scale = 0.5}")) << layouts(repeated());
  // Tiled, 2 heads twice (head h is source head h % 2, not h / 2): the attention's grouping is not
  // that, though every size agrees with a repeat.
  EXPECT_EQ(layouts(R"(%0 : f32[1, 4, 4, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 4, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 4, 8] = parameter() {index = 2, name = "v"}
%3 : f32[1, 2, 2, 4, 8] = broadcast(%1) {dims = [0, 2, 3, 4]}
%4 : f32[1, 4, 4, 8] = reshape(%3)
%5 : f32[1, 2, 2, 4, 8] = broadcast(%2) {dims = [0, 2, 3, 4]}
%6 : f32[1, 4, 4, 8] = reshape(%5)
%7 : f32[1, 4, 4, 8] = attention(%0, %4, %6) {scale = 0.5}
return %7
)"),
            "unchanged");
  // k and v repeated by different factors: not one grouping for both.
  EXPECT_EQ(layouts(repeated(3)), "unchanged");
}

}  // namespace
}  // namespace tripy::flat

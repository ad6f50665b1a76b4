// The attention primitive in FlatIR: text round trip, the verifier's rules, the layout-folding
// pass (text in, text out), and end to end from Trace ops: one attention kernel, and a GPT-2 head
// split and merge that compile to no copy kernel at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/build_program.h"
#include "compiler/compile.h"
#include "flat/passes/passes.h"
#include "pass_text.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy {
namespace {

using trace::Attrs;
using trace::NodeRef;

const char* kHeadSplit = R"(sym T [1, 8, 64]
%0 : f16[2, T, 4, 16] = parameter() {index = 0, name = "q"}
%1 : f16[2, 4, T, 16] = transpose(%0) {dims = [0, 2, 1, 3]}
%2 : f16[2, T, 4, 16] = parameter() {index = 1, name = "k"}
%3 : f16[2, 4, T, 16] = transpose(%2) {dims = [0, 2, 1, 3]}
%4 : f16[2, 4, T, 16] = parameter() {index = 2, name = "v"}
%5 : f16[2, 4, T, 16] = attention(%1, %3, %4) {causal = true, scale = 0.25}
%6 : f16[2, T, 4, 16] = transpose(%5) {dims = [0, 2, 1, 3]}
%7 : f16[2, T, 64] = reshape(%6)
return %7
)";

TEST(AttentionIr, text_round_trips) {
  const char* text = R"(%0 : f32[1, 2, 3, 4] = parameter() {index = 0, name = "q"}
%1 : i1[1, 1, 3, 3] = parameter() {index = 1, name = "m"}
%2 : f32[1, 3, 2, 4] = attention(%0, %0, %0, %1) {scale = 0.5, mask = bool, perms = [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 2, 1, 3]]}
return %2
)";
  auto g = flat::parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->str(), text);
  EXPECT_TRUE(flat::verify(*g).ok()) << flat::verify(*g).message();
}

TEST(AttentionIr, a_causal_offset_is_one_int_element_without_causal) {
  auto message = [](const std::string& offset_type, const std::string& attrs) {
    auto g = flat::parse_graph("%0 : f32[1, 2, 3, 4] = parameter() {index = 0, name = \"q\"}\n%1 : " + offset_type +
                               " = parameter() {index = 1, name = \"pos\"}\n%2 : f32[1, 2, 3, 4] = attention(%0, %0, %0, %1) {" +
                               attrs + "}\nreturn %2\n");
    EXPECT_TRUE(g.ok()) << g.status().message();
    if (g.ok()) EXPECT_NE(g->str().find("{" + attrs + "}\n"), std::string::npos) << g->str();  // printed back
    return g.ok() ? flat::verify(*g).message() : "";
  };
  EXPECT_EQ(message("i32[1, 1, 1, 1]", "scale = 0.5, mask = causal_offset"), "");
  EXPECT_EQ(message("i64[1, 1, 1, 1]", "scale = 0.5, mask = causal_offset"), "");
  EXPECT_NE(message("f32[1, 1, 1, 1]", "scale = 0.5, mask = causal_offset").find("int32 or int64"), std::string::npos);
  EXPECT_NE(message("i32[1, 1, 1, 3]", "scale = 0.5, mask = causal_offset").find("shape (1, 1, 1, 1)"), std::string::npos);
  EXPECT_NE(message("i32[1, 1, 1, 1]", "causal = true, scale = 0.5, mask = causal_offset").find("exclude each other"),
            std::string::npos);
}

TEST(AttentionIr, verifier_rejects_inconsistent_operands) {
  const char* bad_mask = R"(%0 : f32[1, 2, 3, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 1, 3, 3] = parameter() {index = 1, name = "m"}
%2 : f32[1, 2, 3, 4] = attention(%0, %0, %0, %1) {scale = 0.5, mask = bool}
return %2
)";
  auto g = flat::parse_graph(bad_mask);
  ASSERT_TRUE(g.ok());
  EXPECT_NE(flat::verify(*g).message().find("mask's dtype"), std::string::npos) << flat::verify(*g).message();
  const char* bad_heads = R"(%0 : f32[1, 3, 5, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 5, 4] = parameter() {index = 1, name = "k"}
%2 : f32[1, 3, 5, 4] = attention(%0, %1, %1) {scale = 0.5}
return %2
)";
  g = flat::parse_graph(bad_heads);
  ASSERT_TRUE(g.ok());
  EXPECT_NE(flat::verify(*g).message().find("must divide q heads"), std::string::npos) << flat::verify(*g).message();
  const char* bad_perm = R"(%0 : f32[1, 3, 5, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 3, 5, 4] = attention(%0, %0, %0) {scale = 0.5, perms = [[0, 1, 2, 3], [0, 1, 1, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]}
return %1
)";
  g = flat::parse_graph(bad_perm);
  ASSERT_TRUE(g.ok());
  EXPECT_NE(flat::verify(*g).message().find("not a permutation"), std::string::npos) << flat::verify(*g).message();
}

// fold_attention_layouts over `text`: the verified result after DCE, or "unchanged".
std::string folded_str(const std::string& text) { return flat::pass_on_text(text, flat::layouts_folded); }

TEST(AttentionLayouts, transposes_become_operand_layouts) {
  auto g = flat::parse_graph(kHeadSplit);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto folded = flat::fold_attention_layouts(*g);
  ASSERT_TRUE(folded.has_value());
  ASSERT_TRUE(flat::verify(*folded).ok()) << flat::verify(*folded).message();
  EXPECT_EQ(flat::dce(*folded).str(), R"(sym T [1, 8, 64]
%0 : f16[2, T, 4, 16] = parameter() {index = 0, name = "q"}
%1 : f16[2, T, 4, 16] = parameter() {index = 1, name = "k"}
%2 : f16[2, 4, T, 16] = parameter() {index = 2, name = "v"}
%3 : f16[2, T, 4, 16] = attention(%0, %1, %2) {causal = true, scale = 0.25, perms = [[0, 2, 1, 3], [0, 2, 1, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 2, 1, 3]]}
%4 : f16[2, T, 64] = reshape(%3)
return %4
)");
  // Nothing to fold: no change reported.
  EXPECT_FALSE(flat::fold_attention_layouts(flat::dce(*folded)).has_value());
}

TEST(AttentionLayouts, a_result_read_elsewhere_keeps_its_transpose) {
  auto g = flat::parse_graph(R"(%0 : f32[1, 2, 3, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 3, 4] = attention(%0, %0, %0) {scale = 0.5}
%2 : f32[1, 3, 2, 4] = transpose(%1) {dims = [0, 2, 1, 3]}
return %2, %1
)");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(flat::fold_attention_layouts(*g).has_value());
}

TEST(AttentionLayouts, repeated_kv_heads_are_read_unrepeated) {
  // Llama's repeat_kv on k (directly broadcast) and v (through a reshape to one group, after its
  // head split): the attention reads both with 2 heads, v through its layout.
  const char* text = R"(sym T [1, 8, 64]
%0 : f16[2, 6, T, 16] = parameter() {index = 0, name = "q"}
%1 : f16[2, 2, T, 16] = parameter() {index = 1, name = "k"}
%2 : f16[2, 2, 3, T, 16] = broadcast(%1) {dims = [0, 1, 3, 4]}
%3 : f16[2, 6, T, 16] = reshape(%2)
%4 : f16[2, T, 2, 16] = parameter() {index = 2, name = "v"}
%5 : f16[2, 2, T, 16] = transpose(%4) {dims = [0, 2, 1, 3]}
%6 : f16[2, 2, 1, T, 16] = reshape(%5)
%7 : f16[2, 2, 3, T, 16] = broadcast(%6) {dims = [0, 1, 2, 3, 4]}
%8 : f16[2, 6, T, 16] = reshape(%7)
%9 : f16[2, 6, T, 16] = attention(%0, %3, %8) {causal = true, scale = 0.25}
return %9
)";
  EXPECT_EQ(folded_str(text), R"(sym T [1, 8, 64]
%0 : f16[2, 6, T, 16] = parameter() {index = 0, name = "q"}
%1 : f16[2, 2, T, 16] = parameter() {index = 1, name = "k"}
%2 : f16[2, T, 2, 16] = parameter() {index = 2, name = "v"}
%3 : f16[2, 6, T, 16] = attention(%0, %1, %2) {causal = true, scale = 0.25, perms = [[0, 1, 2, 3], [0, 1, 2, 3], [0, 2, 1, 3], [0, 1, 2, 3], [0, 1, 2, 3]]}
return %3
)");
  // One repeat read as both k and v (two readers), or k's repeat also an output: unchanged.
  std::string twice = text, shared = text;
  twice.replace(twice.find("attention(%0, %3, %8)"), 21, "attention(%0, %3, %3)");
  shared.replace(shared.find("return %9"), 9, "return %9, %3");
  EXPECT_EQ(folded_str(twice), "unchanged");
  EXPECT_EQ(folded_str(shared), "unchanged");
}

TEST(AttentionLayouts, head_splits_of_slices_become_head_windows) {
  // q, k, v = split(qkv, 3, 2), each reshaped to heads and transposed: windows of one projection.
  std::string text = "sym T [1, 8, 64]\n%0 : f16[2, T, 96] = parameter() {index = 0, name = \"qkv\"}\n";
  for (int i = 0; i < 3; ++i) {
    const std::string s = "%" + std::to_string(1 + 3 * i), r = "%" + std::to_string(2 + 3 * i),
                      t = "%" + std::to_string(3 + 3 * i);
    text += s + " : f16[2, T, 32] = slice(%0) {starts = [0, 0, " + std::to_string(32 * i) + "], limits = [2, T, " +
            std::to_string(32 * i + 32) + "], steps = [1, 1, 1]}\n";
    text += r + " : f16[2, T, 2, 16] = reshape(" + s + ")\n";
    text += t + " : f16[2, 2, T, 16] = transpose(" + r + ") {dims = [0, 2, 1, 3]}\n";
  }
  text += "%10 : f16[2, 2, T, 16] = attention(%3, %6, %9) {causal = true, scale = 0.25}\nreturn %10\n";
  auto g = flat::parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto folded = flat::fold_attention_layouts(*g);
  ASSERT_TRUE(folded.has_value());
  ASSERT_TRUE(flat::verify(*folded).ok()) << flat::verify(*folded).message();
  EXPECT_EQ(flat::dce(*folded).str(), R"(sym T [1, 8, 64]
%0 : f16[2, T, 96] = parameter() {index = 0, name = "qkv"}
%1 : f16[2, T, 6, 16] = reshape(%0)
%2 : f16[2, T, 6, 16] = reshape(%0)
%3 : f16[2, T, 6, 16] = reshape(%0)
%4 : f16[2, 2, T, 16] = attention(%1, %2, %3) {causal = true, scale = 0.25, perms = [[0, 2, 1, 3], [0, 2, 1, 3], [0, 2, 1, 3], [0, 1, 2, 3], [0, 1, 2, 3]], heads = [{count = 2}, {start = 2, count = 2}, {start = 4, count = 2}, {}, {}]}
return %4
)");
  // The text round-trips, and a window past its operand's heads is refused.
  auto again = flat::parse_graph(flat::dce(*folded).str());
  ASSERT_TRUE(again.ok()) << again.status().message();
  again->ops.back().attention.heads[rt::AttentionAttrs::kV] = {5, 2};
  EXPECT_NE(flat::verify(*again).message().find("head window"), std::string::npos) << flat::verify(*again).message();
  // A slice that does not start on a head boundary stays a slice.
  std::string odd = text;
  odd.replace(odd.find("starts = [0, 0, 32], limits = [2, T, 64]"), 41, "starts = [0, 0, 40], limits = [2, T, 72]");
  auto g2 = flat::parse_graph(odd);
  ASSERT_TRUE(g2.ok()) << g2.status().message();
  auto f2 = flat::fold_attention_layouts(*g2);
  ASSERT_TRUE(f2.has_value());
  EXPECT_EQ(f2->ops.back().attention.heads[rt::AttentionAttrs::kK].count, 0);
  EXPECT_EQ(f2->ops.back().attention.heads[rt::AttentionAttrs::kQ].count, 2);
}

TEST(AttentionLayouts, slices_of_the_heads_dim_become_head_windows) {
  // An LLM's q and k as heads [0, 4) and [4, 6) of one (B, T, heads, D) value, transposed.
  auto g = flat::parse_graph(R"(sym T [1, 8, 64]
%0 : f16[2, T, 6, 16] = parameter() {index = 0, name = "qk"}
%1 : f16[2, T, 4, 16] = slice(%0) {starts = [0, 0, 0, 0], limits = [2, T, 4, 16], steps = [1, 1, 1, 1]}
%2 : f16[2, 4, T, 16] = transpose(%1) {dims = [0, 2, 1, 3]}
%3 : f16[2, T, 2, 16] = slice(%0) {starts = [0, 0, 4, 0], limits = [2, T, 6, 16], steps = [1, 1, 1, 1]}
%4 : f16[2, 2, T, 16] = transpose(%3) {dims = [0, 2, 1, 3]}
%5 : f16[2, 4, T, 16] = attention(%2, %4, %4) {causal = true, scale = 0.25}
return %5
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto folded = flat::fold_attention_layouts(*g);
  ASSERT_TRUE(folded.has_value());
  ASSERT_TRUE(flat::verify(*folded).ok()) << flat::verify(*folded).message();
  const flat::Graph kept = flat::dce(*folded);
  const rt::AttentionAttrs& a = kept.ops.back().attention;
  EXPECT_EQ(a.heads[rt::AttentionAttrs::kQ], (rt::AttentionAttrs::HeadWindow{0, 4}));
  // k's slice is read twice (k and v): not private to one operand, so it stays a slice.
  EXPECT_EQ(a.heads[rt::AttentionAttrs::kK], rt::AttentionAttrs::HeadWindow{});
  EXPECT_EQ(std::count_if(kept.ops.begin(), kept.ops.end(), [](const flat::Op& op) { return op.kind == flat::OpKind::kSlice; }), 1);
}

// nanoGPT's attention after lowering: q @ k^T * 0.25, masked_fill(!m, -inf), softmax, @ v.
std::string hand_written(const std::string& fill = "-inf", bool probabilities_out = false) {
  return R"(%0 : f32[2, 4, 16, 8] = parameter() {index = 0, name = "q"}
%1 : f32[2, 4, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[2, 4, 16, 8] = parameter() {index = 2, name = "v"}
%3 : i1[1, 1, 16, 16] = parameter() {index = 3, name = "m"}
%4 : f32[2, 4, 8, 16] = transpose(%1) {dims = [0, 1, 3, 2]}
%5 : f32[2, 4, 16, 16] = dot(%0, %4)
%6 : f32[] = constant() {value = [0.25]}
%7 : f32[2, 4, 16, 16] = broadcast(%6) {dims = []}
%8 : f32[2, 4, 16, 16] = mul(%5, %7)
%9 : i1[2, 4, 16, 16] = broadcast(%3) {dims = [0, 1, 2, 3]}
%10 : f32[] = constant() {value = [)" + fill + R"(]}
%11 : f32[2, 4, 16, 16] = broadcast(%10) {dims = []}
%12 : f32[2, 4, 16, 16] = select(%9, %11, %8)
%13 : f32[2, 4, 16] = reduce_max(%12) {dims = [3]}
%14 : f32[2, 4, 16, 16] = broadcast(%13) {dims = [0, 1, 2]}
%15 : f32[2, 4, 16, 16] = sub(%12, %14)
%16 : f32[2, 4, 16, 16] = exp(%15)
%17 : f32[2, 4, 16] = reduce_sum(%16) {dims = [3]}
%18 : f32[2, 4, 16, 16] = broadcast(%17) {dims = [0, 1, 2]}
%19 : f32[2, 4, 16, 16] = div(%16, %18)
%20 : f32[2, 4, 16, 8] = dot(%19, %2)
return %20)" + std::string(probabilities_out ? ", %19" : "") + "\n";
}

TEST(MatchAttention, the_hand_written_form_becomes_one_op) {
  auto g = flat::parse_graph(hand_written());
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto matched = flat::match_attention(*g);
  ASSERT_TRUE(matched.has_value());
  ASSERT_TRUE(flat::verify(*matched).ok()) << flat::verify(*matched).message();
  // masked_fill(x, m, -inf) keeps where m is false: the attention's bool mask is not(m).
  EXPECT_EQ(matched->str(), R"(%0 : f32[2, 4, 16, 8] = parameter() {index = 0, name = "q"}
%1 : f32[2, 4, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[2, 4, 16, 8] = parameter() {index = 2, name = "v"}
%3 : i1[1, 1, 16, 16] = parameter() {index = 3, name = "m"}
%4 : i1[1, 1, 16, 16] = not(%3)
%5 : f32[2, 4, 16, 8] = attention(%0, %1, %2, %4) {scale = 0.25, mask = bool}
return %5
)");
}

TEST(MatchAttention, only_when_provably_the_same_computation) {
  // Filled with a finite value instead of -inf: not attention's masking.
  auto g = flat::parse_graph(hand_written("-1000000000"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE(flat::match_attention(*g).has_value());
  // The probabilities are also an output: they must exist, the pattern stays.
  g = flat::parse_graph(hand_written("-inf", true));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE(flat::match_attention(*g).has_value());
}

// nanoGPT's causal buffer: a constant lower triangle sliced to [:T, :T], masked_fill(bias == 0, -inf).
std::string causal_buffer(const std::string& values) {
  return R"(sym T [1, 2, 3]
%0 : f32[1, 2, T, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 1, 3, 3] = constant() {value = [)" + values + R"(]}
%2 : f32[1, 1, T, T] = slice(%1) {starts = [0, 0, 0, 0], limits = [1, 1, T, T], steps = [1, 1, 1, 1]}
%3 : f32[] = constant() {value = [0]}
%4 : f32[1, 1, T, T] = broadcast(%3) {dims = []}
%5 : i1[1, 1, T, T] = eq(%2, %4)
%6 : i1[1, 2, T, T] = broadcast(%5) {dims = [0, 1, 2, 3]}
%7 : f32[1, 2, 4, T] = transpose(%0) {dims = [0, 1, 3, 2]}
%8 : f32[1, 2, T, T] = dot(%0, %7)
%9 : f32[] = constant() {value = [-inf]}
%10 : f32[1, 2, T, T] = broadcast(%9) {dims = []}
%11 : f32[1, 2, T, T] = select(%6, %10, %8)
%12 : f32[1, 2, T] = reduce_max(%11) {dims = [3]}
%13 : f32[1, 2, T, T] = broadcast(%12) {dims = [0, 1, 2]}
%14 : f32[1, 2, T, T] = sub(%11, %13)
%15 : f32[1, 2, T, T] = exp(%14)
%16 : f32[1, 2, T] = reduce_sum(%15) {dims = [3]}
%17 : f32[1, 2, T, T] = broadcast(%16) {dims = [0, 1, 2]}
%18 : f32[1, 2, T, T] = div(%15, %17)
%19 : f32[1, 2, T, 4] = dot(%18, %0)
return %19
)";
}

TEST(MatchAttention, a_constant_lower_triangle_is_the_causal_rule) {
  auto g = flat::parse_graph(causal_buffer("1, 0, 0, 1, 1, 0, 1, 1, 1"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto matched = flat::match_attention(*g);
  ASSERT_TRUE(matched.has_value());
  EXPECT_EQ(matched->str(), R"(sym T [1, 2, 3]
%0 : f32[1, 2, T, 4] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, T, 4] = attention(%0, %0, %0) {causal = true}
return %1
)");
  // Any other pattern stays a mask the kernel reads.
  g = flat::parse_graph(causal_buffer("1, 1, 0, 1, 1, 0, 1, 1, 1"));
  ASSERT_TRUE(g.ok());
  matched = flat::match_attention(*g);
  ASSERT_TRUE(matched.has_value());
  EXPECT_NE(matched->str().find("mask = bool"), std::string::npos) << matched->str();
}

TEST(MatchAttention, float16_scores_with_a_float32_softmax) {
  auto g = flat::parse_graph(R"(%0 : f16[1, 2, 8, 4] = parameter() {index = 0, name = "q"}
%1 : f16[1, 2, 8, 4] = parameter() {index = 1, name = "k"}
%2 : f16[1, 2, 4, 8] = transpose(%1) {dims = [0, 1, 3, 2]}
%3 : f16[1, 2, 8, 8] = dot(%0, %2)
%4 : f16[] = constant() {value = [2]}
%5 : f16[1, 2, 8, 8] = broadcast(%4) {dims = []}
%6 : f16[1, 2, 8, 8] = div(%3, %5)
%7 : f32[1, 2, 8, 8] = convert(%6)
%8 : f32[1, 2, 8] = reduce_max(%7) {dims = [3]}
%9 : f32[1, 2, 8, 8] = broadcast(%8) {dims = [0, 1, 2]}
%10 : f32[1, 2, 8, 8] = sub(%7, %9)
%11 : f32[1, 2, 8, 8] = exp(%10)
%12 : f32[1, 2, 8] = reduce_sum(%11) {dims = [3]}
%13 : f32[1, 2, 8, 8] = broadcast(%12) {dims = [0, 1, 2]}
%14 : f32[1, 2, 8, 8] = div(%11, %13)
%15 : f16[1, 2, 8, 8] = convert(%14)
%16 : f16[1, 2, 8, 4] = dot(%15, %0)
return %16
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto matched = flat::match_attention(*g);
  ASSERT_TRUE(matched.has_value());
  EXPECT_EQ(matched->str(), R"(%0 : f16[1, 2, 8, 4] = parameter() {index = 0, name = "q"}
%1 : f16[1, 2, 8, 4] = parameter() {index = 1, name = "k"}
%2 : f16[1, 2, 8, 4] = attention(%0, %1, %0) {scale = 0.5}
return %2
)");
}

// A KV-cache step: q (1, 2, L, 8) over a cache of 16 keys, the position %3 (i32[1] unless `pos`
// says otherwise), and the bool mask `mask` computes from %4 on, its last value %m (L x 16, then
// viewed as (1, 1, L, 16) unless it is rank 4 already).
std::string cache_step(const std::string& L, const std::string& mask, int m, const std::string& pos = "i32[1]") {
  std::string text = (L == "T" ? "sym T [1, 4, 8]\n" : "") + std::string("%0 : f32[1, 2, ") + L +
                     R"(, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 16, 8] = parameter() {index = 2, name = "v"}
%3 : )" + pos + R"( = parameter() {index = 3, name = "pos"}
)" + mask;
  const std::string mv = "%" + std::to_string(m), out = "%" + std::to_string(m + 2);
  const size_t type = mask.find(mv + " : i1[") + mv.size() + 6;
  if (std::count(mask.begin() + type, mask.begin() + mask.find(']', type), ',') != 3) {
    text += "%" + std::to_string(m + 1) + " : i1[1, 1, " + L + ", 16] = reshape(" + mv + ")\n";
  } else {
    text += "%" + std::to_string(m + 1) + " : i1[1, 2, " + L + ", 16] = broadcast(" + mv + ") {dims = [0, 1, 2, 3]}\n";
  }
  return text + out + " : f32[1, 2, " + L + ", 8] = attention(%0, %1, %2, %" + std::to_string(m + 1) +
         ") {scale = 0.5, mask = bool}\nreturn " + out + "\n";
}

// examples/gpt2.py's mask: iota(dim=1) <= iota(dim=0) + pos.
const char* kGpt2Mask = R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i32[4, 16] = iota() {dims = [0]}
%6 : i32[4, 16] = broadcast(%3) {dims = [1]}
%7 : i32[4, 16] = add(%5, %6)
%8 : i1[4, 16] = le(%4, %7)
)";

std::string offset_matched(const std::string& text) { return flat::pass_on_text(text, flat::match_attention); }

TEST(MatchAttention, a_kv_cache_mask_becomes_a_causal_offset) {
  const char* head = R"(%0 : f32[1, 2, 4, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 16, 8] = parameter() {index = 2, name = "v"}
%3 : i32[1] = parameter() {index = 3, name = "pos"}
)";
  EXPECT_EQ(offset_matched(cache_step("4", kGpt2Mask, 8)), std::string(head) + R"(%4 : i32[1, 1, 1, 1] = reshape(%3)
%5 : f32[1, 2, 4, 8] = attention(%0, %1, %2, %4) {scale = 0.5, mask = causal_offset}
return %5
)");
  // The comparison the other way round, or its negation; the mask broadcast over the heads.
  std::string swapped = kGpt2Mask;
  swapped.replace(swapped.find("le(%4, %7)"), 10, "ge(%7, %4)");
  EXPECT_NE(offset_matched(cache_step("4", swapped, 8)).find("mask = causal_offset"), std::string::npos);
  const std::string negated = std::string(kGpt2Mask).replace(std::string(kGpt2Mask).find("%8 : i1[4, 16] = le(%4, %7)"), 27,
                                                             "%8 : i1[4, 16] = gt(%4, %7)\n%9 : i1[4, 16] = not(%8)");
  EXPECT_NE(offset_matched(cache_step("4", negated, 9)).find("mask = causal_offset"), std::string::npos);
  const std::string per_head = std::string(kGpt2Mask) + R"(%9 : i1[1, 1, 4, 16] = reshape(%8)
%10 : i1[1, 2, 4, 16] = broadcast(%9) {dims = [0, 1, 2, 3]}
)";
  EXPECT_NE(offset_matched(cache_step("4", per_head, 10)).find("mask = causal_offset"), std::string::npos);
}

TEST(MatchAttention, causal_offset_forms_that_lowering_and_folding_leave) {
  // One query row (a decode step, docs/decoding.md): no query iota, the position alone.
  EXPECT_EQ(offset_matched(cache_step("1", R"(%4 : i32[1, 16] = iota() {dims = [1]}
%5 : i32[1, 16] = broadcast(%3) {dims = [1]}
%6 : i1[1, 16] = le(%4, %5)
)", 6)), R"(%0 : f32[1, 2, 1, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 16, 8] = parameter() {index = 2, name = "v"}
%3 : i32[1] = parameter() {index = 3, name = "pos"}
%4 : i32[1, 1, 1, 1] = reshape(%3)
%5 : f32[1, 2, 1, 8] = attention(%0, %1, %2, %4) {scale = 0.5, mask = causal_offset}
return %5
)");
  // A dynamic number of queries (a prefill), the query iota rank 1 and broadcast.
  EXPECT_NE(offset_matched(cache_step("T", R"(%4 : i32[T, 16] = iota() {dims = [1]}
%5 : i32[T] = iota() {dims = [0]}
%6 : i32[T, 16] = broadcast(%5) {dims = [0]}
%7 : i32[T, 16] = broadcast(%3) {dims = [1]}
%8 : i32[T, 16] = add(%6, %7)
%9 : i1[T, 16] = le(%4, %8)
)", 9)).find("mask = causal_offset"), std::string::npos);
  // A constant query iota (folded), an int64 position plus a constant: the offset is pos + 2.
  EXPECT_EQ(offset_matched(cache_step("2", R"(%4 : i64[2, 16] = iota() {dims = [1]}
%5 : i64[2, 1] = constant() {value = [0, 1]}
%6 : i64[2, 16] = broadcast(%5) {dims = [0, 1]}
%7 : i64[2, 16] = broadcast(%3) {dims = [1]}
%8 : i64[] = constant() {value = [2]}
%9 : i64[2, 16] = broadcast(%8) {dims = []}
%10 : i64[2, 16] = add(%7, %9)
%11 : i64[2, 16] = add(%6, %10)
%12 : i1[2, 16] = le(%4, %11)
)", 12, "i64[1]")), R"(%0 : f32[1, 2, 2, 8] = parameter() {index = 0, name = "q"}
%1 : f32[1, 2, 16, 8] = parameter() {index = 1, name = "k"}
%2 : f32[1, 2, 16, 8] = parameter() {index = 2, name = "v"}
%3 : i64[1] = parameter() {index = 3, name = "pos"}
%4 : i64[1, 1, 1, 1] = reshape(%3)
%5 : i64[1, 1, 1, 1] = constant() {value = [2]}
%6 : i64[1, 1, 1, 1] = add(%4, %5)
%7 : f32[1, 2, 2, 8] = attention(%0, %1, %2, %6) {scale = 0.5, mask = causal_offset}
return %7
)");
  // No position: s <= l is the causal rule, s <= l - 1 a constant offset.
  const char* no_position = R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i32[4, 16] = iota() {dims = [0]}
%6 : i1[4, 16] = le(%4, %5)
)";
  EXPECT_NE(offset_matched(cache_step("4", no_position, 6)).find("{causal = true, scale = 0.5}"), std::string::npos);
  EXPECT_NE(offset_matched(cache_step("4", R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i32[4, 16] = iota() {dims = [0]}
%6 : i32[] = constant() {value = [1]}
%7 : i32[4, 16] = broadcast(%6) {dims = []}
%8 : i32[4, 16] = sub(%5, %7)
%9 : i1[4, 16] = le(%4, %8)
)", 9)).find("i32[1, 1, 1, 1] = constant() {value = [-1]}"), std::string::npos);
  // An int32 position widened to an int64 mask: converted once, as one element.
  EXPECT_NE(offset_matched(cache_step("4", R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i64[4, 16] = convert(%4)
%6 : i32[4, 16] = iota() {dims = [0]}
%7 : i64[4, 16] = convert(%6)
%8 : i64[1] = convert(%3)
%9 : i64[4, 16] = broadcast(%8) {dims = [1]}
%10 : i64[4, 16] = add(%7, %9)
%11 : i1[4, 16] = le(%5, %10)
)", 11)).find("mask = causal_offset"), std::string::npos);
}

TEST(MatchAttention, a_mask_not_provably_a_causal_offset_stays_a_mask) {
  auto unchanged = [](const std::string& mask, int m, const std::string& L = "4") {
    EXPECT_EQ(offset_matched(cache_step(L, mask, m)), "unchanged") << mask;
  };
  auto gpt2_with = [](const std::string& from, const std::string& to) {
    std::string t = kGpt2Mask;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  unchanged(gpt2_with("le(%4, %7)", "lt(%4, %7)"), 8);                      // s < l + pos
  unchanged(gpt2_with("le(%4, %7)", "le(%7, %4)"), 8);                      // keys past the position
  unchanged(gpt2_with("add(%5, %6)", "add(%4, %6)"), 8);                    // the key index on both sides
  unchanged(gpt2_with("%5 : i32[4, 16] = iota() {dims = [0]}", "%5 : i32[4, 16] = iota() {dims = [1]}"), 8);
  unchanged(gpt2_with("add(%5, %6)", "sub(%6, %5)"), 8);                    // pos - l
  unchanged(gpt2_with("add(%5, %6)", "mul(%5, %6)"), 8);                    // not a sum
  // A position per query row (a vector, not one value).
  EXPECT_EQ(offset_matched(cache_step("4", R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i32[4, 16] = broadcast(%3) {dims = [0]}
%6 : i1[4, 16] = le(%4, %5)
)", 6, "i32[4]")), "unchanged");
  // Several query rows that all see keys <= pos: not "l + pos" for l > 0.
  unchanged(R"(%4 : i32[4, 16] = iota() {dims = [1]}
%5 : i32[4, 16] = broadcast(%3) {dims = [1]}
%6 : i1[4, 16] = le(%4, %5)
)", 6);
  // The mask also hides something else.
  unchanged(std::string(kGpt2Mask) + R"(%9 : i1[4, 16] = parameter() {index = 4, name = "pad"}
%10 : i1[4, 16] = and(%8, %9)
)", 10);
  // Float indices.
  unchanged(R"(%4 : f32[4, 16] = iota() {dims = [1]}
%5 : f32[4, 16] = iota() {dims = [0]}
%6 : i1[4, 16] = le(%4, %5)
)", 6);
}

NodeRef input(int index, Shape shape, DType dt, const std::shared_ptr<SymbolTable>& symbols) {
  return trace::make_input_node(index, "x" + std::to_string(index), dt, std::move(shape), Device{}, symbols, nullptr);
}

NodeRef op(const std::string& name, std::vector<NodeRef> in, Attrs a = {}) {
  auto n = trace::make_node(name, std::move(in), std::move(a), nullptr);
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? n.value() : nullptr;
}

// GPT-2's attention as users write it with tp ops: split heads by reshape + transpose(1, 2),
// attend causally, merge back by transpose(1, 2) + reshape.
TEST(AttentionCompile, gpt2_head_split_and_merge_run_no_copy_kernel) {
  auto symbols = std::make_shared<SymbolTable>();
  const Dim T = Dim::symbol(symbols->add("T", 1, 16, 64));
  std::vector<NodeRef> ins, heads;
  for (int i = 0; i < 3; ++i) {
    ins.push_back(input(i, {Dim(2), T, Dim(64)}, DType::kFloat16, symbols));
    Attrs r;
    r.shape = {Dim(2), T, Dim(4), Dim(16)};
    Attrs t;
    t.dims = {0, 2, 1, 3};
    heads.push_back(op("permute", {op("reshape", {ins.back()}, r)}, t));
  }
  Attrs a;
  a.scale = 0.25;
  a.causal = true;
  NodeRef y = op("scaled_dot_product_attention", heads, a);
  Attrs t;
  t.dims = {0, 2, 1, 3};
  Attrs r;
  r.shape = {Dim(2), T, Dim(64)};
  NodeRef out = op("reshape", {op("permute", {y}, t)}, r);
  auto lowered = trace::lower_to_flat({out}, trace::LowerMode::kCompile, ins);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  flat::Graph g = lowered->graph;
  auto folded = flat::constant_fold(g, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok());
  g = flat::cse(flat::simplify(*folded));
  if (auto f = flat::fold_attention_layouts(g)) g = *f;
  auto program = compiler::build_program(flat::dce(g));
  ASSERT_TRUE(program.ok()) << program.status().message();
  std::vector<rt::KernelKind> kinds;
  for (const rt::Kernel& k : program->kernels) kinds.push_back(k.kind);
  EXPECT_EQ(kinds, std::vector<rt::KernelKind>{rt::KernelKind::kAttention}) << compiler::program_str(*program);
}

TEST(AttentionCompile, runs_on_the_cpu_from_trace_ops) {
  auto symbols = std::make_shared<SymbolTable>();
  const Dim L = Dim::symbol(symbols->add("L", 1, 3, 8));
  NodeRef q = input(0, {Dim(1), Dim(2), L, Dim(4)}, DType::kFloat32, symbols);
  NodeRef kv = input(1, {Dim(1), Dim(1), Dim(6), Dim(4)}, DType::kFloat32, symbols);
  Attrs a;
  a.scale = 0.5;
  a.causal = true;
  NodeRef y = op("scaled_dot_product_attention", {q, kv, kv}, a);
  auto lowered = trace::lower_to_flat({y}, trace::LowerMode::kCompile, {q, kv});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  auto exe = compile_graph(lowered->graph, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  Tensor qt = Tensor::empty_host(DType::kFloat32, {1, 2, 3, 4}), kt = Tensor::empty_host(DType::kFloat32, {1, 1, 6, 4});
  for (int64_t i = 0; i < qt.numel(); ++i) static_cast<float*>(qt.data())[i] = std::sin(0.3f * i);
  for (int64_t i = 0; i < kt.numel(); ++i) static_cast<float*>(kt.data())[i] = std::cos(0.7f * i);
  auto out = exe->run({qt, kt});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float* Q = static_cast<const float*>(qt.data());
  const float* K = static_cast<const float*>(kt.data());
  const float* O = static_cast<const float*>((*out)[0].data());
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      double s[6], mx = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        s[j] = 0;
        for (int d = 0; d < 4; ++d) s[j] += 0.5 * Q[(h * 3 + i) * 4 + d] * K[j * 4 + d];
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int d = 0; d < 4; ++d) {
        double want = 0;
        for (int j = 0; j <= i; ++j) want += s[j] / sum * K[j * 4 + d];
        EXPECT_NEAR(O[(h * 3 + i) * 4 + d], want, 1e-5);
      }
    }
}

}  // namespace
}  // namespace tripy

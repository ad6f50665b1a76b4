// Pooling in FlatIR: the text form round-trips its attributes, the verifier checks the result
// shape (symbolic spatial sizes included), and fusion gives it a kernel of its own.
#include <gtest/gtest.h>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

TEST(PoolingIr, TextRoundTripsAndDynamicSpatialSizesAreSymbolic) {
  const char* text = R"(sym h [3, 8, 16]
%0 : f32[2, 4, h, 6] = parameter() {index = 0}
%1 : f32[2, 4, (((h - 1) // 2) + 1), 3] = pooling(%0) {window = [3, 3], stride = [2, 2], pad_before = [1, 1], pad_after = [1, 1]}
%2 : f32[2, 4, (((h - 1) // 2) + 1), 2] = pooling(%1) {kind = avg, window = [1, 2], stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], count_include_pad = false}
return %2
)";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok()) << verify(*g).message();
  EXPECT_EQ(g->str(), text);
  auto plan = plan_fusion(*g);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(fusion_plan_str(*g, *plan),
            "%1 = pooling(%0) {window = [3, 3], stride = [2, 2], pad_before = [1, 1], pad_after = [1, 1]}\n"
            "%2 = pooling(%1) {kind = avg, window = [1, 2], stride = [1, 1], pad_before = [0, 0], pad_after = [0, 0], "
            "count_include_pad = false}\n");
}

TEST(PoolingIr, VerifierRejectsAWrongResultShape) {
  const std::string error = verify_error(R"(%0 : f32[1, 2, 5, 5] = parameter() {index = 0}
%1 : f32[1, 2, 3, 3] = pooling(%0) {window = [2, 2], stride = [2, 2], pad_before = [0, 0], pad_after = [0, 0]}
return %1
)");
  EXPECT_TRUE(has(error, "expected (1, 2, 2, 2)")) << error;
}

TEST(PoolingIr, VerifierRejectsAttributesOutOfRange) {
  const std::string error = verify_error(R"(%0 : f32[1, 2, 5, 5] = parameter() {index = 0}
%1 : f32[1, 2, 3, 3] = pooling(%0) {window = [2, 2], stride = [2, 2], pad_before = [0, 0], pad_after = [0, 9223372036854775807]}
return %1
)");
  EXPECT_TRUE(has(error, "out of range")) << error;
}

}  // namespace
}  // namespace tripy::flat

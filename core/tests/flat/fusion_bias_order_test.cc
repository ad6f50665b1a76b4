// A bias constant that lowering emitted after its dot (the usual order for `x @ w + b`) still
// folds into the dot's epilogue: constants exist before any kernel runs.
#include <gtest/gtest.h>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"

namespace tripy::flat {
namespace {

TEST(Fusion, ConstantBiasAfterTheDotFoldsIntoIt) {
  auto g = parse_graph(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 8] = constant() {value = <128 elements>}
%2 : f32[4, 8] = dot(%0, %1)
%3 : f32[8] = constant() {value = [0, 1, 2, 3, 4, 5, 6, 7]}
%4 : f32[4, 8] = broadcast(%3) {dims = [1]}
%5 : f32[4, 8] = add(%2, %4)
return %5
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto plan = plan_fusion(*g);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(fusion_plan_str(*g, *plan), "%5 = dot(%0, %1, %3) {bias}\n");
}

TEST(Fusion, ComputedBiasAfterTheDotStaysOut) {
  auto g = parse_graph(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 8] = constant() {value = <128 elements>}
%2 : f32[8] = parameter() {index = 1}
%3 : f32[4, 8] = dot(%0, %1)
%4 : f32[8] = exp(%2)
%5 : f32[4, 8] = broadcast(%4) {dims = [1]}
%6 : f32[4, 8] = add(%3, %5)
return %6
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto plan = plan_fusion(*g);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(fusion_plan_str(*g, *plan).find("{bias}"), std::string::npos) << fusion_plan_str(*g, *plan);
}

}  // namespace
}  // namespace tripy::flat

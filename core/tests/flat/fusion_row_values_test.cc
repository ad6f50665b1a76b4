// Fused kernels whose element values come only from constants and row results (softmax of
// tp.ones, a reduction's result broadcast back): each compiles to a valid program and runs on the
// CPU to the right values, statically and with a dynamic row count.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/compile.h"
#include "../compiler/compile_text.h"
#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"

namespace tripy {
namespace {

using testing::compile_text;
using testing::host;
using testing::values;

std::string plan_of(const std::string& text) {
  auto g = flat::parse_graph(text);
  if (!g.ok()) return "parse error: " + g.status().message();
  auto plan = flat::plan_fusion(*g);
  if (!plan.ok()) return "fusion error: " + plan.status().message();
  return flat::fusion_plan_str(*g, *plan);
}

// softmax(broadcast(c)) over rows of `rows`: the graph lowering gives for tp.softmax(tp.full(...)).
std::string softmax_of_constant(const std::string& rows, const std::string& c) {
  const std::string sym = rows == "n" ? "sym n [1, 2, 8]\n" : "";
  return sym + "%0 : f32[" + rows + ", 3] = parameter() {index = 0, name = \"x\"}\n" +
         "%1 : f32[] = constant() {value = [" + c + "]}\n" + "%2 : f32[" + rows +
         ", 3] = broadcast(%1) {dims = []}\n" + "%3 : f32[" + rows + "] = reduce_max(%2) {dims = [1]}\n" +
         "%4 : f32[" + rows + ", 3] = broadcast(%3) {dims = [0]}\n" + "%5 : f32[" + rows +
         ", 3] = sub(%2, %4)\n" + "%6 : f32[" + rows + ", 3] = exp(%5)\n" + "%7 : f32[" + rows +
         "] = reduce_sum(%6) {dims = [1]}\n" + "%8 : f32[" + rows + ", 3] = broadcast(%7) {dims = [0]}\n" +
         "%9 : f32[" + rows + ", 3] = div(%6, %8)\nreturn %9\n";
}

TEST(FusionRowValues, ElementOpReadingOnlyARowResultStartsAKernelThatLoadsIt) {
  // sub(c, max) varies only per row in the first kernel, which can store such a value only into a
  // row output: the second kernel loads the max back along the rows.
  EXPECT_EQ(plan_of(softmax_of_constant("n", "0")),
            "%3 = fused() {domain = (n, 3), reduce_from = 1, ops = 1}\n"
            "%9 = fused(%3) {domain = (n, 3), reduce_from = 1, ops = 4}\n");
}

TEST(FusionRowValues, SoftmaxOfAConstantRunsWithStaticAndDynamicRows) {
  for (const char* rows : {"2", "n"}) {
    SCOPED_TRACE(rows);
    auto exe = compile_text(softmax_of_constant(rows, "1"));
    ASSERT_TRUE(exe.ok()) << format_error(exe.status());
    auto out = exe->run({host({2, 3}, {0, 0, 0, 0, 0, 0})});
    ASSERT_TRUE(out.ok()) << format_error(out.status());
    for (float v : values((*out)[0])) EXPECT_NEAR(v, 1.0f / 3, 1e-6);
  }
}

TEST(FusionRowValues, LogSoftmaxOfAConstantRuns) {
  auto exe = compile_text(R"(%0 : f32[] = constant() {value = [2]}
%1 : f32[2, 4] = broadcast(%0) {dims = []}
%2 : f32[2] = reduce_max(%1) {dims = [1]}
%3 : f32[2, 4] = broadcast(%2) {dims = [0]}
%4 : f32[2, 4] = sub(%1, %3)
%5 : f32[2, 4] = exp(%4)
%6 : f32[2] = reduce_sum(%5) {dims = [1]}
%7 : f32[2] = log(%6)
%8 : f32[2, 4] = broadcast(%7) {dims = [0]}
%9 : f32[2, 4] = sub(%4, %8)
return %9
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  auto out = exe->run({});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  for (float v : values((*out)[0])) EXPECT_NEAR(v, -std::log(4.0f), 1e-6);
}

TEST(FusionRowValues, ARowResultBroadcastBackAndTransformedRuns) {
  // exp(broadcast(max(x))) reads x only through its row result.
  auto exe = compile_text(R"(sym n [1, 2, 8]
%0 : f32[n, 3] = parameter() {index = 0, name = "x"}
%1 : f32[n] = reduce_max(%0) {dims = [1]}
%2 : f32[n, 3] = broadcast(%1) {dims = [0]}
%3 : f32[n, 3] = exp(%2)
return %3, %1
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  auto out = exe->run({host({2, 3}, {0, 1, 2, 3, 5, 4})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  const std::vector<float> got = values((*out)[0]);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(got[c], std::exp(2.0f), 1e-5);
    EXPECT_NEAR(got[3 + c], std::exp(5.0f), 1e-4);
  }
}

}  // namespace
}  // namespace tripy

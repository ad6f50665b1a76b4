// End to end on the CPU: FlatIR text -> compile_graph -> run, against reference loops.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/compile.h"
#include "compile_text.h"

namespace tripy {
namespace {

using testing::compile_text;
using testing::host;
using testing::values;

TEST(CompileGraph, ElementwiseWithBroadcast) {
  auto exe = compile_text(R"(%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : f32[3] = parameter() {index = 1, name = "b"}
%2 : f32[2, 3] = broadcast(%1) {dims = [1]}
%3 : f32[2, 3] = add(%0, %2)
%4 : f32[] = constant() {value = [2]}
%5 : f32[2, 3] = broadcast(%4) {dims = []}
%6 : f32[2, 3] = mul(%3, %5)
return %6
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  auto out = exe->run({host({2, 3}, {1, 2, 3, 4, 5, 6}), host({3}, {10, 20, 30})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  EXPECT_EQ(values((*out)[0]), (std::vector<float>{22, 44, 66, 28, 50, 72}));
}

TEST(CompileGraph, SoftmaxDynamicRows) {
  auto exe = compile_text(R"(sym n [1, 2, 8]
%0 : f32[n, 4] = parameter() {index = 0, name = "x"}
%1 : f32[n] = reduce_max(%0) {dims = [1]}
%2 : f32[n, 4] = broadcast(%1) {dims = [0]}
%3 : f32[n, 4] = sub(%0, %2)
%4 : f32[n, 4] = exp(%3)
%5 : f32[n] = reduce_sum(%4) {dims = [1]}
%6 : f32[n, 4] = broadcast(%5) {dims = [0]}
%7 : f32[n, 4] = div(%4, %6)
return %7
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  std::vector<float> x = {1, 2, 3, 4, 0, 0, 0, 0, -1, 5, 2, 2};
  auto out = exe->run({host({3, 4}, x)});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  std::vector<float> got = values((*out)[0]);
  for (int r = 0; r < 3; ++r) {
    float m = -INFINITY, s = 0;
    for (int c = 0; c < 4; ++c) m = std::max(m, x[r * 4 + c]);
    for (int c = 0; c < 4; ++c) s += std::exp(x[r * 4 + c] - m);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(got[r * 4 + c], std::exp(x[r * 4 + c] - m) / s, 1e-6);
  }
}

TEST(CompileGraph, DotWithBiasAndRelu) {
  auto exe = compile_text(R"(%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : f32[3, 2] = parameter() {index = 1, name = "w"}
%2 : f32[2] = parameter() {index = 2, name = "b"}
%3 : f32[2, 2] = dot(%0, %1)
%4 : f32[2, 2] = broadcast(%2) {dims = [1]}
%5 : f32[2, 2] = add(%3, %4)
%6 : f32[] = constant() {value = [0]}
%7 : f32[2, 2] = broadcast(%6) {dims = []}
%8 : f32[2, 2] = max(%5, %7)
return %8
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, -1, 2, -2, 3, -3}, b = {0.5, 1};
  auto out = exe->run({host({2, 3}, x), host({3, 2}, w), host({2}, b)});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  std::vector<float> got = values((*out)[0]);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      float s = b[j];
      for (int k = 0; k < 3; ++k) s += x[i * 3 + k] * w[k * 2 + j];
      EXPECT_NEAR(got[i * 2 + j], std::max(s, 0.0f), 1e-5);
    }
  }
}

TEST(CompileGraph, ReduceOverLeadingDimAndOutputsThatNeedCopies) {
  auto exe = compile_text(R"(%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : f32[3] = reduce_sum(%0) {dims = [0]}
%2 : f32[3, 2] = reshape(%0)
%3 : f32[3, 1] = reshape(%1)
%4 : f32[6] = reshape(%2)
%5 : f32[6] = neg(%4)
%6 : f32[2, 3] = reshape(%5)
return %1, %0, %2, %1, %3, %6
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  auto out = exe->run({host({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  ASSERT_EQ(out->size(), 6u);
  EXPECT_EQ((*out)[4].shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(values((*out)[4]), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ((*out)[5].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values((*out)[5]), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(values((*out)[0]), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(values((*out)[1]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((*out)[2].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values((*out)[3]), (std::vector<float>{5, 7, 9}));
}

TEST(CompileGraph, ArgmaxPatternIsOneKernelWithTwoReductions) {
  auto g = flat::parse_graph(R"(%0 : f32[3, 4] = parameter() {index = 0, name = "x"}
%1 : f32[3] = reduce_max(%0) {dims = [1]}
%2 : f32[3, 4] = broadcast(%1) {dims = [0]}
%3 : i1[3, 4] = eq(%0, %2)
%4 : i32[3, 4] = iota() {dims = [1]}
%5 : i32[] = constant() {value = [2147483647]}
%6 : i32[3, 4] = broadcast(%5) {dims = []}
%7 : i32[3, 4] = select(%3, %4, %6)
%8 : i32[3] = reduce_min(%7) {dims = [1]}
return %8
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::string program;
  CompileOptions options;
  options.dump = [&](const std::string& stage, const std::string& text) {
    if (stage == "program") program = text;
  };
  auto exe = compile_graph(std::move(g.value()), options);
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  size_t kernels = 0;
  for (size_t at = program.find(" = fused '"); at != std::string::npos; at = program.find(" = fused '", at + 1)) ++kernels;
  EXPECT_EQ(kernels, 1u) << program;
  auto out = exe->run({host({3, 4}, {1, 9, 3, 9, 0, 0, 0, 0, -1, -2, -3, 5})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  ASSERT_EQ((*out)[0].dtype(), DType::kInt32);
  const int32_t* p = static_cast<const int32_t*>((*out)[0].data());
  EXPECT_EQ(std::vector<int32_t>(p, p + 3), (std::vector<int32_t>{1, 0, 3}));
}

TEST(CompileGraph, SliceConcatGatherAndDynamicShapes) {
  auto exe = compile_text(R"(sym n [1, 3, 6]
%0 : f32[n, 2] = parameter() {index = 0, name = "x"}
%1 : i32[2] = parameter() {index = 1, name = "idx"}
%2 : f32[n, 2] = slice(%0) {starts = [(n - 1), 0], limits = [-1, 2], steps = [-1, 1]}
%3 : f32[(n * 2), 2] = concatenate(%0, %2) {dims = [0]}
%4 : f32[2, 2] = gather(%3, %1) {dims = [0]}
%5 : f32[2, 2] = exp(%4)
return %5, %3
)");
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  auto idx = Tensor::empty_host(DType::kInt32, {2});
  static_cast<int32_t*>(idx.data())[0] = 3;
  static_cast<int32_t*>(idx.data())[1] = 0;
  auto out = exe->run({host({3, 2}, {1, 2, 3, 4, 5, 6}), idx});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  EXPECT_EQ(values((*out)[1]), (std::vector<float>{1, 2, 3, 4, 5, 6, 5, 6, 3, 4, 1, 2}));
  std::vector<float> got = values((*out)[0]);
  std::vector<float> want = {5, 6, 1, 2};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], std::exp(want[i]), 1e-3);
}

TEST(CompileGraph, NoBackendForGpuIsUnavailableOrWorks) {
  auto g = flat::parse_graph("%0 : f32[2] = parameter() {index = 0}\n%1 : f32[2] = neg(%0)\nreturn %1\n");
  ASSERT_TRUE(g.ok());
  CompileOptions options;
  options.device.kind = Device::Kind::kGpu;
  auto exe = compile_graph(std::move(g.value()), options);
  if (!exe.ok()) EXPECT_EQ(exe.status().code(), StatusCode::kUnavailable) << exe.status().message();
}

}  // namespace
}  // namespace tripy

namespace tripy {
namespace {

// A kernel kind that no FlatIR op of its own describes (here `copy`) is a kernel op: named by its
// kind in text, carrying its attributes, left alone by the passes (two identical ones are one),
// and lowered to one kernel of the kind.
TEST(CompileGraph, AKernelKindWithoutAFlatIrOpIsOneKernelOfThatKind) {
  const char* text = R"(%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : f32[2, 3] = copy(%0)
%2 : f32[2, 3] = copy(%0)
%3 : f32[2, 3] = add(%1, %2)
return %3
)";
  auto g = flat::parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->ops[1].kind, flat::OpKind::kKernel);
  EXPECT_EQ(g->ops[1].kernel.kind, rt::KernelKind::kCopy);
  EXPECT_EQ(g->str(), text);
  EXPECT_TRUE(flat::verify(*g).ok());
  std::string program;
  CompileOptions options;
  options.dump = [&](const std::string& stage, const std::string& dump) {
    if (stage == "program") program = dump;
  };
  auto exe = compile_graph(std::move(g.value()), options);
  ASSERT_TRUE(exe.ok()) << format_error(exe.status());
  EXPECT_NE(program.find("= copy 'copy'"), std::string::npos) << program;
  EXPECT_EQ(program.find("= copy", program.find("= copy") + 1), std::string::npos) << "CSE keeps one copy\n" << program;
  auto out = exe->run({host({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  EXPECT_EQ(values((*out)[0]), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(CompileGraph, AFusedKernelOpIsRefused) {
  auto g = flat::parse_graph(R"(%0 : f32[2] = parameter() {index = 0, name = "x"}
%1 : f32[2] = fused(%0)
return %1
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  Status st = flat::verify(*g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("only fusion makes"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tripy

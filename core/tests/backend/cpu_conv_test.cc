// kConv on the CPU and in the Program: oneDNN against the direct loops on every test
// convolution (each independent of the other), validation of hostile attributes, the JSON round
// trip, and the per-run check that keeps a kernel inside its buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cuda_test_cases.h"
#include "runtime/program_json.h"
#include "runtime/run_checks.h"
#include "runtime/fields_text.h"

namespace tripy::cuda_testing {
namespace {

double at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat16: return cpu::half_to_float(static_cast<const uint16_t*>(t.data())[i]);
    case DType::kBFloat16: return cpu::bfloat16_to_float(static_cast<const uint16_t*>(t.data())[i]);
    default: return static_cast<const float*>(t.data())[i];
  }
}

StatusOr<std::vector<Tensor>> run_cpu(const GpuCase& c) {
  TRIPY_ASSIGN_OR_RETURN(auto lp, cpu_backend()->load(std::make_shared<Program>(c.program), {}));
  return lp->run(c.inputs, c.slots);
}

// The case as a complete Program: its slots as constants of the shape program.
Program complete(const GpuCase& c) {
  Program p = c.program;
  p.shape_program.clear();
  for (int64_t v : c.slots) p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  p.input_shapes.clear();
  for (const BufferDesc& b : p.buffers)
    if (b.kind == BufferDesc::Kind::kInput) {
      if (p.input_shapes.size() <= static_cast<size_t>(b.index)) p.input_shapes.resize(b.index + 1);
      p.input_shapes[b.index] = b.shape;
    }
  return p;
}

TEST(CpuConv, OneDnnMatchesTheDirectLoops) {
  for (const GpuCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    auto fast = run_cpu(c);
    ASSERT_TRUE(fast.ok()) << fast.status().message();
    setenv("TRIPY_CPU_CONV", "direct", 1);
    auto direct = run_cpu(c);
    unsetenv("TRIPY_CPU_CONV");
    ASSERT_TRUE(direct.ok()) << direct.status().message();
    const Tensor &a = (*fast)[0], &b = (*direct)[0];
    ASSERT_EQ(a.shape(), b.shape());
    const double tol = a.dtype() == DType::kFloat32 ? 1e-5 : a.dtype() == DType::kFloat16 ? 2e-3 : 1.6e-2;
    double worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i)
      worst = std::max(worst, std::fabs(at(a, i) - at(b, i)) / (1 + std::fabs(at(b, i))));
    EXPECT_LE(worst, tol);
  }
}

double worst_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.numel() && a.shape() == b.shape(); ++i)
    worst = std::max(worst, std::fabs(at(a, i) - at(b, i)) / (1 + std::fabs(at(b, i))));
  return worst;
}

// Channels-last kernels against channels-first ones on the same data, each through oneDNN and
// the direct loops: the channels-last output is the channels-first output stored channels-last.
TEST(CpuConv, ChannelsLastMatchesChannelsFirstStoredChannelsLast) {
  const std::vector<GpuCase> first = conv_cases(), last = channels_last_conv_cases();
  ASSERT_EQ(first.size(), last.size());
  for (bool direct : {false, true}) {
    if (direct) setenv("TRIPY_CPU_CONV", "direct", 1);
    for (size_t i = 0; i < first.size(); ++i) {
      SCOPED_TRACE(last[i].name + (direct ? " (direct)" : " (oneDNN)"));
      auto want = run_cpu(first[i]);
      auto got = run_cpu(last[i]);
      ASSERT_TRUE(want.ok()) << want.status().message();
      ASSERT_TRUE(got.ok()) << got.status().message();
      const DType t = (*got)[0].dtype();
      const double tol = t == DType::kFloat32 ? 1e-5 : t == DType::kFloat16 ? 2e-3 : 1.6e-2;
      EXPECT_LE(worst_difference((*got)[0], to_channels_last((*want)[0])), tol);
    }
    if (direct) unsetenv("TRIPY_CPU_CONV");
  }
}

TEST(CpuPool, ChannelsLastMatchesChannelsFirstStoredChannelsLast) {
  const std::vector<GpuCase> first = pool_cases(), last = pool_cases(Layout::kChannelsLast);
  for (size_t i = 0; i < first.size(); ++i) {
    SCOPED_TRACE(last[i].name);
    auto want = run_cpu(first[i]);
    auto got = run_cpu(last[i]);
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Tensor expected = to_channels_last((*want)[0]);
    ASSERT_EQ((*got)[0].nbytes(), expected.nbytes());
    // Same windows summed in the same order: equal to the bit.
    EXPECT_EQ(std::memcmp((*got)[0].data(), expected.data(), static_cast<size_t>(expected.nbytes())), 0);
  }
}

TEST(CpuConv, EveryTestConvolutionIsAValidProgramThatRoundTripsThroughJson) {
  std::vector<GpuCase> cases = conv_cases();
  for (GpuCase& c : channels_last_conv_cases()) cases.push_back(std::move(c));
  for (GpuCase& c : pool_cases(Layout::kChannelsLast)) cases.push_back(std::move(c));
  for (const GpuCase& c : cases) {
    SCOPED_TRACE(c.name);
    Program p = complete(c);
    Status st = validate_program(p);
    ASSERT_TRUE(st.ok()) << st.message();
    Program back;
    ASSERT_TRUE(program_from_json(program_to_json(p), &back).ok());
    EXPECT_EQ(program_to_json(back), program_to_json(p));
    EXPECT_EQ(field_text(back.kernels[0].convolution), field_text(p.kernels[0].convolution));
    EXPECT_EQ(field_text(back.kernels[0].pooling), field_text(p.kernels[0].pooling));
    EXPECT_EQ(back.kernels[0].convolution.layout, p.kernels[0].convolution.layout);
    EXPECT_EQ(back.kernels[0].pooling.layout, p.kernels[0].pooling.layout);
  }
}

TEST(CpuConv, AnUnknownLayoutInAFileIsRejected) {
  Program p = complete(channels_last_conv_cases()[0]);
  nlohmann::json j = program_to_json(p);
  ASSERT_EQ(j["kernels"][0]["attrs"]["layout"], "channels_last");
  j["kernels"][0]["attrs"]["layout"] = "nhwc";
  Program back;
  Status st = program_from_json(j, &back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layout: unknown name 'nhwc'"), std::string::npos) << st.message();
}

struct ConvCorruption {
  const char* name;
  void (*mutate)(Kernel&);
  const char* expected;
};

class ConvValidateRejects : public ::testing::TestWithParam<ConvCorruption> {};

TEST_P(ConvValidateRejects, with_data_loss_and_a_precise_message) {
  Program p = complete(conv_cases()[3]);  // conv_bias_add_relu: x, w, bias, residual
  GetParam().mutate(p.kernels[0]);
  Status st = validate_program(p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(GetParam().expected), std::string::npos) << st.message();
}

const ConvCorruption kConvCorruptions[] = {
    {"groups_zero", [](Kernel& k) { k.convolution.groups = 0; }, "groups out of range"},
    {"stride_zero", [](Kernel& k) { k.convolution.stride[1] = 0; }, "out of range in spatial dim 1"},
    {"negative_pad", [](Kernel& k) { k.convolution.pad_after[0] = -1; }, "out of range in spatial dim 0"},
    {"huge_dilation", [](Kernel& k) { k.convolution.dilation[0] = int64_t{1} << 40; }, "out of range in spatial dim 0"},
    {"forward_output_padding", [](Kernel& k) { k.convolution.output_padding[0] = 1; }, "out of range in spatial dim 0"},
    {"transposed_output_padding", [](Kernel& k) { k.convolution.transposed = true; k.convolution.output_padding[0] = 2; },
     "out of range in spatial dim 0"},
    {"attribute_rank", [](Kernel& k) { k.convolution.stride.push_back(1); }, "for each of its 2 spatial dims"},
    {"missing_residual", [](Kernel& k) { k.inputs.pop_back(); }, "needs an input, a weight"},
    {"undeclared_bias", [](Kernel& k) { k.convolution.has_bias = false; }, "needs an input, a weight"},
    {"activation", [](Kernel& k) { k.convolution.activation = static_cast<Activation>(9); }, "invalid activation"},
    {"residual_rank", [](Kernel& k) { k.inputs[3] = k.inputs[2]; }, "residual of another rank"},
    {"layout", [](Kernel& k) { k.convolution.layout = static_cast<Layout>(2); }, "invalid layout"},
};

INSTANTIATE_TEST_SUITE_P(Corruptions, ConvValidateRejects, ::testing::ValuesIn(kConvCorruptions),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CpuConv, RunCheckRejectsAnOutputTheAttributesDoNotGive) {
  const GpuCase c = conv_cases()[0];  // 3x3, padding 1: 9x9 stays 9x9
  Program p = complete(c);
  ASSERT_TRUE(validate_program(p).ok());
  std::vector<int64_t> slots = c.slots;
  EXPECT_TRUE(check_run_shapes(p, c.inputs, slots).ok());
  // A file claiming padding 2 (an 11x11 result) for the 9x9 output buffer.
  p.kernels[0].convolution.pad_before = {2, 2};
  p.kernels[0].convolution.pad_after = {2, 2};
  ASSERT_TRUE(validate_program(p).ok());
  Status st = check_run_shapes(p, c.inputs, slots);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("convolves (2, 8, 9, 9) with (16, 8, 3, 3) into (2, 16, 9, 9)"), std::string::npos)
      << st.message();
}

TEST(CpuConv, RunCheckReadsChannelsLastShapesInTheirOrder) {
  const GpuCase c = channels_last_conv_cases()[3];  // conv_bias_add_relu: (2, 9, 9, 8) -> (2, 5, 5, 16)
  Program p = complete(c);
  std::vector<int64_t> slots = c.slots;
  Status ok = check_run_shapes(p, c.inputs, slots);
  EXPECT_TRUE(ok.ok()) << ok.message();
  // The same buffers claimed channels-first: 9 channels against a weight for 8.
  p.kernels[0].convolution.layout = Layout::kChannelsFirst;
  Status st = check_run_shapes(p, c.inputs, slots);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("convolves (2, 9, 9, 8) with (16, 3, 3, 8) into (2, 5, 5, 16)"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tripy::cuda_testing

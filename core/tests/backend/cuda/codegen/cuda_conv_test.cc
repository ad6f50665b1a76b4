// The CUDA convolution without a GPU (the fixed module's NVRTC compile for each dtype:
// cuda_kernel_files_test.cc): its launch words follow the attributes, and cuDNN is declined
// where it cannot serve (asymmetric padding, TRIPY_CUDNN=0, not loaded). The GPU run of every test
// convolution against the CPU is in cuda_backend_test.cc (conv_cases).
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cstdlib>

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_conv.h"
#include "cuda_test_cases.h"

namespace tripy::cuda_testing {
namespace {

rt::cuda::ConvProblem problem_of(const GpuCase& c) {
  auto pr = rt::cuda::conv_problem(c.program, c.program.kernels[0], c.slots);
  EXPECT_TRUE(pr.ok()) << pr.status().message();
  return pr.value();
}

TEST(CudaConv, LaunchWordsRightAlignTheSpatialDims) {
  const GpuCase c = conv_cases()[8];  // conv_1d: (2, 3, 11) * (5, 3, 3), stride 2, padding 1 -> (2, 5, 6)
  ASSERT_EQ(c.name, "conv_1d");
  rt::cuda::ConvProblem pr = problem_of(c);
  rt::cuda::Launch l = rt::cuda::plan_conv_launch(c.program.kernels[0], pr, nullptr, false, 132);
  ASSERT_EQ(l.words.size(), 31u);
  EXPECT_EQ(l.words[30], 0);  // channels-first
  EXPECT_EQ(l.words[5], 0);                                                 // full convolution
  EXPECT_EQ((std::vector<int64_t>{l.words[6], l.words[7], l.words[8], l.words[9]}), (std::vector<int64_t>{2, 3, 5, 1}));
  EXPECT_EQ((std::vector<int64_t>(l.words.begin() + 10, l.words.begin() + 13)), (std::vector<int64_t>{1, 1, 11}));
  EXPECT_EQ((std::vector<int64_t>(l.words.begin() + 13, l.words.begin() + 16)), (std::vector<int64_t>{1, 1, 6}));
  EXPECT_EQ((std::vector<int64_t>(l.words.begin() + 19, l.words.begin() + 22)), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ((std::vector<int64_t>(l.words.begin() + 25, l.words.begin() + 28)), (std::vector<int64_t>{0, 0, 1}));
  ASSERT_EQ(l.ptrs.size(), 3u);  // out, x, w
  // The epilogue of conv_bias_add_relu reads the output in place, the bias and the residual.
  const GpuCase block = conv_cases()[3];
  rt::cuda::Launch e = rt::cuda::plan_conv_launch(block.program.kernels[0], problem_of(block), nullptr, true, 132);
  EXPECT_EQ(e.words[5], 1);
  EXPECT_EQ(e.words[29], 1);  // relu
  ASSERT_EQ(e.ptrs.size(), 3u);
  EXPECT_EQ(e.ptrs[1].word, 3);
  EXPECT_EQ(e.ptrs[2].word, 4);
}

TEST(CudaConv, OnlyChannelsLastPointwiseConvolutionsBecomeGemms) {
  for (const GpuCase& c : channels_last_conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto gemm = rt::cuda::conv_gemm_problem(problem_of(c));
    if (c.name != "conv_1x1_bias_add_relu_f16_channels_last") {
      EXPECT_FALSE(gemm.has_value());  // 3x3, strided, grouped, GELU, transposed
      continue;
    }
    ASSERT_TRUE(gemm.has_value());
    // out (2*6*6, 32) = x (72, 16) . w (32, 16)^T in cuBLASLt's column-major names.
    EXPECT_EQ(gemm->m, 32);
    EXPECT_EQ(gemm->n, 72);
    EXPECT_EQ(gemm->k, 16);
    EXPECT_TRUE(gemm->trans_a && !gemm->trans_b);
    EXPECT_TRUE(gemm->bias && gemm->residual);
    EXPECT_EQ(gemm->activation, Activation::kRelu);
    EXPECT_EQ(gemm->dtype, DType::kFloat16);
  }
  for (const GpuCase& c : conv_cases()) EXPECT_FALSE(rt::cuda::conv_gemm_problem(problem_of(c)).has_value()) << c.name;
}

TEST(CudaConv, CudnnIsDeclinedWhereItCannotServe) {
  std::string why;
  const GpuCase asym = conv_cases()[7];
  ASSERT_EQ(asym.name, "conv_asymmetric_pad");
  EXPECT_FALSE(rt::cuda::cudnn_usable(problem_of(asym), &why));
  if (!rt::cuda::api().cudnn_ok) {
    EXPECT_EQ(why, "cuDNN 9 could not be loaded");
    return;
  }
  EXPECT_EQ(why, "cuDNN pads symmetrically");
  const GpuCase plain = conv_cases()[0];
  EXPECT_TRUE(rt::cuda::cudnn_usable(problem_of(plain)));
  setenv("TRIPY_CUDNN", "0", 1);
  EXPECT_FALSE(rt::cuda::cudnn_usable(problem_of(plain), &why));
  unsetenv("TRIPY_CUDNN");
  EXPECT_EQ(why, "TRIPY_CUDNN=0");
}

}  // namespace
}  // namespace tripy::cuda_testing

#endif  // TRIPY_WITH_CUDA

// The CUDA backend against the CPU backend on the same hand-built programs (every EwOp, reductions,
// dots, layout kernels), plus graph replay, artifacts reloading, OOM and arch errors. Skips
// cleanly where no GPU can be used.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "backend/cuda/codegen/cuda_builder.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_cases.h"

namespace tripy::cuda_testing {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!rt::cuda_backend()->available()) GTEST_SKIP() << "no usable GPU: " << rt::cuda_device_description()

double element(const Tensor& t, int64_t i) {
  const void* p = t.data();
  switch (t.dtype()) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat16: return cpu::half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return cpu::bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kFloat8E4M3: return cpu::float8_to_float(static_cast<const uint8_t*>(p)[i]);
    case DType::kInt4: case DType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kBool: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

// Both backends compute narrow floats in float32 and round once at the store: results agree to a
// unit or two in the last place; float32 differs only by summation order and libm.
double tolerance(DType t) {
  switch (t) {
    case DType::kFloat32: return 2e-5;
    case DType::kFloat16: return 2e-3;
    case DType::kBFloat16: return 1.6e-2;
    case DType::kFloat8E4M3: return 1.3e-1;
    default: return 0;
  }
}

void expect_same(const std::string& what, const Tensor& want, const Tensor& got, double scale_tol = 1) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  const double tol = tolerance(want.dtype()) * scale_tol;
  int bad = 0;
  for (int64_t i = 0; i < want.numel() && bad < 5; ++i) {
    double w = element(want, i), g = element(got, i);
    bool ok = std::isnan(w) ? std::isnan(g) : (w == g || std::fabs(w - g) <= tol * (1 + std::fabs(w)));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": cpu " << w << ", cuda " << g;
    }
  }
}

StatusOr<std::vector<Tensor>> run_cpu(const GpuCase& c) {
  TRIPY_ASSIGN_OR_RETURN(auto lp, rt::cpu_backend()->load(std::make_shared<rt::Program>(c.program), {}));
  return lp->run(c.inputs, c.slots);
}

StatusOr<std::unique_ptr<rt::LoadedProgram>> load_gpu(const rt::Program& p, int opt_level = 1) {
  rt::Backend* be = rt::cuda_backend();
  TRIPY_ASSIGN_OR_RETURN(rt::Artifacts art, rt::cuda_builder()->build(p, rt::BuildOptions{opt_level}));
  return be->load(std::make_shared<rt::Program>(p), art);
}

StatusOr<std::vector<Tensor>> run_gpu(rt::LoadedProgram& lp, const GpuCase& c) {
  std::vector<Tensor> dev;
  for (const Tensor& t : c.inputs) {
    TRIPY_ASSIGN_OR_RETURN(Tensor d, rt::cuda_backend()->copy_from_host(t));
    dev.push_back(d);
  }
  TRIPY_ASSIGN_OR_RETURN(std::vector<Tensor> out, lp.run(dev, c.slots));
  std::vector<Tensor> host;
  for (const Tensor& t : out) {
    EXPECT_EQ(t.device().kind, Device::Kind::kGpu);
    TRIPY_ASSIGN_OR_RETURN(Tensor h, rt::cuda_backend()->copy_to_host(t));
    host.push_back(h);
  }
  return host;
}

void check_case(const GpuCase& c) {
  auto want = run_cpu(c);
  ASSERT_TRUE(want.ok()) << c.name << " on the CPU: " << want.status().message();
  auto lp = load_gpu(c.program);
  ASSERT_TRUE(lp.ok()) << c.name << ": " << lp.status().message();
  // Three runs: the first launches directly, later ones replay a CUDA graph when it pays.
  for (int run = 0; run < 3; ++run) {
    auto got = run_gpu(**lp, c);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
    ASSERT_EQ(want->size(), got->size());
    // Dots and convolutions: the libraries sum in different orders.
    const bool is_dot = c.name.rfind("dot", 0) == 0 || c.name.rfind("conv", 0) == 0;
    for (size_t o = 0; o < got->size(); ++o)
      expect_same(c.name + " output " + std::to_string(o) + " run " + std::to_string(run), (*want)[o], (*got)[o],
                  is_dot ? 10 : 1);
  }
}

TEST(CudaBackend, MatchesCpuOnEveryTestProgram) {
  SKIP_WITHOUT_GPU();
  for (const GpuCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    check_case(c);
  }
}

// A channels-last 1x1 convolution with bias, residual and relu, forced through each route: one
// cuBLASLt GEMM with the epilogue fused (the residual as C), and cuDNN plus our epilogue.
TEST(CudaBackend, PointwiseConvolutionMatchesCpuAsGemmAndThroughCudnn) {
  SKIP_WITHOUT_GPU();
  for (const GpuCase& c : channels_last_conv_cases()) {
    if (c.name != "conv_1x1_bias_add_relu_f16_channels_last") continue;
    for (const char* force : {"1", "0"}) {
      SCOPED_TRACE(std::string("TRIPY_CONV_GEMM=") + force);
      setenv("TRIPY_CONV_GEMM", force, 1);
      check_case(c);
    }
    unsetenv("TRIPY_CONV_GEMM");
    return;
  }
  FAIL() << "the 1x1 case is missing";
}

TEST(CudaBackend, ForcedGraphReplayIsCorrectWithFreshInputs) {
  SKIP_WITHOUT_GPU();
  setenv("TRIPY_CUDA_GRAPHS", "1", 1);
  GpuCase c = layernorm(8, 1024);
  auto lp = load_gpu(c.program);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  for (uint32_t seed = 1; seed < 6; ++seed) {
    for (size_t i = 0; i < c.inputs.size(); ++i) c.inputs[i] = random_tensor(DType::kFloat32, c.inputs[i].shape(), seed * 7 + i);
    auto want = run_cpu(c);
    auto got = run_gpu(**lp, c);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
    for (size_t o = 0; o < got->size(); ++o) expect_same("replay " + std::to_string(seed), (*want)[o], (*got)[o]);
  }
  unsetenv("TRIPY_CUDA_GRAPHS");
}

TEST(CudaBackend, LoadsFromArtifactsAndRejectsForeignArch) {
  SKIP_WITHOUT_GPU();
  GpuCase c = softmax(DType::kFloat32, 6, 7);
  auto art = rt::cuda_builder()->build(c.program, rt::BuildOptions{1});
  ASSERT_TRUE(art.ok()) << art.status().message();
  auto lp = rt::cuda_backend()->load(std::make_shared<rt::Program>(c.program), *art);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  // A GPU newer than any we have: neither its cubin nor its PTX can run here.
  rt::Artifacts foreign = *art;
  std::vector<uint8_t>& meta = foreign["cuda.meta"];
  nlohmann::json j = nlohmann::json::parse(meta.begin(), meta.end());
  j["arch"] = 990;
  std::string text = j.dump();
  meta.assign(text.begin(), text.end());
  auto bad = rt::cuda_backend()->load(std::make_shared<rt::Program>(c.program), foreign);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(bad.status().message().find("sm_990"), std::string::npos) << bad.status().message();
  // Corrupt metadata is a data-loss error, not a crash.
  foreign["cuda.meta"] = {'{', 'x'};
  auto corrupt = rt::cuda_backend()->load(std::make_shared<rt::Program>(c.program), foreign);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kDataLoss);
}

TEST(CudaBackend, OutOfMemoryIsAnErrorAndTheProcessStaysUsable) {
  SKIP_WITHOUT_GPU();
  // 4 TiB: more than any GPU has (and than the host has, so no managed fallback either).
  auto huge = rt::cuda_backend()->allocate(DType::kFloat32, {int64_t{1} << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("CUDA out of memory allocating"), std::string::npos)
      << huge.status().message();
  check_case(softmax(DType::kFloat32, 4, 5));
  // Past the size check, a real cuMemAlloc failure: more than free, less than the GPU.
  auto big = rt::cuda_backend()->allocate(DType::kInt8, {int64_t(0.99 * 139) << 30});
  if (!big.ok()) EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().message();
  big = Status(StatusCode::kInternal, "released");
  check_case(softmax(DType::kFloat32, 4, 5));
}

TEST(CudaBackend, StreamsCanBeSetPerProgram) {
  SKIP_WITHOUT_GPU();
  GpuCase c = softmax(DType::kFloat32, 16, 100);
  auto lp = load_gpu(c.program);
  ASSERT_TRUE(lp.ok());
  rt::Backend* gpu = rt::cuda_backend();
  auto s = gpu->create_stream();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*lp)->set_stream(*s).ok());
  EXPECT_EQ((*lp)->stream(), *s);
  auto want = run_cpu(c);
  for (int i = 0; i < 3; ++i) {
    auto got = run_gpu(**lp, c);
    ASSERT_TRUE(got.ok()) << got.status().message();
    expect_same("stream", (*want)[0], (*got)[0]);
  }
  EXPECT_TRUE(gpu->synchronize(*s).ok());
  ASSERT_TRUE((*lp)->set_stream(nullptr).ok());
  EXPECT_TRUE(gpu->destroy_stream(*s).ok());
}

TEST(CudaBackend, BadSliceIsAnErrorNamingTheKernel) {
  SKIP_WITHOUT_GPU();
  ProgramBuilder b;
  int32_t x = b.input(DType::kFloat32, {4}), o = b.output(DType::kFloat32, {3});
  Kernel& k = b.kernel(KernelKind::kSlice, "my_slice", {x}, {o});
  k.slice.starts = {b.slot(2)};
  k.slice.steps = {b.slot(1)};
  GpuCase c = finish("bad_slice", b);
  auto lp = load_gpu(c.program);
  ASSERT_TRUE(lp.ok());
  auto got = run_gpu(**lp, c);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("my_slice"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace tripy::cuda_testing

#endif  // TRIPY_WITH_CUDA

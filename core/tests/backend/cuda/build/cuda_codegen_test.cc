// CUDA code generation without a GPU: every test program's fused kernels and the layout module
// are generated and compiled with NVRTC for sm_90 (skipped where NVRTC cannot be loaded).
#include <gtest/gtest.h>

// Built only where the CUDA headers are (core/CMakeLists.txt defines TRIPY_WITH_CUDA then).
#if TRIPY_WITH_CUDA

#include <set>

#include "backend/cuda/build/cuda_builder.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/build/cuda_compile.h"
#include "backend/cuda/build/cuda_sources.h"
#include "cuda_test_cases.h"

namespace tripy::cuda_testing {
namespace {

TEST(CudaCodegen, EveryTestKernelCompilesWithNvrtc) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<std::string> sources{rt::cuda::layout_module_source(), rt::cuda::index_module_source(),
                                   rt::cuda::fill_module_source()},
      names{"layout", "index", "fill"};
  std::set<std::string> seen;
  for (const GpuCase& c : all_cases()) {
    for (const rt::Kernel& k : c.program.kernels) {
      if (k.kind != rt::KernelKind::kFused) continue;
      auto g = rt::cuda::generate_fused(c.program, k);
      ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().message();
      if (seen.insert(g->source).second) {
        sources.push_back(g->source);
        names.push_back(c.name + ":" + g->function);
      }
    }
  }
  auto compiled = rt::cuda::compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < compiled->size(); ++i) {
    EXPECT_FALSE((*compiled)[i].cubin.empty()) << names[i];
    EXPECT_FALSE((*compiled)[i].ptx.empty()) << names[i];
  }
}

TEST(CudaCodegen, IdenticalKernelsGiveIdenticalSources) {
  GpuCase a = softmax(DType::kFloat32, 6, 7), b = softmax(DType::kFloat32, 600, 70);
  b.program.kernels[0].name = "another_name";
  auto ga = rt::cuda::generate_fused(a.program, a.program.kernels[0]);
  auto gb = rt::cuda::generate_fused(b.program, b.program.kernels[0]);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_EQ(ga->source, gb->source);  // sizes are arguments: one compile serves every shape
}

TEST(CudaCodegen, UndefinedOpIsAnError) {
  GpuCase c = elementwise(EwOp::kExp, DType::kInt32, DType::kInt32, 1);
  auto g = rt::cuda::generate_fused(c.program, c.program.kernels[0]);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("exp"), std::string::npos) << g.status().message();
}

TEST(CudaCodegen, UnavailableWithoutGpuIsClean) {
  // On machines without a GPU the backend must say so rather than crash.
  if (rt::cuda_backend()->available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(rt::cuda_backend()->available());
  EXPECT_EQ(rt::backend_for(Device::Kind::kGpu), nullptr);
}

TEST(CudaCodegen, LinkingTheBuildLayerRegistersTheGpuBuilder) {
  // Programs that link the compiler side (this test, Python) build for the GPU through the
  // registry; the runtime alone has no GPU builder (runtime_only_loads_and_runs checks that).
  EXPECT_EQ(rt::builder_for(Device::Kind::kGpu), rt::cuda_builder());
  EXPECT_NE(rt::builder_for(Device::Kind::kCpu), nullptr);
}

}  // namespace
}  // namespace tripy::cuda_testing

#endif  // TRIPY_WITH_CUDA

// The CUDA pooling module without a GPU: it compiles with NVRTC (skipped where NVRTC cannot be
// loaded) and holds a function per dtype. GPU runs against numpy are in tests/frontend/ops/test_pooling.py.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_pool.h"

namespace tripy {
namespace {

TEST(CudaPool, ThePoolingModuleCompilesWithNvrtcForEachDtype) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                         DType::kInt8,    DType::kInt32,   DType::kInt64};
  std::vector<std::string> sources, names;
  for (DType t : types) {
    sources.push_back(rt::cuda::pool_module_source(t));
    names.push_back(rt::cuda::pool_function(t));
  }
  auto compiled = rt::cuda::compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < sources.size(); ++i)
    for (DType t : types)  // each module holds its own dtype's function and no other
      EXPECT_EQ((*compiled)[i].ptx.find(".entry " + rt::cuda::pool_function(t) + "(") != std::string::npos,
                t == types[i])
          << names[i] << " / " << rt::cuda::pool_function(t);
}

}  // namespace
}  // namespace tripy

#endif

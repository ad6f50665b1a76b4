// The CUDA pooling module without a GPU: it compiles with NVRTC (skipped where NVRTC cannot be
// loaded) and holds a function per dtype. GPU runs against numpy are in tests/frontend/ops/test_pooling.py.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/build/cuda_compile.h"
#include "backend/cuda/build/cuda_sources.h"
#include "backend/cuda/cuda_pool.h"

namespace tripy {
namespace {

TEST(CudaPool, ThePoolingModuleCompilesWithNvrtc) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  auto compiled = rt::cuda::compile_modules({rt::cuda::pool_module_source()}, {"tripy_pool"}, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8, DType::kInt32, DType::kInt64})
    EXPECT_NE((*compiled)[0].ptx.find(rt::cuda::pool_function(t)), std::string::npos) << rt::cuda::pool_function(t);
}

}  // namespace
}  // namespace tripy

#endif

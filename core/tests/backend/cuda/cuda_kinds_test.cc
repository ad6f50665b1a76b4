// The CUDA backend's kind table (cuda_kinds.h): a row per kind in kernel_kinds.h's order (the
// build checks the count and the order; this checks the lookup), and a kind the GPU cannot run is
// rejected when the program loads, before any device is needed. Runs without a GPU.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kinds.h"

namespace tripy::rt::cuda {
namespace {

TEST(CudaKinds, EveryKindHasItsOwnRowAndAPlan) {
  for (size_t i = 0; i < kNumKernelKinds; ++i) {
    const auto kind = static_cast<KernelKind>(i);
    EXPECT_EQ(kind_rule(kind).kind, kind) << kernel_kind_name(kind);
    // Every kind runs on the GPU today; a kind added without a plan would be refused at load.
    EXPECT_NE(kind_rule(kind).plan, nullptr) << kernel_kind_name(kind);
  }
}

TEST(CudaKinds, ProgramOfSupportedKindsPassesTheCheck) {
  Program p;
  for (size_t i = 0; i < kNumKernelKinds; ++i) {
    Kernel k;
    k.kind = static_cast<KernelKind>(i);
    k.name = kernel_kind_name(k.kind);
    p.kernels.push_back(k);
  }
  EXPECT_TRUE(check_supported(p).ok());
}

TEST(CudaKinds, LoadRejectsAnUnknownKindBeforeTouchingTheDevice) {
  auto p = std::make_shared<Program>();
  Kernel k;
  k.kind = static_cast<KernelKind>(kNumKernelKinds);
  k.name = "from_the_future";
  p->kernels.push_back(k);
  auto loaded = cuda_backend()->load(p, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("kernel 'from_the_future' has an unknown kind"), std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

// Which all-reduces fold into the fused kernel after them (cuda_fold.h): a row reduction right after
// an all-reduce of floats over several ranks, whose sum it alone reads; anything else keeps both
// kernels. Runs without a GPU (the fold's entry point compiling: cuda_kernel_files_test.cc).
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <functional>

#include "backend/cuda/cuda_fold.h"
#include "../cuda_test_cases.h"

namespace tripy::rt::cuda {
namespace {

Program folding_program() { return cuda_testing::all_reduce_residual_rmsnorm(1, 4096).program; }

TEST(CudaFold, AnAllReduceFoldsIntoTheRowReductionThatAloneReadsItsSum) {
  const Program p = folding_program();
  const std::optional<FoldedAllReduce> f = folded_all_reduce(p, 1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->collective, 0);
  EXPECT_EQ(f->input, 1);
  EXPECT_FALSE(folded_all_reduce(p, 0).has_value());  // the collective itself
  EXPECT_FALSE(folded_all_reduce(p, 2).has_value());  // past the end
}

TEST(CudaFold, NothingElseFolds) {
  const std::vector<std::pair<const char*, std::function<void(Program&)>>> changes = {
      {"one rank", [](Program& p) { p.kernels[0].collective.world_size = 1; }},
      {"an all-gather", [](Program& p) { p.kernels[0].collective.op = CollectiveAttrs::Op::kAllGather; }},
      {"an elementwise reader", [](Program& p) { p.kernels[1].fused.reduce_from = 2; }},
      {"integers", [](Program& p) { p.buffers[static_cast<size_t>(p.kernels[0].outputs[0])].dtype = DType::kInt32; }},
      {"a sum the caller gets",
       [](Program& p) { p.buffers[static_cast<size_t>(p.kernels[0].outputs[0])].kind = BufferDesc::Kind::kOutput; }},
      {"a second reader", [](Program& p) { p.kernels.push_back(p.kernels[1]); }},
      {"an alias of the sum",
       [](Program& p) {
         BufferDesc a = p.buffers[static_cast<size_t>(p.kernels[0].outputs[0])];
         a.kind = BufferDesc::Kind::kAlias;
         a.index = p.kernels[0].outputs[0];
         p.buffers.push_back(a);
       }},
      {"a kernel between",
       [](Program& p) {
         Kernel other = p.kernels[1];  // the same norm of the residual alone
         other.inputs[1] = other.inputs[0];
         p.kernels.insert(p.kernels.begin() + 1, other);
       }},
  };
  for (const auto& [what, change] : changes) {
    Program p = folding_program();
    change(p);
    for (int32_t k = 0; k < static_cast<int32_t>(p.kernels.size()); ++k)
      EXPECT_FALSE(folded_all_reduce(p, k).has_value()) << what << ", kernel " << k;
  }
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif

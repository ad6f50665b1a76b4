// When a signature's calls go through its CUDA graph (SignatureGraph::wanted), without a GPU: from
// the second call, for two steps or more, and not where the copies around the graph (one per staged
// input and output) would outnumber two a step or its staged bytes dwarf the launches saved.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cstdlib>

#include "backend/cuda/cuda_graph.h"

namespace tripy::rt::cuda {
namespace {

// Whether the second call of a fresh signature goes through the graph.
bool second_call_wanted(int64_t io_bytes, size_t io_count, size_t steps) {
  SignatureGraph g;
  CUstream stream = reinterpret_cast<CUstream>(uintptr_t{1});  // any stream but the legacy default
  const bool first = g.wanted(stream, io_bytes, io_count, steps);
  EXPECT_FALSE(first);  // the first call launches directly
  return g.wanted(stream, io_bytes, io_count, steps);
}

TEST(CudaGraph, ManyStepsOverFewTensorsReplayAndFewStepsOverManyLaunchDirectly) {
  unsetenv("TRIPY_CUDA_GRAPHS");
  EXPECT_TRUE(second_call_wanted(1 << 10, 2, 60));  // a compiled model: one input, one output
  EXPECT_TRUE(second_call_wanted(1 << 10, 4, 2));   // two a step at most
  EXPECT_FALSE(second_call_wanted(1 << 10, 3, 1));  // one step (an eager op)
  // An eager LayerNorm + Linear + GELU: two kernels, its weights among five inputs, one output.
  EXPECT_FALSE(second_call_wanted(600 << 10, 6, 2));
  EXPECT_FALSE(second_call_wanted(int64_t{64} << 20, 2, 8));  // copies cost more than the launches
  setenv("TRIPY_CUDA_GRAPHS", "1", 1);  // always
  EXPECT_TRUE(second_call_wanted(600 << 10, 6, 2));
  setenv("TRIPY_CUDA_GRAPHS", "0", 1);  // never
  EXPECT_FALSE(second_call_wanted(1 << 10, 2, 60));
  unsetenv("TRIPY_CUDA_GRAPHS");
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

// Long-sequence attention through cuDNN's fused flash attention (its graph API: two matmuls, the
// scale, the causal mask and the softmax as one graph, which cuDNN runs as one Hopper kernel).
// On an H100 at (8, 12, 1024, 64) float16 causal it took 48 us where our mma.sync flash kernel
// takes 78 (as long as FlashAttention-2's): the launch uses it for long query sequences and keeps
// our kernels for short ones, decode steps, explicit masks, float32, and machines without cuDNN.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_cudnn_graph.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

class AttentionCudnnPlan {
 public:
  // The graph, the heuristic's engines and a plan of the first that cuDNN accepts here. Its
  // engines compile at run time (about 0.8-1 s a plan on an H100), so plans are shared: every
  // kernel of the same problem in the process (GPT-2's 12 layers) reuses the first one's.
  static StatusOr<std::unique_ptr<AttentionCudnnPlan>> create(const AttentionCudnnProblem& pr);
  size_t workspace_bytes() const;
  // Runs on 16-byte aligned operands (a head window's start included).
  Status run(CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr out, CUdeviceptr workspace, CUstream stream);

  struct Compiled;  // the graph and its plan (cuda_attention_cudnn.cc)

 private:
  AttentionCudnnPlan() = default;
  std::shared_ptr<const Compiled> compiled_;
  // By-value scalars: the variant pack holds their host addresses.
  float scale_ = 1.0f, masked_ = 0.0f;
  CudnnDesc pack_;  // rebuilt only when an address changes
  std::array<CUdeviceptr, 5> pack_ptrs_{};
};

}  // namespace tripy::rt::cuda

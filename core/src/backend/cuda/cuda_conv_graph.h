// Forward convolutions through cuDNN's graph API: one operation graph per problem (the
// convolution alone, or with its epilogue as pointwise operations), the engine configurations
// cuDNN's heuristic ranks for it, and an execution plan for one of them. The legacy API's
// algorithms reach only some of the Hopper kernels (a 1x1 convolution at batch 1 ran 5-10x slower
// through it than through the graph API's first choice).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_cudnn_graph.h"

namespace tripy::rt::cuda {

class ConvGraph {
 public:
  // `fused`: the graph also adds the bias and the residual and applies relu (the problem's
  // epilogue must be relu or none). Fails where cuDNN cannot describe the problem.
  static StatusOr<std::unique_ptr<ConvGraph>> create(const ConvProblem& pr, bool fused);

  bool fused() const { return fused_; }
  // The heuristic's configurations this backend would run, best first: no runtime compilation
  // (it costs seconds per plan), and for float32 no TF32 tensor cores (dots keep FP32 too).
  const std::vector<CudnnEngine>& candidates() const { return engines_.candidates; }

  // Makes the execution plan of candidates()[i]; fails where cuDNN declines it here.
  Status select(size_t i);
  size_t workspace_bytes() const { return workspace_bytes_; }

  // Runs the selected plan on 16-byte aligned operands (ConvPlan::run checks). `bias` and
  // `residual` are read only by a fused graph.
  Status run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
             CUdeviceptr workspace, CUstream stream);

 private:
  ConvGraph() = default;
  Status build(const ConvProblem& pr);

  bool fused_ = false;
  bool fp32_ = false;
  bool has_bias_ = false, has_residual_ = false;
  std::deque<CudnnDesc> keep_;  // tensors, operations: alive as long as the graph (stable addresses)
  CudnnDesc graph_;
  CudnnEngines engines_;
  CudnnDesc plan_;
  size_t workspace_bytes_ = 0;
  // The variant pack of the last call: rebuilt only when a pointer changes.
  CudnnDesc pack_;
  std::array<CUdeviceptr, 6> pack_ptrs_{};
};

}  // namespace tripy::rt::cuda

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

namespace tripy::rt::cuda {

// Owns one cudnnBackendDescriptor_t.
class CudnnDesc {
 public:
  CudnnDesc() = default;
  ~CudnnDesc();
  CudnnDesc(CudnnDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  CudnnDesc& operator=(CudnnDesc&& o) noexcept;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  static StatusOr<CudnnDesc> make(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// One engine configuration the heuristic offered: its rank in the heuristic's list (what an
// executable stores) and its engine's global index (checked when the list is rebuilt).
struct ConvEngine {
  int32_t rank = 0;
  int64_t engine = -1;
};

class ConvGraph {
 public:
  // `fused`: the graph also adds the bias and the residual and applies relu (the problem's
  // epilogue must be relu or none). Fails where cuDNN cannot describe the problem.
  static StatusOr<std::unique_ptr<ConvGraph>> create(const ConvProblem& pr, bool fused);

  bool fused() const { return fused_; }
  // The heuristic's configurations this backend would run, best first: no runtime compilation
  // (it costs seconds per plan), and for float32 no TF32 tensor cores (dots keep FP32 too).
  const std::vector<ConvEngine>& candidates() const { return candidates_; }

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
  Status rank_engines();

  bool fused_ = false;
  bool fp32_ = false;
  bool has_bias_ = false, has_residual_ = false;
  std::deque<CudnnDesc> keep_;  // tensors, operations: alive as long as the graph (stable addresses)
  CudnnDesc graph_;
  std::vector<CudnnDesc> configs_;  // the heuristic's list, in its order
  std::vector<ConvEngine> candidates_;
  CudnnDesc plan_;
  size_t workspace_bytes_ = 0;
  // The variant pack of the last call: rebuilt only when a pointer changes.
  CudnnDesc pack_;
  std::array<CUdeviceptr, 6> pack_ptrs_{};
};

}  // namespace tripy::rt::cuda

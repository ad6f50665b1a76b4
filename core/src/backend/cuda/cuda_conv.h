// kConv on the GPU: cuDNN's convolution (forward, or backward-data for transposed convolutions),
// channels-first (NCHW) or channels-last (NHWC activations, KRSC weights: what its tensor-core
// kernels read), with the algorithm chosen by timing at build time (per layout), relu/bias/residual fused through
// cudnnConvolutionBiasActivationForward where it can be, and our own module (a direct
// convolution and an epilogue, cuda_conv_kernels.cc) for the rest and as the fallback.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_launch.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// One kConv at run-time sizes.
struct ConvProblem {
  DType dtype = DType::kFloat32;
  ConvAttrs attrs;
  std::vector<int64_t> x, w, out;  // the buffers' shapes, in attrs.layout
  std::string key() const;  // identical problems are tuned once
  int64_t out_elements() const;
};
StatusOr<ConvProblem> conv_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots);

// Our module's launch for kernel `k`: the whole convolution (epilogue_only = false) or, after
// cuDNN wrote the plain convolution into the output, the epilogue in place.
Launch plan_conv_launch(const Kernel& k, const ConvProblem& pr, CUfunction fn, bool epilogue_only, int sm_count);

// Whether cuDNN runs this problem: loaded, not disabled (TRIPY_CUDNN=0), symmetric padding,
// sizes that fit its int fields. `why` says why not.
bool cudnn_usable(const ConvProblem& pr, std::string* why = nullptr);

// A tuned choice: {cuDNN version, algorithm, math type} as bytes, stored with the executable.
using ConvAlgo = std::vector<uint8_t>;

class ConvPlan {
 public:
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  // `stored`: a tuned algorithm (used when this cuDNN accepts it here, else its heuristic's).
  static StatusOr<std::unique_ptr<ConvPlan>> create(const ConvProblem& pr, const ConvAlgo* stored, CUstream stream);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Whether cuDNN also applies the epilogue (relu, bias, residual); else the caller launches it.
  bool fused() const { return fused_; }
  Status run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
             CUdeviceptr workspace, size_t workspace_bytes, CUstream stream);

 private:
  ConvPlan() = default;
  Status describe(const ConvProblem& pr);
  Status choose(const ConvAlgo* stored);

  ConvProblem problem_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t relu_ = nullptr;
  int algo_ = 0;
  size_t workspace_bytes_ = 0;
  bool fused_ = false;
  Tensor zero_bias_;  // the fused call needs a bias: zeros when the kernel has none
  friend StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, CUfunction fill_fn, CUstream stream);
  friend Status time_fused(ConvPlan& plan, const ConvProblem& pr, const cudnnConvolutionFwdAlgoPerf_t* perf,
                           int found, const std::vector<CUdeviceptr>& ptrs, CUstream stream, int32_t* choice);
};

// (tune_conv, the timing that picks a ConvAlgo, is the compiler side's: build/cuda_tuning.h.)
std::string cudnn_version();
// The process-wide cuDNN handle (kUnavailable when cuDNN could not be loaded).
StatusOr<cudnnHandle_t> cudnn_handle();
// A ConvAlgo's size: {cuDNN version, algorithm, math type, fused} as int32.
inline constexpr int kAlgoBytes = 16;

inline constexpr size_t kConvWorkspaceLimit = size_t{256} << 20;

}  // namespace tripy::rt::cuda

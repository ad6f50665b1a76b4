// Build-time tuning: GEMM tactics (cuda_gemm_tune.cc) and convolution algorithms
// (cuda_conv_tune.cc), and what they share: scratch operands filled
// with small values (so no candidate times on NaNs or denormals), and a timer of repeated calls.
#pragma once
#include <functional>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_gemm.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt::cuda {

// Times the top candidates on pseudo-random data of the problem's size; returns the fastest.
StatusOr<AlgoBytes> tune_dot(const DotProblem& problem, CUfunction fill_fn, CUstream stream);

// Times cuDNN's engines (graph API; legacy algorithms for transposed convolutions) on
// pseudo-random data of the problem's size; returns the fastest that fits kConvWorkspaceLimit.
StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, CUfunction fill_fn, CUstream stream);

// One device buffer of `dtype` per entry of `elements` (at least one element each), filled by
// `fill_fn` (the layout module's tuning fill); `keep` owns them, the result holds their addresses.
StatusOr<std::vector<CUdeviceptr>> tuning_scratch(DType dtype, const std::vector<int64_t>& elements,
                                                 CUfunction fill_fn, CUstream stream, std::vector<Tensor>& keep);

// Times `reps` back-to-back calls of a candidate on `stream` with a pair of events.
class CallTimer {
 public:
  CallTimer() = default;
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  ~CallTimer();
  // Milliseconds for all `reps` calls; the first failing call's status otherwise.
  StatusOr<float> time(const std::function<Status()>& call, int reps, CUstream stream);

 private:
  CUevent start_ = nullptr, stop_ = nullptr;
};

}  // namespace tripy::rt::cuda

// Build-time tuning: GEMM tactics (cuda_gemm_tune.cc) and convolution algorithms
// (cuda_conv_tune.cc), and what they share: scratch operands filled
// with small values (so no candidate times on NaNs or denormals), and a timer of repeated calls.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_gemm.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt::cuda {

// The tuner's version: part of every tuning-cache key (cuda_tuning_cache.h). Raise it when the
// candidates or the timing change, so choices made the old way are timed again.
inline constexpr int kTunerVersion = 5;  // 5: calls timed behind a lead kernel (launch_lead)

// The build-only fill module's functions that tuning launches: `fill` for the problem's dtype
// (pseudo-random scratch operands), `spin` (CallTimer's hold on the stream) and `lead`.
struct TuningKernels {
  CUfunction fill = nullptr, spin = nullptr;
  CUfunction lead = nullptr;  // tripy_lead: the kernel before a timed call that may overlap it
  // The loaded GEMV modules of the problem's dtype (codegen/kernels/gemv.cuh, one per entry
  // point), where the build has them: their tactics then compete with cuBLASLt's for problems
  // gemv_applies to (cuda_gemv.h).
  std::vector<CUmodule> gemv;
  // A fixed entry point by name (the weight-only dot's tiles), or null where the build lacks it.
  std::function<CUfunction(const std::string&)> entry;
};

// Times the top candidates on pseudo-random data of the problem's size; returns the fastest.
// TRIPY_GEMV=1 keeps only the GEMV tactics where they apply, TRIPY_GEMV=0 none (tests and
// benchmarks of one path; the builder's tuning context records the variable).
StatusOr<AlgoBytes> tune_dot(const DotProblem& problem, const TuningKernels& kernels, CUstream stream);

// Times a weight-only dot's entry points of `tiles` (weight_only_tiles_to_time), each with every
// split, on pseudo-random data; returns the fastest as weight_only_choice_bytes.
// TRIPY_WEIGHT_ONLY_MMA=1 times only the tensor-core tile where it is one of them, 0 the first.
struct WeightOnlyProblem;
StatusOr<AlgoBytes> tune_weight_only(const WeightOnlyProblem& problem, const std::vector<int>& tiles,
                                     const TuningKernels& kernels, CUstream stream);

// Times cuDNN's engines (graph API; legacy algorithms for transposed convolutions) on
// pseudo-random data of the problem's size; returns the fastest that fits kConvWorkspaceLimit.
StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, const TuningKernels& kernels, CUstream stream);

// One device buffer of `dtype` per entry of `elements` (at least one element each), filled by
// `fill_fn` (the fill module's, for `dtype`); `keep` owns them, the result holds their addresses.
StatusOr<std::vector<CUdeviceptr>> tuning_scratch(DType dtype, const std::vector<int64_t>& elements,
                                                 CUfunction fill_fn, CUstream stream, std::vector<Tensor>& keep);

// Times `reps` back-to-back calls of a candidate on `stream` with a pair of events. The calls queue
// behind a `spin` kernel, so small problems time the GPU's work and not the library's host-side
// cost per call (which a replayed CUDA graph does not pay).
class CallTimer {
 public:
  explicit CallTimer(CUfunction spin) : spin_(spin) {}
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  ~CallTimer();
  // Milliseconds for all `reps` calls; the first failing call's status otherwise.
  StatusOr<float> time(const std::function<Status()>& call, int reps, CUstream stream);

 private:
  CUfunction spin_;
  CUevent start_ = nullptr, stop_ = nullptr;
};

}  // namespace tripy::rt::cuda

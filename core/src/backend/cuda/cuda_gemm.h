// kDot through cuBLASLt: row-major operands via the transposition trick, batch broadcasting as
// strided batches (or folded into M), bias/ReLU epilogues, exact erf-GELU as a following kernel,
// and the algorithm chosen by timing at build time (codegen/cuda_gemm_tune.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_gemm_shape.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

using AlgoBytes = std::vector<uint8_t>;  // a serialised cublasLtMatmulAlgo_t (+ 'P': row phases)

// Descriptors, layouts and the chosen algorithm for one problem; reused for every run.
class DotPlan {
 public:
  ~DotPlan();
  DotPlan(const DotPlan&) = delete;
  DotPlan& operator=(const DotPlan&) = delete;
  DotPlan() = default;

  // `stored`: a tuned algorithm (used if cuBLASLt accepts it here, else the heuristic's); one
  // tagged for row phases runs them where they apply.
  static StatusOr<std::unique_ptr<DotPlan>> create(const DotProblem& problem, const AlgoBytes* stored,
                                                   int alignment, size_t workspace_bytes);
  // The row-phase plan of `problem` with `stored` for its phases (null: the heuristic's).
  static StatusOr<std::unique_ptr<DotPlan>> create_phases(const DotProblem& problem, const AlgoBytes* stored,
                                                          size_t workspace_bytes);
  // Top heuristic candidates for the phases (row_phase_calls(problem)[1]'s shape), for tuning.
  static StatusOr<std::vector<AlgoBytes>> phase_candidates(const DotProblem& problem, size_t workspace_bytes,
                                                           int count);
  // Top heuristic candidates (for tuning).
  static StatusOr<std::vector<AlgoBytes>> candidates(const DotProblem& problem, size_t workspace_bytes,
                                                     int count);

  // `c`: the residual a problem with `residual` adds (read through D's layout).
  Status run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr d, CUdeviceptr workspace,
             size_t workspace_bytes, CUstream stream, CUdeviceptr c = 0) const;

  int alignment() const { return alignment_; }
  const DotProblem& problem() const { return problem_; }
  bool row_phases() const { return !calls_.empty(); }
  // The workspace its algorithms ask for (at most the limit it was created with).
  size_t workspace_bytes() const { return workspace_; }

 private:
  struct Call {
    GemmCall shape;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  DotProblem problem_;
  int alignment_ = 256;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::vector<Call> calls_;  // row phases: run instead of the single call above
  size_t workspace_ = 0;
};

// The largest power of two (<= 256) dividing every address and batch stride, for cuBLASLt's
// alignment preferences.
int dot_alignment(const DotProblem& problem, std::initializer_list<CUdeviceptr> addresses);

// Whether this GPU's cuBLASLt has a kernel for the quantized dot of `operand` (int8 or float8) in
// the layout flat::quantized_dot makes ("TN", aligned sizes): asked once per dtype through the
// heuristic, so a library or GPU without one keeps dequantize + float GEMM instead of failing.
bool lt_runs_quantized(DType operand);

// The process-wide cuBLASLt handle (kUnavailable when cuBLASLt could not be loaded).
StatusOr<cublasLtHandle_t> lt_handle();
std::string cublaslt_version();

inline constexpr size_t kDotWorkspaceBytes = size_t{32} << 20;

}  // namespace tripy::rt::cuda

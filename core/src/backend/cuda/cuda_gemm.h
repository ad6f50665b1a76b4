// kDot through cuBLASLt: row-major operands via the transposition trick, batch broadcasting as
// strided batches (or folded into M), bias/ReLU epilogues, exact erf-GELU as a following kernel,
// and algorithm choice by timing at build time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// The cuBLASLt call(s) one kDot makes at given shapes, in column-major terms: D = op(A) op(B)
// with A = rhs and B = lhs, so D is the row-major output.
struct DotProblem {
  DType dtype = DType::kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // cuBLASLt's: m = N, n = M (times a folded batch), k = K
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;  // elements
  // Element offsets of A, B, C for each call (one entry unless batching is not uniform).
  std::vector<int64_t> offset_a{0}, offset_b{0}, offset_c{0};
  bool bias = false;
  Activation activation = Activation::kNone;
  std::string key() const;  // identical problems are tuned once
};

StatusOr<DotProblem> dot_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots);

using AlgoBytes = std::vector<uint8_t>;  // a serialised cublasLtMatmulAlgo_t

// Descriptors, layouts and the chosen algorithm for one problem; reused for every run.
class DotPlan {
 public:
  ~DotPlan();
  DotPlan(const DotPlan&) = delete;
  DotPlan& operator=(const DotPlan&) = delete;
  DotPlan() = default;

  // `stored`: a tuned algorithm (used if cuBLASLt accepts it here, else the heuristic's).
  static StatusOr<std::unique_ptr<DotPlan>> create(const DotProblem& problem, const AlgoBytes* stored,
                                                   int alignment, size_t workspace_bytes);
  // Top heuristic candidates (for tuning).
  static StatusOr<std::vector<AlgoBytes>> candidates(const DotProblem& problem, size_t workspace_bytes,
                                                     int count);

  Status run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr d, CUdeviceptr workspace,
             size_t workspace_bytes, CUstream stream) const;

  int alignment() const { return alignment_; }
  const DotProblem& problem() const { return problem_; }

 private:
  DotProblem problem_;
  int alignment_ = 256;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// The largest power of two (<= 256) dividing every address and batch stride, for cuBLASLt's
// alignment preferences.
int dot_alignment(const DotProblem& problem, std::initializer_list<CUdeviceptr> addresses);

// Times the top candidates on pseudo-random data of the problem's size; returns the fastest.
StatusOr<AlgoBytes> tune_dot(const DotProblem& problem, CUfunction fill_fn, CUstream stream);

// The process-wide cuBLASLt handle (kUnavailable when cuBLASLt could not be loaded).
StatusOr<cublasLtHandle_t> lt_handle();
std::string cublaslt_version();

inline constexpr size_t kDotWorkspaceBytes = size_t{32} << 20;

}  // namespace tripy::rt::cuda

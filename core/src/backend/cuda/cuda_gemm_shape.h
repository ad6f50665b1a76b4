// The shapes of kDot's cuBLASLt calls, free of CUDA types (so tests without a GPU can check them):
// the problem in column-major terms, and the row-phase split for outputs with unaligned rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// The cuBLASLt call(s) one kDot makes at given shapes, in column-major terms: D = op(A) op(B)
// with A = rhs and B = lhs, so D is the row-major output.
struct DotProblem {
  DType dtype = DType::kFloat32;    // of the output (C = D)
  DType operand = DType::kFloat32;  // of A and B: int8 / float8 for the quantized dot, else dtype
  bool quantized() const { return operand == DType::kInt8 || operand == DType::kFloat8E4M3; }
  DType operand_dtype() const { return quantized() ? operand : dtype; }  // what A and B hold
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // cuBLASLt's: m = N, n = M (times a folded batch), k = K
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;  // elements
  // Element offsets of A, B, C for each call (one entry unless batching is not uniform).
  std::vector<int64_t> offset_a{0}, offset_b{0}, offset_c{0};
  bool bias = false;
  // C is a separate input (a convolution's residual) added before the epilogue: beta = 1.
  bool residual = false;
  Activation activation = Activation::kNone;
  double scale = 1.0;  // alpha (DotAttrs::scale: a float8 dot's folded rescale)
  // No kernel of the program writes W (the kernel's inputs[1]): the GEMV reads its first chunks
  // before its wait for the previous kernel (its early word), hidden behind that kernel.
  bool constant_weight = false;
  std::string key() const;  // identical problems are tuned once
};

// What cuBLASLt runs on a GPU of `arch` (major * 10 + minor): int8 x int8 -> int32 (IMMA with the
// regular column order, sm80+) and float8 e4m3 -> float32 (sm89+), both "TN" only (the weight
// [N, K]) with K and N multiples of 4 (int8) or 16 (float8, its 16-byte rule).
LowPrecisionGemms low_precision_gemms_for(int arch);

StatusOr<DotProblem> dot_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots);

// One cuBLASLt call of a row-phase plan: D (m x n, leading dimension ldd) at element offset
// offset_d of the output, from op(A) rows at offset_a (ld lda) and B columns at offset_b (ld ldb).
struct GemmCall {
  int64_t m = 0, n = 0, lda = 0, ldb = 0, ldd = 0;
  int64_t offset_a = 0, offset_b = 0, offset_d = 0;
};

// Output rows of N elements that are not 16-byte aligned (a vocabulary of 50257 halves) drive
// cuBLASLt to slow kernels that accept any alignment. Row phases avoid that without padding:
// rows i = P*j + r (P = 16 / element size) are one GEMM whose output rows start at column t_r,
// the first 16-byte boundary of row r, and step by P*N elements (aligned); a thin first call
// writes columns [0, P) of every row (the columns before t_r) and runs first, so the phases
// overwrite what they share with it. Needs the weight stored [N, K] (trans_a) and K aligned;
// empty when the problem does not qualify. Calls run in the order given.
std::vector<GemmCall> row_phase_calls(const DotProblem& problem);

}  // namespace tripy::rt::cuda

// Portable GEMMs for the CPU backend: the path when oneDNN is absent or loses (tiny shapes),
// and for integer dtypes, which oneDNN's matmul does not cover.
#pragma once

#include <cstdint>

namespace tripy::cpu {

// A matrix operand: element (r, c) is at data[r * row_stride + c * col_stride].
template <class T>
struct MatRef {
  const T* data;
  int64_t row_stride, col_stride;
};

// C[M, N] (dense, row-major) = A[M, K] * B[K, N]. Cache-blocked with packed panels and a
// register-blocked micro-kernel; rows [m_begin, m_end) only, so callers can split the work.
void gemm_f32(int64_t M, int64_t N, int64_t K, MatRef<float> a, MatRef<float> b, float* c,
              int64_t m_begin, int64_t m_end);

// Unblocked loops for tiny shapes, where packing costs more than it saves.
void gemm_f32_small(int64_t M, int64_t N, int64_t K, MatRef<float> a, MatRef<float> b, float* c);

// Integer GEMM accumulating in int64 (results wrap to the caller's dtype when stored).
void gemm_i64(int64_t M, int64_t N, int64_t K, MatRef<int64_t> a, MatRef<int64_t> b, int64_t* c);

}  // namespace tripy::cpu

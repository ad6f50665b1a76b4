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

// C[M, N] (dense, int32) = A[M, K] * B[K, N] for int8 operands: the quantized dot's exact sum
// (|a * b| <= 2^14, so K < 2^17 cannot overflow). B is packed K-contiguous per column so the
// inner loop is a contiguous int8 dot product that compilers vectorise; rows [m_begin, m_end).
void gemm_s8s32(int64_t M, int64_t N, int64_t K, MatRef<int8_t> a, const int8_t* b_packed, int32_t* c,
                int64_t m_begin, int64_t m_end);
// Packs B (K x N, any strides) into b_packed[n * K + k], the layout gemm_s8s32 reads.
void pack_s8_columns(int64_t K, int64_t N, MatRef<int8_t> b, int8_t* b_packed);

}  // namespace tripy::cpu

// The built-in GEMM: packs KC x NC panels of B and MC x KC panels of A so the micro-kernel streams
// contiguous memory, accumulating a register tile per step of k: 4 rows x two vector registers
// (eight accumulators, so two FMA units stay busy), 32 columns in AVX-512 and 16 in AVX2 as the
// build targets them; plain loops otherwise and for the edge tiles.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "backend/cpu/gemm.h"

namespace tripy::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kMR = 4, kNR = 32;  // two AVX-512 registers a row
#else
constexpr int kMR = 4, kNR = 16;  // two AVX registers a row
#endif
constexpr int64_t kMC = 128, kKC = 256, kNC = 512;

// B[pc:pc+kc, jc:jc+nc] as panels of kNR columns, each kc x kNR, zero padded.
void pack_b(const MatRef<float>& b, int64_t pc, int64_t kc, int64_t jc, int64_t nc, float* out) {
  for (int64_t jp = 0; jp < nc; jp += kNR) {
    const int64_t w = std::min<int64_t>(kNR, nc - jp);
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = b.data + (pc + k) * b.row_stride + (jc + jp) * b.col_stride;
      int64_t j = 0;
      if (b.col_stride == 1)
        for (; j < w; ++j) out[j] = src[j];
      else
        for (; j < w; ++j) out[j] = src[j * b.col_stride];
      for (; j < kNR; ++j) out[j] = 0;
      out += kNR;
    }
  }
}

// A[ic:ic+mc, pc:pc+kc] as panels of kMR rows, each kc x kMR (k-major), zero padded.
void pack_a(const MatRef<float>& a, int64_t ic, int64_t mc, int64_t pc, int64_t kc, float* out) {
  for (int64_t ip = 0; ip < mc; ip += kMR) {
    const int64_t h = std::min<int64_t>(kMR, mc - ip);
    for (int64_t k = 0; k < kc; ++k) {
      int64_t r = 0;
      for (; r < h; ++r) out[r] = a.data[(ic + ip + r) * a.row_stride + (pc + k) * a.col_stride];
      for (; r < kMR; ++r) out[r] = 0;
      out += kMR;
    }
  }
}

// c[0:h, 0:w] += Ap * Bp over kc steps; the accumulator tile lives in registers.
inline void micro_kernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                         int64_t h, int64_t w) {
#if defined(__AVX512F__)
  static_assert(kMR == 4 && kNR == 32, "the AVX-512 tile is 4 rows x two registers");
  if (h == kMR && w == kNR) {
    __m512 acc[kMR][2];
    for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, ap += kMR, bp += kNR) {
      const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
      for (int r = 0; r < kMR; ++r) {
        const __m512 a = _mm512_set1_ps(ap[r]);
        acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < kMR; ++r) {
      float* row = c + r * ldc;
      _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), acc[r][0]));
      _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[r][1]));
    }
    return;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  static_assert(kMR == 4 && kNR == 16, "the AVX2 tile is 4 rows x two registers");
  if (h == kMR && w == kNR) {
    __m256 acc[kMR][2];
    for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, ap += kMR, bp += kNR) {
      const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
      for (int r = 0; r < kMR; ++r) {
        const __m256 a = _mm256_broadcast_ss(ap + r);
        acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < kMR; ++r) {
      float* row = c + r * ldc;
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[r][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[r][1]));
    }
    return;
  }
#endif
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int r = 0; r < kMR; ++r)
      for (int j = 0; j < kNR; ++j) acc[r][j] += ap[r] * bp[j];
    ap += kMR;
    bp += kNR;
  }
  for (int64_t r = 0; r < h; ++r)
    for (int64_t j = 0; j < w; ++j) c[r * ldc + j] += acc[r][j];
}

struct PackBuffers {
  std::vector<float> a, b;
};
thread_local PackBuffers t_pack;

}  // namespace

void gemm_f32(int64_t M, int64_t N, int64_t K, MatRef<float> a, MatRef<float> b, float* c,
              int64_t m_begin, int64_t m_end) {
  for (int64_t i = m_begin; i < m_end; ++i) std::memset(c + i * N, 0, sizeof(float) * N);
  if (K == 0) return;
  auto& buf = t_pack;
  buf.b.resize(static_cast<size_t>(kKC * (kNC + kNR)));
  buf.a.resize(static_cast<size_t>((kMC + kMR) * kKC));
  for (int64_t jc = 0; jc < N; jc += kNC) {
    const int64_t nc = std::min(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc);
      pack_b(b, pc, kc, jc, nc, buf.b.data());
      for (int64_t ic = m_begin; ic < m_end; ic += kMC) {
        const int64_t mc = std::min(kMC, m_end - ic);
        pack_a(a, ic, mc, pc, kc, buf.a.data());
        for (int64_t jp = 0; jp < nc; jp += kNR)
          for (int64_t ip = 0; ip < mc; ip += kMR)
            micro_kernel(kc, buf.a.data() + ip * kc, buf.b.data() + jp * kc,
                         c + (ic + ip) * N + jc + jp, N, std::min<int64_t>(kMR, mc - ip),
                         std::min<int64_t>(kNR, nc - jp));
      }
    }
  }
}

void gemm_f32_small(int64_t M, int64_t N, int64_t K, MatRef<float> a, MatRef<float> b, float* c) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = c + i * N;
    for (int64_t j = 0; j < N; ++j) row[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const float av = a.data[i * a.row_stride + k * a.col_stride];
      const float* brow = b.data + k * b.row_stride;
      if (b.col_stride == 1)  // the common layout gets a unit-stride loop that vectorises
        for (int64_t j = 0; j < N; ++j) row[j] += av * brow[j];
      else
        for (int64_t j = 0; j < N; ++j) row[j] += av * brow[j * b.col_stride];
    }
  }
}

void gemm_i64(int64_t M, int64_t N, int64_t K, MatRef<int64_t> a, MatRef<int64_t> b, int64_t* c) {
  for (int64_t i = 0; i < M; ++i) {
    int64_t* row = c + i * N;
    for (int64_t j = 0; j < N; ++j) row[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const uint64_t av = static_cast<uint64_t>(a.data[i * a.row_stride + k * a.col_stride]);
      const int64_t* brow = b.data + k * b.row_stride;
      for (int64_t j = 0; j < N; ++j)  // unsigned: overflow wraps as the stored dtype will
        row[j] = static_cast<int64_t>(static_cast<uint64_t>(row[j]) +
                                      av * static_cast<uint64_t>(brow[j * b.col_stride]));
    }
  }
}

void pack_s8_columns(int64_t K, int64_t N, MatRef<int8_t> b, int8_t* b_packed) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) b_packed[n * K + k] = b.data[k * b.row_stride + n * b.col_stride];
}

void gemm_s8s32(int64_t M, int64_t N, int64_t K, MatRef<int8_t> a, const int8_t* b_packed, int32_t* c,
                int64_t m_begin, int64_t m_end) {
  std::vector<int8_t> row(static_cast<size_t>(K));
  for (int64_t i = m_begin; i < m_end; ++i) {
    const int8_t* ar = a.data + i * a.row_stride;
    if (a.col_stride != 1) {  // a transposed lhs: gather the row once
      for (int64_t k = 0; k < K; ++k) row[static_cast<size_t>(k)] = a.data[i * a.row_stride + k * a.col_stride];
      ar = row.data();
    }
    for (int64_t j = 0; j < N; ++j) {
      const int8_t* bc = b_packed + j * K;
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<int32_t>(ar[k]) * static_cast<int32_t>(bc[k]);
      c[i * N + j] = acc;
    }
  }
}

}  // namespace tripy::cpu

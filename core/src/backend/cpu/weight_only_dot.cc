// kWeightOnlyDot on the CPU: x [rows, K] times a weight read packed (int8, or two int4 values a
// byte) with a scale and a zero point per group of K, the rule of rt::WeightOnlyDotAttrs. For a few
// rows of x (a decode step: bound by reading the packed weight) each group's products are summed
// on the stored integers, s (sum x q - (offset + z) sum x), with x's group sums computed once and,
// for int4, x split into its even and odd elements (a byte's low and high nibble), so the loops
// over a group's bytes vectorize; where the groups do not start on whole bytes, and for many rows,
// weight rows are dequantized into float32 a chunk at a time (never the whole weight), then
// multiplied (for many rows by oneDNN's matmul, as a float32 dot runs, or the blocked GEMM of gemm.h
// without it). Sums are float32; the result is rounded once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass a self-initialized _mm512_undefined_* value as their masks'
// unused source, which -Wmaybe-uninitialized (or -Wuninitialized) reports wherever they inline.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "backend/cpu/dot_dnnl.h"
#include "backend/cpu/fused_ops.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec_math.h"
#include "common/half.h"

namespace tripy::cpu {
namespace {

// A gated product's x from its [rows, 2K] input: SiLU of the first half times the second, rounded
// to x's dtype as the elementwise kernel that would otherwise write it rounds it.
std::vector<float> gated_x(const std::vector<float>& y, int64_t rows, int64_t K, DType dtype) {
  std::vector<float> x(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = y.data() + r * 2 * K;
    float* o = x.data() + r * K;
    for (int64_t k = 0; k < K; ++k) o[k] = silu_f32(g[k]) * g[K + k];
    narrow_span(dtype, static_cast<int>(K), o);
  }
  return x;
}

// A normalizing product's x (rt::WeightOnlyDotAttrs::norm): each row's mean of squares in double,
// which no float32 row overflows or underflows, then each value times the row's factor and gamma.
void normalize_rows(std::vector<float>& x, int64_t rows, int64_t K, const std::vector<float>& gamma, double eps) {
  for (int64_t r = 0; r < rows && K > 0; ++r) {
    float* v = x.data() + r * K;
    double squares = 0.0;
    for (int64_t k = 0; k < K; ++k) squares += static_cast<double>(v[k]) * v[k];
    const double factor = 1.0 / std::sqrt(squares / static_cast<double>(K) + eps);
    for (int64_t k = 0; k < K; ++k) v[k] = static_cast<float>(v[k] * factor) * gamma[static_cast<size_t>(k)];
  }
}

// Rows of x up to which each output is one dot product (no packing for the GEMM).
constexpr int64_t kFewRows = 4;
// Weight rows dequantized at once for the built-in GEMM (x is packed once a tile).
constexpr int64_t kTile = 256;
// Weight values dequantized at once for oneDNN's matmul (16 MB of float32: a few chunks a weight).
constexpr int64_t kChunkValues = int64_t{1} << 22;

// oneDNN's matmul primitives (per chunk shape) and the chunk's buffers, kept across calls.
class WeightOnlyState final : public KernelState {
 public:
  DnnlMatmulCache dnnl;
  std::vector<float> chunk, product;
};

void to_float(const View& v, std::vector<float>& out) {
  const int64_t n = v.numel();
  out.resize(static_cast<size_t>(n));
  switch (v.dtype) {
    case DType::kFloat32: std::memcpy(out.data(), v.data, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = half_to_float(static_cast<const uint16_t*>(v.data)[i]);
      break;
    default:
      for (int64_t i = 0; i < n; ++i)
        out[static_cast<size_t>(i)] = bfloat16_to_float(static_cast<const uint16_t*>(v.data)[i]);
      break;
  }
}

void store(const View& out, int64_t i, float v) {
  switch (out.dtype) {
    case DType::kFloat32: static_cast<float*>(out.data)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(out.data)[i] = float_to_half(v); break;
    default: static_cast<uint16_t*>(out.data)[i] = float_to_bfloat16(v); break;
  }
}

struct Weight {
  const rt::WeightOnlyDotAttrs* a;
  const int8_t* bytes;  // [N, row_bytes]
  const float* scale;   // [N, groups]
  const float* zero;    // [N, groups], or null
  int64_t K, row_bytes, groups;
  bool float8;  // the bytes are float8 e4m3 values (8 bits), not integers

  // Row n of the weight, dequantized: (q - zero) * scale per element.
  void row(int64_t n, float* w) const {
    const int8_t* q = bytes + n * row_bytes;
    const float* s = scale + n * groups;
    const float* z = zero ? zero + n * groups : nullptr;
    const int64_t gs = a->group_size;
    for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += gs) {
      const int64_t k1 = std::min(K, k0 + gs);
      const float sg = s[g], zg = z ? z[g] : 0.0f;
      int64_t k = k0;
      if (float8) {
#if defined(__AVX2__) && defined(__FMA__)
        // 8 values a step: a byte's exponent and mantissa bits placed under a float's (its value
        // times 2^-120, subnormals included), times 2^120, the sign or'd in; S.1111.111 is NaN.
        const __m256 sv = _mm256_set1_ps(sg), ov = _mm256_set1_ps(-zg * sg), up = _mm256_set1_ps(0x1p120f);
        const __m256i low7 = _mm256_set1_epi32(0x7f), nan = _mm256_set1_epi32(0x7fc00000);
        for (; k + 8 <= k1; k += 8) {
          const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k)));
          const __m256i m = _mm256_and_si256(b, low7);
          __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 20)), up);
          v = _mm256_blendv_ps(v, _mm256_castsi256_ps(nan), _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, low7)));
          v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(b, 7), 31)));
          _mm256_storeu_ps(w + k, _mm256_fmadd_ps(v, sv, ov));
        }
#endif
        for (; k < k1; ++k) w[k] = (float8_to_float(static_cast<uint8_t>(q[k])) - zg) * sg;
        continue;
      }
#if defined(__AVX2__) && defined(__FMA__)
      // 8 int8 or 16 int4 values a step, as q s - (offset + z) s.
      const __m256 sv = _mm256_set1_ps(sg), ov = _mm256_set1_ps(-(zg + (a->bits == 4 ? 8.0f : 0.0f)) * sg);
      if (a->bits == 8) {
        for (; k + 8 <= k1; k += 8) {
          const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k)));
          _mm256_storeu_ps(w + k, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), sv, ov));
        }
      } else if (k0 % 2 == 0) {
        for (; k + 16 <= k1; k += 16) {
          const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k / 2)));
          const __m256 lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(u, _mm256_set1_epi32(15))), sv, ov);
          const __m256 hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4)), sv, ov);
          // Values k, k + 1 are byte 0's nibbles: interleave lo and hi, then put the halves in order.
          const __m256 a0 = _mm256_unpacklo_ps(lo, hi), a1 = _mm256_unpackhi_ps(lo, hi);
          _mm256_storeu_ps(w + k, _mm256_permute2f128_ps(a0, a1, 0x20));
          _mm256_storeu_ps(w + k + 8, _mm256_permute2f128_ps(a0, a1, 0x31));
        }
      }
#endif
      if (a->bits == 8) {
        for (; k < k1; ++k) w[k] = (static_cast<float>(q[k]) - zg) * sg;
      } else {
        for (; k < k1; ++k) {
          const int u = (static_cast<uint8_t>(q[k >> 1]) >> ((k & 1) * 4)) & 15;
          w[k] = (static_cast<float>(u - 8) - zg) * sg;
        }
      }
    }
  }
};

// The sums over one group of the stored integers times x (AVX-512, else AVX2 + FMA where the
// build targets them, else plain loops the compiler may vectorize), for R rows of x at once so
// that each byte is widened and converted once; a row's lanes (acc) are added once per row.
// tail[r] takes the bytes past the last whole 8. With AVX-512 the bytes go 16 at a time into four
// chains of sums for all R rows together (a chain alone waits on its FMA's latency: one row of x
// then ran at a third of the memory's speed), the last few 8 at a time on AVX2, and each group's
// sums scale into the row's 16 lanes.
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define TRIPY_WO_AVX512 1
using Lanes = __m512;
inline Lanes lanes_zero() { return _mm512_setzero_ps(); }
inline float lane_total(Lanes v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__)
using Lanes = __m256;
inline Lanes lanes_zero() { return _mm256_setzero_ps(); }
inline float lane_total(Lanes v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
}
#else
struct Lanes {
  float v[8];
};
inline Lanes lanes_zero() { return Lanes{}; }
inline float lane_total(const Lanes& l) {
  return ((l.v[0] + l.v[4]) + (l.v[1] + l.v[5])) + ((l.v[2] + l.v[6]) + (l.v[3] + l.v[7]));
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// acc[r] += s (the AVX-512 chains c[r] + the AVX2 chain a[r]), on the build's lanes (c: null
// without AVX-512).
template <int R, int CH>
void add_scaled(const Lanes* c, const __m256* a, float s, Lanes (&acc)[R]) {
#ifdef TRIPY_WO_AVX512
  const __m512 sv = _mm512_set1_ps(s);
  for (int r = 0; r < R; ++r) {
    __m512 sum = _mm512_zextps256_ps512(a[r]);
    for (int j = 0; j < CH; ++j) sum = _mm512_add_ps(sum, c[r * CH + j]);
    acc[r] = _mm512_fmadd_ps(sv, sum, acc[r]);
  }
#else
  (void)c;
  const __m256 sv = _mm256_set1_ps(s);
  for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(sv, a[r], acc[r]);
#endif
}
#endif

// acc[r] += s * the group's nb bytes, each byte's low nibble (0..15) times even[r] and its high
// nibble times odd[r].
template <int R>
void nibble_sums(const uint8_t* q, const float* const* even, const float* const* odd, int64_t nb, float s,
                 Lanes (&acc)[R], float (&tail)[R]) {
  int64_t b = 0;
#if defined(__AVX2__) && defined(__FMA__)
  // H 16-byte halves a step: each byte's two nibbles make two chains a row (four for one row).
  constexpr int H = R == 1 ? 2 : 1, CH = 2 * H;
#ifdef TRIPY_WO_AVX512
  Lanes c[R * CH];
  for (int j = 0; j < R * CH; ++j) c[j] = _mm512_setzero_ps();
  const __m512i mask16 = _mm512_set1_epi32(15);
  for (; b + 16 * H <= nb; b += 16 * H)
    for (int h = 0; h < H; ++h) {
      const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + b + 16 * h)));
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(u, mask16)), hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(u, 4));
      for (int r = 0; r < R; ++r) {
        c[r * CH + 2 * h] = _mm512_fmadd_ps(_mm512_loadu_ps(even[r] + b + 16 * h), lo, c[r * CH + 2 * h]);
        c[r * CH + 2 * h + 1] = _mm512_fmadd_ps(_mm512_loadu_ps(odd[r] + b + 16 * h), hi, c[r * CH + 2 * h + 1]);
      }
    }
#else
  const Lanes* c = nullptr;  // no AVX-512 chains
#endif
  __m256 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  const __m256i mask = _mm256_set1_epi32(15);
  for (; b + 8 <= nb; b += 8) {
    const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + b)));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, mask)), hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
    for (int r = 0; r < R; ++r)
      a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(odd[r] + b), hi, _mm256_fmadd_ps(_mm256_loadu_ps(even[r] + b), lo, a[r]));
  }
  add_scaled<R, CH>(c, a, s, acc);
#else
  for (; b + 8 <= nb; b += 8)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 8; ++j)
        acc[r].v[j] += s * (even[r][b + j] * static_cast<float>(q[b + j] & 15) +
                            odd[r][b + j] * static_cast<float>(q[b + j] >> 4));
#endif
  for (int r = 0; r < R; ++r) {
    float t = 0;
    for (int64_t i = b; i < nb; ++i) t += even[r][i] * static_cast<float>(q[i] & 15) + odd[r][i] * static_cast<float>(q[i] >> 4);
    tail[r] += s * t;
  }
}

// acc[r] += s * the group's n signed bytes times x[r].
template <int R>
void byte_sums(const int8_t* q, const float* const* x, int64_t n, float s, Lanes (&acc)[R], float (&tail)[R]) {
  int64_t k = 0;
#if defined(__AVX2__) && defined(__FMA__)
  // CH 16-byte pieces a step, a chain each: four chains in all for one or two rows.
  constexpr int CH = R == 1 ? 4 : R == 2 ? 2 : 1;
#ifdef TRIPY_WO_AVX512
  Lanes c[R * CH];
  for (int j = 0; j < R * CH; ++j) c[j] = _mm512_setzero_ps();
  for (; k + 16 * CH <= n; k += 16 * CH)
    for (int j = 0; j < CH; ++j) {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k + 16 * j))));
      for (int r = 0; r < R; ++r) c[r * CH + j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k + 16 * j), v, c[r * CH + j]);
    }
#else
  const Lanes* c = nullptr;  // no AVX-512 chains
#endif
  __m256 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k))));
    for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + k), v, a[r]);
  }
  add_scaled<R, CH>(c, a, s, acc);
#else
  for (; k + 8 <= n; k += 8)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 8; ++j) acc[r].v[j] += s * x[r][k + j] * static_cast<float>(q[k + j]);
#endif
  for (int r = 0; r < R; ++r) {
    float t = 0;
    for (int64_t i = k; i < n; ++i) t += x[r][i] * static_cast<float>(q[i]);
    tail[r] += s * t;
  }
}

#ifdef TRIPY_WO_AVX512
// int4 weight rows whose groups are whole 32-value pieces, against R rows of x: each group's 16
// possible values (u - 8 - z) s are a table of floats that vpermps indexes by a nibble (its low 4
// bits, so a byte's low nibble needs no mask), and a byte's two nibbles meet x's even and odd
// elements in two FMAs. Nothing is scaled or corrected per group: the chains run the whole row and
// are added once at its end (the group sums reduce theirs every group and convert each nibble).
// H 16-byte pieces a step (dividing a group's): four chains for one row, two a row else.
template <int R, int H>
void nibble_table_row(const uint8_t* q, const float* const* even, const float* const* odd, const float* sc,
                      const float* zp, int64_t K, int64_t gs, float (&total)[R]) {
  const __m512 base = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 c[R][2 * H];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 2 * H; ++j) c[r][j] = _mm512_setzero_ps();
  for (int64_t g = 0, b0 = 0; b0 < K / 2; ++g, b0 += gs / 2) {
    const float s = sc[g], z = zp ? zp[g] : 0.0f;
    const __m512 table = _mm512_mul_ps(_mm512_sub_ps(base, _mm512_set1_ps(z)), _mm512_set1_ps(s));
    for (int64_t b = b0; b < b0 + gs / 2; b += 16 * H)
      for (int h = 0; h < H; ++h) {
        const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + b + 16 * h)));
        const __m512 lo = _mm512_permutexvar_ps(u, table), hi = _mm512_permutexvar_ps(_mm512_srli_epi32(u, 4), table);
        for (int r = 0; r < R; ++r) {
          c[r][2 * h] = _mm512_fmadd_ps(_mm512_loadu_ps(even[r] + b + 16 * h), lo, c[r][2 * h]);
          c[r][2 * h + 1] = _mm512_fmadd_ps(_mm512_loadu_ps(odd[r] + b + 16 * h), hi, c[r][2 * h + 1]);
        }
      }
  }
  for (int r = 0; r < R; ++r) {
    __m512 sum = c[r][0];
    for (int j = 1; j < 2 * H; ++j) sum = _mm512_add_ps(sum, c[r][j]);
    total[r] = _mm512_reduce_add_ps(sum);
  }
}
#endif

#ifdef TRIPY_WO_AVX512
// float8 e4m3 weight rows whose groups are whole 16-value pieces, against R rows of x: 16 bytes
// become floats in registers (exponent and mantissa bits under a float's, its value times 2^-120,
// subnormals included; the sign or'd in; S.1111.111 NaN), each group's scale times 2^120 and zero
// point in one FMA, then one FMA a row; no row of the weight is written out first.
template <int R>
void float8_row(const uint8_t* q, const float* const* x, const float* sc, const float* zp, int64_t K, int64_t gs,
                float* total) {
  const __m512i low7 = _mm512_set1_epi32(0x7f), sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  __m512 c[R][2];
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += gs) {
    const float s = sc[g], z = zp ? zp[g] : 0.0f;
    const __m512 sv = _mm512_set1_ps(s * 0x1p120f), ov = _mm512_set1_ps(-z * s);
    auto values = [&](int64_t k) {
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k)));
      const __m512i m = _mm512_and_si512(b, low7);
      // m << 20 with the byte's sign bit (bit 7, shifted to 31) or'd in: 0xEC is (A & C) | B.
      const __m512i bits = _mm512_ternarylogic_epi32(_mm512_slli_epi32(b, 24), _mm512_slli_epi32(m, 20), sign, 0xEC);
      return _mm512_mask_mov_ps(_mm512_fmadd_ps(_mm512_castsi512_ps(bits), sv, ov), _mm512_cmpeq_epi32_mask(m, low7),
                                nan);
    };
    int64_t k = k0;
    for (; k + 32 <= k0 + gs; k += 32) {  // two chains a row
      const __m512 w0 = values(k), w1 = values(k + 16);
      for (int r = 0; r < R; ++r) {
        c[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k), w0, c[r][0]);
        c[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k + 16), w1, c[r][1]);
      }
    }
    if (k < k0 + gs) {  // a group of an odd number of 16-value pieces
      const __m512 w0 = values(k);
      for (int r = 0; r < R; ++r) c[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + k), w0, c[r][0]);
    }
  }
  for (int r = 0; r < R; ++r) total[r] = _mm512_reduce_add_ps(_mm512_add_ps(c[r][0], c[r][1]));
}
#endif

// One row of x as the integer sums read it: its group sums and, for int4, its even and odd elements.
struct XRow {
  const float* x;
  std::vector<float> even, odd, group_sum;
};

XRow x_row(const float* x, int64_t K, int64_t group, int bits) {
  XRow r{x, {}, {}, {}};
  for (int64_t k0 = 0; k0 < K; k0 += group) {
    float sum = 0;
    for (int64_t k = k0; k < std::min(K, k0 + group); ++k) sum += x[k];
    r.group_sum.push_back(sum);
  }
  if (bits == 4) {
    r.even.resize(static_cast<size_t>(K / 2));
    r.odd.resize(static_cast<size_t>(K / 2));
    for (int64_t b = 0; b < K / 2; ++b) r.even[static_cast<size_t>(b)] = x[2 * b], r.odd[static_cast<size_t>(b)] = x[2 * b + 1];
  }
  return r;
}

float dot(const float* x, const float* w, int64_t K) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();  // two chains: FMA latency over its throughput
  for (; k + 16 <= K; k += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(w + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(w + k + 8), a1);
  }
  _mm256_storeu_ps(acc, _mm256_add_ps(a0, a1));
#endif
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[k + j] * w[k + j];
  float s = 0;
  for (; k < K; ++k) s += x[k] * w[k];
  return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Weight rows [n0, n1) against R rows of x (groups on whole bytes): per group s (sum x q - (offset
// + z) sum x), the stored value q meaning q - offset (int4: u - 8) less the zero point.
template <int R>
void few_rows(const Weight& w, const std::vector<XRow>& xr, float offset, const View& out, int64_t N, int64_t n0,
              int64_t n1) {
  const int64_t K = w.K, gs = w.a->group_size;
  const float* x[R];
  const float* even[R];
  const float* odd[R];
  for (int r = 0; r < R; ++r) {
    x[r] = xr[static_cast<size_t>(r)].x;
    even[r] = xr[static_cast<size_t>(r)].even.data();
    odd[r] = xr[static_cast<size_t>(r)].odd.data();
  }
#ifdef TRIPY_WO_AVX512
  // (u - 8 - z) s as it is written below, for whole 32-value groups.
  if (w.a->bits == 4 && offset == 8.0f && gs % 32 == 0 && K % gs == 0) {
    for (int64_t n = n0; n < n1; ++n) {
      float total[R];
      const uint8_t* q = reinterpret_cast<const uint8_t*>(w.bytes + n * w.row_bytes);
      const float *sc = w.scale + n * w.groups, *zp = w.zero ? w.zero + n * w.groups : nullptr;
      if (R == 1 && gs % 64 == 0) nibble_table_row<R, 2>(q, even, odd, sc, zp, K, gs, total);
      else nibble_table_row<R, 1>(q, even, odd, sc, zp, K, gs, total);
      for (int r = 0; r < R; ++r) store(out, r * N + n, total[r]);
    }
    return;
  }
#endif
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* q = w.bytes + n * w.row_bytes;
    const float* sc = w.scale + n * w.groups;
    const float* zp = w.zero ? w.zero + n * w.groups : nullptr;
    Lanes acc[R];
    for (int r = 0; r < R; ++r) acc[r] = lanes_zero();
    float tail[R] = {}, correction[R] = {};
    for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += gs) {
      const int64_t k1 = std::min(K, k0 + gs);
      const float s = sc[g], off = s * (offset + (zp ? zp[g] : 0.0f));
      for (int r = 0; r < R; ++r) correction[r] += off * xr[static_cast<size_t>(r)].group_sum[static_cast<size_t>(g)];
      if (w.a->bits == 4) {
        const float* e[R];
        const float* o[R];
        for (int r = 0; r < R; ++r) e[r] = even[r] + k0 / 2, o[r] = odd[r] + k0 / 2;
        nibble_sums<R>(reinterpret_cast<const uint8_t*>(q) + k0 / 2, e, o, (k1 - k0) / 2, s, acc, tail);
      } else {
        const float* xs[R];
        for (int r = 0; r < R; ++r) xs[r] = x[r] + k0;
        byte_sums<R>(q + k0, xs, k1 - k0, s, acc, tail);
      }
    }
    for (int r = 0; r < R; ++r) store(out, r * N + n, lane_total(acc[r]) + tail[r] - correction[r]);
  }
}

// Columns [n0, n0 + n) of out [rows, N] from the dense product c [rows, n].
void store_columns(const View& out, int64_t N, int64_t n0, const float* c, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) store(out, r * N + n0 + j, c[r * n + j]);
}

// Many rows through oneDNN: chunks of whole weight rows dequantized (in parallel), each multiplied
// as x [rows, K] @ chunk [n, K]^T; false where oneDNN declines a shape (the caller's tiles run).
StatusOr<bool> many_rows_by_chunks(const Weight& w, const std::vector<float>& x, int64_t rows, int64_t N,
                                   const View& out, WeightOnlyState& st) {
  const int64_t K = w.K, step = std::min(N, std::max<int64_t>(64, kChunkValues / std::max<int64_t>(K, 1) / 64 * 64));
  st.chunk.resize(static_cast<size_t>(step * K));
  st.product.resize(static_cast<size_t>(rows * step));
  for (int64_t n0 = 0; n0 < N; n0 += step) {
    const int64_t n = std::min(step, N - n0);
    parallel_for(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) w.row(n0 + j, st.chunk.data() + j * K);
    });
    DotShape s;
    s.M = rows, s.N = n, s.K = K;
    s.transpose_rhs = true;  // the chunk is [n, K]
    bool done = false;
    TRIPY_RETURN_IF_ERROR(st.dnnl.run(s, x.data(), st.chunk.data(), nullptr, st.product.data(), done));
    if (!done) return false;
    store_columns(out, N, n0, st.product.data(), rows, n);
  }
  return true;
}

// The product alone, into `out` [rows, N].
Status run_product(const KernelArgs& args, WeightOnlyState& st, const View& out) {
  const rt::WeightOnlyDotAttrs& a = args.kernel->weight_only_dot;
  const View& xv = *args.inputs[0];
  const int64_t K = rt::weight_only_k(a, xv.shape.back()), N = args.inputs[1]->shape[0];
  if (out.numel() == 0) return ok_status();
  const int64_t rows = out.numel() / N;
  std::vector<float> x, scale, zero;
  to_float(xv, x);
  if (a.gated) x = gated_x(x, rows, K, xv.dtype);
  if (a.norm) {
    std::vector<float> gamma;
    to_float(*args.inputs[rt::weight_only_gamma_input(a)], gamma);
    normalize_rows(x, rows, K, gamma, a.norm_eps);
  }
  to_float(*args.inputs[2], scale);
  if (a.has_zero) to_float(*args.inputs[3], zero);
  const Weight w{&a,
                 static_cast<const int8_t*>(args.inputs[1]->data),
                 scale.data(),
                 a.has_zero ? zero.data() : nullptr,
                 K,
                 args.inputs[1]->shape[1],
                 args.inputs[2]->shape[1],
                 args.inputs[1]->dtype == DType::kFloat8E4M3};
  const int64_t gs = a.group_size;
  // Groups on whole bytes of integers: int8, or int4 with K and the group even (float8 values are
  // dequantized a row at a time).
  const bool on_bytes = !w.float8 && (a.bits == 8 || (K % 2 == 0 && gs % 2 == 0));
  if (rows <= kFewRows && on_bytes) {
    std::vector<XRow> xr;
    for (int64_t r = 0; r < rows; ++r) xr.push_back(x_row(x.data() + r * K, K, gs, a.bits));
    // The stored value u means u - 8 (int4) or itself (int8), less the zero point.
    const float offset = a.bits == 4 ? 8.0f : 0.0f;
    parallel_for(N, std::max<int64_t>(1, 65536 / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
      switch (rows) {
        case 1: few_rows<1>(w, xr, offset, out, N, b, e); break;
        case 2: few_rows<2>(w, xr, offset, out, N, b, e); break;
        case 3: few_rows<3>(w, xr, offset, out, N, b, e); break;
        default: few_rows<4>(w, xr, offset, out, N, b, e); break;
      }
    });
    return ok_status();
  }
#ifdef TRIPY_WO_AVX512
  if (rows <= kFewRows && w.float8 && gs % 16 == 0 && K % gs == 0) {
    parallel_for(N, std::max<int64_t>(1, 65536 / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
      const float* xs[kFewRows];
      for (int64_t r = 0; r < rows; ++r) xs[r] = x.data() + r * K;
      for (int64_t n = b; n < e; ++n) {
        const uint8_t* q = reinterpret_cast<const uint8_t*>(w.bytes + n * w.row_bytes);
        const float *sc = w.scale + n * w.groups, *zp = w.zero ? w.zero + n * w.groups : nullptr;
        float t[kFewRows];
        switch (rows) {
          case 1: float8_row<1>(q, xs, sc, zp, K, gs, t); break;
          case 2: float8_row<2>(q, xs, sc, zp, K, gs, t); break;
          case 3: float8_row<3>(q, xs, sc, zp, K, gs, t); break;
          default: float8_row<4>(q, xs, sc, zp, K, gs, t); break;
        }
        for (int64_t r = 0; r < rows; ++r) store(out, r * N + n, t[r]);
      }
    });
    return ok_status();
  }
#endif
  if (rows <= kFewRows) {
    parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> wr(static_cast<size_t>(K));
      for (int64_t n = b; n < e; ++n) {
        w.row(n, wr.data());
        for (int64_t r = 0; r < rows; ++r) store(out, r * N + n, dot(x.data() + r * K, wr.data(), K));
      }
    });
    return ok_status();
  }
  TRIPY_ASSIGN_OR_RETURN(bool by_chunks, many_rows_by_chunks(w, x, rows, N, out, st));
  if (by_chunks) return ok_status();
  const int64_t tiles = (N + kTile - 1) / kTile;
  parallel_for(tiles, 1, [&](int64_t b, int64_t e) {
    std::vector<float> wt(static_cast<size_t>(kTile * K)), c(static_cast<size_t>(rows * kTile));
    for (int64_t t = b; t < e; ++t) {
      const int64_t n0 = t * kTile, nt = std::min(kTile, N - n0);
      for (int64_t j = 0; j < nt; ++j) w.row(n0 + j, wt.data() + j * K);
      // B[k, j] = wt[j * K + k]: the tile read transposed.
      gemm_f32(rows, nt, K, MatRef<float>{x.data(), K, 1}, MatRef<float>{wt.data(), 1, K}, c.data(), 0, rows);
      store_columns(out, N, n0, c.data(), rows, nt);
    }
  });
  return ok_status();
}

// gate_output: the product y [rows, N] as it would be stored, then SiLU(y[:, :H]) * y[:, H:]
// rounded once, as a kernel after the product would compute it.
Status run_gated_output(const KernelArgs& args, WeightOnlyState& st) {
  const View& out = *args.outputs[0];
  const int64_t N = args.inputs[1]->shape[0], H = N / 2;
  if (out.numel() == 0) return ok_status();
  const int64_t rows = out.numel() / H;
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * N) * dtype_size(out.dtype));
  const View yv{bytes.data(), out.dtype, {rows, N}};
  TRIPY_RETURN_IF_ERROR(run_product(args, st, yv));
  std::vector<float> y;
  to_float(yv, y);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < H; ++n) {
      const float g = y[static_cast<size_t>(r * N + n)], u = y[static_cast<size_t>(r * N + H + n)];
      store(out, r * H + n, silu_f32(g) * u);
    }
  return ok_status();
}

Status run_weight_only_dot(const KernelArgs& args, WeightOnlyState& st) {
  const rt::WeightOnlyDotAttrs& a = args.kernel->weight_only_dot;
  if (a.gate_output) return run_gated_output(args, st);
  const View& out = *args.outputs[0];
  TRIPY_RETURN_IF_ERROR(run_product(args, st, out));
  if (!a.residual) return ok_status();
  // The residual added to the rounded product, and the sum rounded, as an add kernel would.
  std::vector<float> product, residual;
  to_float(out, product);
  to_float(*args.inputs[rt::weight_only_residual_input(a)], residual);
  for (int64_t i = 0; i < out.numel(); ++i) store(out, i, product[static_cast<size_t>(i)] + residual[static_cast<size_t>(i)]);
  return ok_status();
}

}  // namespace

const CpuKernel kWeightOnlyDotKernel = {
    [](const rt::Program&, const rt::Kernel&, SourceRef) -> StatusOr<std::unique_ptr<KernelState>> {
      return std::unique_ptr<KernelState>(std::make_unique<WeightOnlyState>());
    },
    [](const KernelArgs& args, KernelState* state) {
      return run_weight_only_dot(args, static_cast<WeightOnlyState&>(*state));
    }};

}  // namespace tripy::cpu

// The weight-only dot module (weight_only_dot_module_source() in cuda_weight_only_dot_source.cc,
// after device_prelude.cuh): kWeightOnlyDot, out[r, n] = sum_k x[r, k] (q[n, k] - z[n, g]) s[n, g]
// with g = k / group, the weight read packed (int8 or float8 e4m3 bytes, or two int4 values a
// byte: k even in the low nibble, each nibble u meaning u - 8) and dequantized in registers;
// float32 sums. For a prefill's many rows an entry point of its own writes the dequantized weight
// for cuBLASLt instead (wo_dequantize).
// Bound by reading the packed weight for a few rows of x (a decode step), so every lane streams
// 16-byte pieces of R weight rows (a warp's load instruction reads 512 contiguous bytes of a row),
// turns each byte into a float with one byte permute and one subtraction (2^23 + u as a float's bits, minus
// 2^23 + offset: exact), and multiplies them with x, which stays in the L1. A piece lies inside
// one group, so its products are summed first and scaled once: s (sum x q - z sum x). `split` warps
// of a block share R rows, each taking every split-th piece, and add their sums through shared
// memory. Rows of x come in tiles of MT (a block per tile and group of weight rows), so any number
// of rows runs, each tile reading the weight again. Pieces need K and the group to be multiples
// of the values a piece holds (32 at 4 bits, 16 at 8) and 16-byte aligned addresses; otherwise
// every lane takes single values (any K, any group). The C++ side appends the entry point.
//
// From 8 rows of x on (MT >= WO_MMA_ROWS), float16 and bfloat16 x, the multiply-adds would cost
// more time on CUDA cores than the packed weight's bytes, so those tiles run on tensor cores
// (wo_mma), as the GEMV does (gemv.cuh's gemv_mma): a warp group takes 16 weight rows, lane (g, t)
// streams one 16-byte piece of rows g and g + 8 a step and feeds its values to mma.m16n8k16 as the
// fragment slots {2t, 2t + 1, 2t + 8, 2t + 9} of one mma and of a second, beside the same values
// of x (the sum over k is the same in any order: no shuffles, no shared memory). Where a step's 4
// pieces lie in one group (a group of 128 int4 or 64 int8 values or a multiple), the fragments
// hold the values as stored (int4 nibbles under a float's exponent, one shift and one mask-and-or
// for two, WoRaw4; int8 integers; float8 values, wo_e4m3_pair) and each step adds s (sum x q -
// z sum x) (WoFragments); otherwise each value is dequantized in registers ((q - z) s in float32,
// rounded once to x's dtype, as the dequantized GEMM would).
// Pieces need K and the group to be multiples of the values a piece holds and 16-byte aligned
// addresses, the launch's vector form (its grid: 16 weight rows a warp group). Fewer rows of x
// run on CUDA cores, or on an entry point of 8 rows (the rows past the last dropped) where the
// build's timing finds that faster (cuda_weight_only_tune.cc; int4 and float8 values may reach
// the mma in fewer instructions than the CUDA cores dequantize them).

// Words, in this order (cuda_weight_only_dot.cc fills them).
struct WoArgs {
  i64 out, x, w, scale, zero;  // out [rows, N], x [rows, K], w [N, row_bytes], scale and zero [N, groups] (zero 0: none)
  i64 rows, N, K, row_bytes, groups, group;
  i64 split;     // warps summing one group of weight rows (1, 2, 4 or 8: divides the block's 8 warps)
  i64 n_blocks;  // blocks along N; blockIdx.x / n_blocks is the block's tile of rows of x
  i64 vec;       // 1: every address 16-byte aligned (the launch checks); the sizes are checked here
  // The tensor-core tiles (wo_mma), used where vec is 1: warps summing one group of 16 weight rows
  // (0: the sizes or the dtype do not allow them) in the low byte, and blocks along N. Bit 8 of
  // mma_split: w is a constant of the program (no kernel writes it), so the ring may ask for its
  // first steps of w before it waits for the previous kernel (wo_early). A word of its own would
  // change the CUDA-core rows' code (ptxas: 97 -> 90 registers) and slow them by 10-20%.
  i64 mma_split, mma_blocks;
};

DEVI bool wo_early(const WoArgs& a) { return (a.mma_split >> 8) & 1; }

#define WO_BLOCK 256
#define WO_E4M3 9  // BITS of a float8 e4m3 weight: a byte a value, as int8, read as a float (kWeightOnlyE4M3)
#define WO_MMA_ROWS 8  // MT from which float16/bfloat16 x runs on tensor cores (kWeightOnlyMmaRows)

struct WoHalf {
  typedef unsigned short S;
  static constexpr bool kMma = true, kBf16 = false;
  static DEVI float get(const S* p, i64 i) { return h2f(p[i]); }
  static DEVI void put(S* p, i64 i, float f) { p[i] = f2h(f); }
  static DEVI void load8(const S* p, float (&f)[8]) {
    const V16 v = *(const V16*)p;
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = h2f((unsigned short)(u[j] & 0xffffu));
      f[2 * j + 1] = h2f((unsigned short)(u[j] >> 16));
    }
  }
};
struct WoBf16 {
  typedef unsigned short S;
  static constexpr bool kMma = true, kBf16 = true;
  static DEVI float get(const S* p, i64 i) { return b2f(p[i]); }
  static DEVI void put(S* p, i64 i, float f) { p[i] = f2b(f); }
  static DEVI void load8(const S* p, float (&f)[8]) {
    const V16 v = *(const V16*)p;
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(u[j] << 16);
      f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
  }
};
struct WoF32 {
  typedef float S;
  static constexpr bool kMma = false, kBf16 = false;
  static DEVI float get(const S* p, i64 i) { return p[i]; }
  static DEVI void put(S* p, i64 i, float f) { p[i] = f; }
  static DEVI void load8(const S* p, float (&f)[8]) {
    const V16 a = *(const V16*)p, b = *(const V16*)(p + 4);
    f[0] = __uint_as_float(a.x), f[1] = __uint_as_float(a.y), f[2] = __uint_as_float(a.z), f[3] = __uint_as_float(a.w);
    f[4] = __uint_as_float(b.x), f[5] = __uint_as_float(b.y), f[6] = __uint_as_float(b.z), f[7] = __uint_as_float(b.w);
  }
};

// 16 bytes of the weight: read once, so kept out of the L1 (x stays there).
DEVI V16 wo_stream(const signed char* p) {
  V16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Byte b of `u` (0..255) as the float 2^23 + byte.
DEVI float wo_byte(unsigned u, int b) { return __uint_as_float(__byte_perm(u, 0x4B000000u, 0x7440u | b)); }

// A float8 e4m3 byte's value, exactly (sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN).
DEVI float wo_e4m3(unsigned b) {
  const unsigned e = (b >> 3) & 15u, m = b & 7u;
  float v = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0.001953125f;  // m 2^-9
  if (e == 15u && m == 7u) v = __int_as_float(0x7fc00000);
  return b & 0x80u ? -v : v;
}

// Bytes 2i, 2i + 1 of `u` as float8 e4m3 values (one conversion of the pair from sm_89 on).
DEVI void wo_e4m3x2(unsigned u, int i, float& lo, float& hi) {
#if __CUDA_ARCH__ >= 890
  unsigned h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"((unsigned short)(u >> (16 * i))));
  lo = h2f((unsigned short)(h & 0xffffu)), hi = h2f((unsigned short)(h >> 16));
#else
  lo = wo_e4m3((u >> (16 * i)) & 0xffu), hi = wo_e4m3((u >> (16 * i + 8)) & 0xffu);
#endif
}

// Weight value k of a row's bytes `w` as a float: BITS 4 (nibbles), 8 (int8) or WO_E4M3.
template <int BITS>
DEVI float wo_value(const signed char* w, i64 k) {
  if (BITS == 4) return (float)((int)((((unsigned)w[k >> 1] & 0xffu) >> ((k & 1) * 4)) & 15u) - 8);
  if (BITS == WO_E4M3) return wo_e4m3((unsigned)w[k] & 0xffu);
  return (float)w[k];
}

// Values 8j .. 8j + 7 of one 16-byte piece as exact floats q: BITS 4 holds 32 values (word j's
// bytes, the low nibble first; nibble u -> u - 8), BITS 8 holds 16 (signed bytes of words 2j, 2j + 1),
// WO_E4M3 16 float8 values (the bytes of words 2j, 2j + 1).
template <int BITS>
DEVI void wo_values8(const V16& v, int j, float (&q)[8]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  if (BITS == WO_E4M3) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 2; ++i) wo_e4m3x2(u[(2 * j + h) & 3], i, q[4 * h + 2 * i], q[4 * h + 2 * i + 1]);
  } else if (BITS == 4) {
    const unsigned lo = u[j] & 0x0f0f0f0fu, hi = (u[j] >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      q[2 * b] = wo_byte(lo, b) - 8388616.0f;  // 2^23 + 8
      q[2 * b + 1] = wo_byte(hi, b) - 8388616.0f;
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned b8 = u[(2 * j + h) & 3] ^ 0x80808080u;  // q + 128 per byte
#pragma unroll
      for (int b = 0; b < 4; ++b) q[4 * h + b] = wo_byte(b8, b) - 8388736.0f;  // 2^23 + 128
    }
  }
}

template <class T, int BITS, int MT, int R>
DEVI void wo_rows(const WoArgs& a) {
  typedef typename T::S S;
  constexpr int VALS = BITS == 4 ? 32 : 16;
  __shared__ float part[WO_BLOCK / 32][R * MT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = (int)a.split, groups_per_block = (WO_BLOCK / 32) / split, g = warp / split, ws = warp % split;
  const i64 N = a.N, K = a.K, tile = (i64)blockIdx.x / a.n_blocks;
  const i64 n0 = (((i64)blockIdx.x % a.n_blocks) * groups_per_block + g) * R;
  const i64 m0 = tile * MT;
  const int M = (int)(a.rows - m0 < MT ? a.rows - m0 : MT);
  const S* x = (const S*)a.x + m0 * K;
  const signed char* w = (const signed char*)a.w;
  const S* sc = (const S*)a.scale;
  const S* zp = (const S*)a.zero;
  // Rows past N read row N - 1 (their sums are dropped), so every lane runs the same loop.
  i64 nr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) nr[r] = n0 + r < N ? n0 + r : N - 1;
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;
  const i64 step = 32 * split;
  if (n0 < N) {
    if (a.vec && K % VALS == 0 && a.group % VALS == 0) {
      // 32-bit piece and group indices (K is far below 2^31 values); a piece's group by a shift
      // where a group holds a power of two of pieces (int8's one group a row included).
      const int pieces = (int)(K / VALS), ppg = (int)(a.group / VALS);
      const int gshift = (ppg & (ppg - 1)) == 0 ? __ffs(ppg) - 1 : -1;
      // Row r of the group at 32-bit offsets from row n0 (R rows of bytes and scales; fewer
      // registers than a pointer a row).
      const signed char* w0 = w + n0 * a.row_bytes + (i64)(ws * 32 + lane) * 16;
      const S* s0 = sc + n0 * a.groups;
      const S* z0 = zp ? zp + n0 * a.groups : s0;
      int wo[R], so[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wo[r] = (int)((nr[r] - n0) * a.row_bytes);
        so[r] = (int)((nr[r] - n0) * a.groups);
      }
      // The next piece's weight loads go out before this piece's arithmetic: two pieces a row in
      // flight per lane, the weight's bytes arriving while the last ones are multiplied.
      int c = ws * 32 + lane;
      V16 cur[R];
#pragma unroll
      for (int r = 0; r < R; ++r) cur[r] = c < pieces ? wo_stream(w0 + wo[r]) : V16{0u, 0u, 0u, 0u};
      for (const signed char* wc = w0; c < pieces; c += (int)step) {
        const int cn = c + (int)step;
        wc += step * 16;
        V16 nxt[R];
#pragma unroll
        for (int r = 0; r < R; ++r) nxt[r] = cn < pieces ? wo_stream(wc + wo[r]) : V16{0u, 0u, 0u, 0u};
        const int grp = gshift >= 0 ? c >> gshift : c / ppg;
        const S* xc = x + (i64)c * VALS;
        // Per 8 values of the piece: x's, then each row's q, dequantized where it is multiplied
        // (8 floats live, not the piece's 32); x's sum over the piece only where there are zero
        // points.
        float p[R][MT], xs[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          xs[m] = 0.0f;
#pragma unroll
          for (int r = 0; r < R; ++r) p[r][m] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < VALS / 8; ++j) {
          // x's 8 values: held across the R rows for one or two rows of x, else read again (from
          // the L1) for each row of w, as registers would not hold MT x 8.
          constexpr bool kHold = MT <= 2;
          float f[kHold ? MT : 1][8];
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m >= M) break;
            float (&fm)[8] = f[kHold ? m : 0];
            if (kHold || zp) T::load8(xc + m * K + j * 8, fm);
            if (zp)
#pragma unroll
              for (int e = 0; e < 8; ++e) xs[m] += fm[e];
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            float q[8];
            wo_values8<BITS>(cur[r], j, q);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
              if (m >= M) break;
              float (&fm)[8] = f[kHold ? m : 0];
              if (!kHold) T::load8(xc + m * K + j * 8, fm);
#pragma unroll
              for (int e = 0; e < 8; ++e) p[r][m] = fmaf(fm[e], q[e], p[r][m]);
            }
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float s = T::get(s0, so[r] + grp), z = zp ? T::get(z0, so[r] + grp) : 0.0f;
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m >= M) break;
            acc[r][m] = fmaf(s, zp ? fmaf(-z, xs[m], p[r][m]) : p[r][m], acc[r][m]);
          }
          cur[r] = nxt[r];
        }
      }
    } else {
      for (i64 k = ws * 32 + lane; k < K; k += step) {
        const i64 grp = k / a.group;
        float wf[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float q = wo_value<BITS>(w + nr[r] * a.row_bytes, k);
          const float s = T::get(sc, nr[r] * a.groups + grp), z = zp ? T::get(zp, nr[r] * a.groups + grp) : 0.0f;
          wf[r] = (q - z) * s;
        }
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (m >= M) break;
          const float xv = T::get(x, m * K + k);
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r][m] = fmaf(xv, wf[r], acc[r][m]);
        }
      }
    }
  }
  // Lane (r * MT + m) % 32 owns entry (r, m) of the group's sums from here on.
  if (!split_sum_entries<R * MT>(&acc[0][0], part, split, g, ws)) return;
  S* out = (S*)a.out + m0 * N;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (((r * MT + m) & 31) == lane && m < M && n0 + r < N) T::put(out, m * N + n0 + r, acc[r][m]);
}

// Two floats as one word of x's dtype, `lo` in the low half (the lower k), rounded to nearest even.
template <bool BF16>
DEVI unsigned wo_pack2(float lo, float hi) {
  unsigned d = 0;
#if __CUDA_ARCH__ >= 800
  if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
#endif
  return d;
}

// Values 8j .. 8j + 7 of a 16-byte piece, dequantized ((q - z) s = q s + nzs with nzs = -z s) and
// packed two a word for an mma's A fragment.
template <int BITS, bool BF16>
DEVI void wo_dequantize8(const V16& v, int j, float s, float nzs, unsigned (&out)[4]) {
  float q[8];
  wo_values8<BITS>(v, j, q);
#pragma unroll
  for (int p = 0; p < 4; ++p) out[p] = wo_pack2<BF16>(fmaf(q[2 * p], s, nzs), fmaf(q[2 * p + 1], s, nzs));
}

// Bytes 0 and 1 of `u` (float8 e4m3) as x's dtype, two a word for an mma's fragment: float16
// holds every e4m3 value (one cvt); bfloat16 gets the float16 bits' exponent and 3 mantissa bits
// under its own, which makes the value times 2^-112 exactly: every e4m3 value, its subnormals
// included, is then a normal bfloat16, where moving the exponent's bias would make zero 2^-15. x
// comes times 2^56 (wo_scale_x) so that no product falls under float32's normal range, and
// WoFragments multiplies the sums by 2^56. Before sm_89 each byte is decoded (wo_e4m3) and rounded
// exactly.
template <bool BF16>
DEVI unsigned wo_e4m3_pair(unsigned u) {
#if __CUDA_ARCH__ >= 890
  unsigned h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h) : "h"((unsigned short)(u & 0xffffu)));
  if (!BF16) return h;
  unsigned d;  // ((h & 0x7fff7fff) >> 3) under 0x7fff7fff, h's signs elsewhere
  asm("lop3.b32 %0, %1, %2, %3, 0xe4;" : "=r"(d) : "r"((h & 0x7fff7fffu) >> 3), "r"(h), "r"(0x7fff7fffu));
  return d;
#else
  const float k = BF16 ? __uint_as_float(0x07800000u) : 1.0f;  // 2^-112
  return wo_pack2<BF16>(wo_e4m3(u & 0xffu) * k, wo_e4m3((u >> 8) & 0xffu) * k);
#endif
}

// 8 values of x (one 16-byte load) as B fragment words for float8 fragments: times 2^56 for
// bfloat16 (exact: a power of two, short of overflow past 2^71), else as they are.
template <int BITS, bool BF16>
DEVI void wo_scale_x(unsigned (&b)[4]) {
#if __CUDA_ARCH__ >= 800
  if (BITS == WO_E4M3 && BF16)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(b[i]) : "r"(b[i]), "r"(0x5b805b80u), "r"(0x80008000u));
#endif
}

// Values 8j .. 8j + 7 of a 16-byte piece of bytes (int8 or float8), two a word of x's dtype for an
// mma's A fragment, with no scale (GROUPED tiles scale the sums): int8 bytes as exact floats
// (wo_byte), float8 ones as wo_e4m3_pair makes them (WoFragments undoes its scale); packed {k0, k1},
// {k2, k3} of each of words 2j and 2j + 1.
template <int BITS, bool BF16>
DEVI void wo_bytes8(const V16& v, int j, unsigned (&out)[4]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  if (BITS == WO_E4M3) {
#pragma unroll
    for (int p = 0; p < 4; ++p) out[p] = wo_e4m3_pair<BF16>(u[(2 * j + (p >> 1)) & 3] >> (16 * (p & 1)));
    return;
  }
  float q[8];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const unsigned b8 = u[(2 * j + h) & 3] ^ 0x80808080u;
#pragma unroll
    for (int b = 0; b < 4; ++b) q[4 * h + b] = wo_byte(b8, b) - 8388736.0f;  // 2^23 + 128
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) out[p] = wo_pack2<BF16>(q[2 * p], q[2 * p + 1]);
}

// (v & mask) | bits in one instruction (the compiler makes two of it where both are constants).
DEVI unsigned wo_mask_or(unsigned v, unsigned mask, unsigned bits) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(v), "r"(mask), "r"(bits));
  return d;
}

// Values 8j .. 8j + 7 of a 16-byte int4 piece as x's dtype, two a word: the nibble pairs {k, k + 4}
// of word j, {k0, k4}, {k1, k5}, {k2, k6}, {k3, k7} (x is paired the same way, wo_pair_x). Each
// nibble u lands in the mantissa under a fixed exponent, one shift and one mask-and-or (lop3) per
// word, making h = 128 + 8u (bfloat16: u at mantissa bits 3..6) or 1024 + u (float16). A step's
// sums over x h then give sum x q = (sum x h) / kScale - (kBase + 8) sum x (WoFragments), exactly
// as far as float32 sums are.
template <bool BF16> struct WoRaw4 {
  static constexpr float kScale = BF16 ? 8.0f : 1.0f, kBase = BF16 ? 16.0f : 1024.0f;  // h / kScale = kBase + u
};
template <bool BF16>
DEVI void wo_raw4(const V16& v, int j, unsigned (&out)[4]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  const unsigned w = u[j];
  if (BF16) {
    out[0] = wo_mask_or(w << 3, 0x00780078u, 0x43004300u);
    out[1] = wo_mask_or(w >> 1, 0x00780078u, 0x43004300u);
    out[2] = wo_mask_or(w >> 5, 0x00780078u, 0x43004300u);
    out[3] = wo_mask_or(w >> 9, 0x00780078u, 0x43004300u);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = wo_mask_or(w >> (4 * i), 0x000f000fu, 0x64006400u);
  }
}

// A grouped tile's step sums s (sum x q - z sum x) from its mmas' sums cq (x times the fragments)
// and cs (sum x): sum x q = cq kInv - kOffset kCs cs. int4's raw values (WoRaw4): kInv = 1 / kScale,
// kOffset = kBase + 8; float8's bfloat16 fragments (values times 2^-112, x times 2^56 in cq and cs
// alike): kInv = kCs = 2^56; else the exact integers or values.
template <int BITS, bool BF16> struct WoFragments {
  static constexpr bool kRaw4 = BITS == 4, kScaled = BITS == WO_E4M3 && BF16;
  static constexpr float kInv = kRaw4 ? 1.0f / WoRaw4<BF16>::kScale : kScaled ? 72057594037927936.0f : 1.0f;
  static constexpr float kOffset = kRaw4 ? WoRaw4<BF16>::kBase + 8.0f : 0.0f;
  static constexpr float kCs = kRaw4 ? 1.0f : kInv;
};

// 8 values of x (one 16-byte load, k0 .. k7) as the B fragment words that meet wo_raw4's and
// wo_bytes8's words: 4 bits {k0, k4}, {k1, k5}, {k2, k6}, {k3, k7}; 8 bits as they are.
template <int BITS>
DEVI void wo_pair_x(const V16& b, unsigned (&out)[4]) {
  if (BITS == 4) {
    out[0] = __byte_perm(b.x, b.z, 0x5410), out[1] = __byte_perm(b.x, b.z, 0x7632);
    out[2] = __byte_perm(b.y, b.w, 0x5410), out[3] = __byte_perm(b.y, b.w, 0x7632);
  } else {
    out[0] = b.x, out[1] = b.y, out[2] = b.z, out[3] = b.w;
  }
}

// Where a warp of a tensor-core tile works: lane (g8, t4), its group g of 16 weight rows from n0
// (mma_split warps a group, this one the ws-th) and the tile of MT rows of x from m0 (M of them).
// Consecutive blocks take the tiles of rows of x over the same weight rows, which they read from
// memory about at once: the second tile's copy of them comes from the L2.
struct WoMmaPlace {
  int lane, g8, t4, split, g, ws, M;
  i64 n0, m0;
};
template <int MT> DEVI WoMmaPlace wo_mma_place(const WoArgs& a, int rows = 16) {
  WoMmaPlace p;
  const int warp = threadIdx.x >> 5;
  p.lane = threadIdx.x & 31, p.g8 = p.lane >> 2, p.t4 = p.lane & 3;
  p.split = (int)(a.mma_split & 0xff), p.g = warp / p.split, p.ws = warp % p.split;
  const int groups_per_block = (WO_BLOCK / 32) / p.split;
  const i64 tiles = (a.rows + MT - 1) / MT;
  p.n0 = (((i64)blockIdx.x / tiles) * groups_per_block + p.g) * rows;
  p.m0 = (i64)blockIdx.x % tiles * MT;
  p.M = (int)(a.rows - p.m0 < MT ? a.rows - p.m0 : MT);
  return p;
}

// MT rows of x (NT tiles of 8) against 16 weight rows per group of `mma_split` warps, which take
// every mma_split-th step of 4 pieces. Lane (g, t) reads piece 4 s + t of weight rows g and g + 8
// and the same K values of x rows g, g + 8, ...; its values 8j .. 8j + 7 make two mmas. The
// accumulator c[n] holds out rows (weight rows) g and g + 8, columns (rows of x) 2t and 2t + 1.
// GROUPED (a step's 4 pieces lie in one group: the group a multiple of 4 pieces' values): the A
// fragments hold the values as stored, fewer instructions a weight byte than dequantized values,
// the mmas sum x q over the step, and the step adds s (sum x q - z sum x), sum x from an mma with A
// all ones where int4's raw values or zero points need it. Else each value is dequantized ((q - z)
// s, rounded to x's dtype) before its mma.
template <class T, int BITS, int MT, bool GROUPED>
DEVI void wo_mma(const WoArgs& a) {
  typedef typename T::S S;
  constexpr int NT = MT / 8, VALS = BITS == 4 ? 32 : 16, U = GROUPED ? 4 : 2;
  __shared__ float part[WO_BLOCK / 32][NT * 4 * 32];
  const WoMmaPlace at = wo_mma_place<MT>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  const i64 N = a.N, K = a.K, n0 = at.n0, m0 = at.m0;
  const S* x = (const S*)a.x + m0 * K;
  const signed char* w = (const signed char*)a.w;
  const S* sc = (const S*)a.scale;
  const S* zp = (const S*)a.zero;
  // Weight rows past N read row N - 1, rows of x past M row M - 1 (their sums are dropped).
  i64 nr[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) nr[h] = n0 + h * 8 + g8 < N ? n0 + h * 8 + g8 : N - 1;
  const S* xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xr[t] = x + (t * 8 + g8 < M ? t * 8 + g8 : M - 1) * K;
  float c[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) c[t][i] = 0.0f;
  const i64 pieces = K / VALS, steps = (pieces + 3) / 4;
#if __CUDA_ARCH__ >= 800
  if (n0 < N) {
    for (i64 s0 = ws; s0 < steps; s0 += (i64)U * split) {
      // U steps' weight loads in flight together; a lane past the last piece multiplies zeros.
      V16 wv[U][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 piece = (s0 + (i64)u * split) * 4 + t4;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          wv[u][h] = piece < pieces ? wo_stream(w + nr[h] * a.row_bytes + piece * 16) : V16{0u, 0u, 0u, 0u};
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (s0 + (i64)u * split >= steps) break;  // the same for every lane of the warp
        const i64 piece = (s0 + (i64)u * split) * 4 + t4, k0 = piece * VALS;
        const bool live = piece < pieces;
        // GROUPED: the step's group is every lane's (lanes past the last piece take the first's).
        const i64 grp = (GROUPED ? (s0 + (i64)u * split) * 4 * VALS : k0) / a.group;
        float s[2] = {0.0f, 0.0f}, z[2] = {0.0f, 0.0f};
        if (GROUPED || live) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            s[h] = T::get(sc, nr[h] * a.groups + grp);
            z[h] = zp ? T::get(zp, nr[h] * a.groups + grp) : 0.0f;
          }
        }
        float cq[NT][4], cs[NT][4];
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) cq[t][i] = cs[t][i] = 0.0f;
#pragma unroll
        for (int j = 0; j < VALS / 8; ++j) {
          unsigned lo[4], hi[4];  // weight rows g and g + 8
          if constexpr (GROUPED && BITS == 4) {
            wo_raw4<T::kBf16>(wv[u][0], j, lo);
            wo_raw4<T::kBf16>(wv[u][1], j, hi);
          } else if constexpr (GROUPED) {
            wo_bytes8<BITS, T::kBf16>(wv[u][0], j, lo);
            wo_bytes8<BITS, T::kBf16>(wv[u][1], j, hi);
          } else {
            wo_dequantize8<BITS, T::kBf16>(wv[u][0], j, s[0], -z[0] * s[0], lo);
            wo_dequantize8<BITS, T::kBf16>(wv[u][1], j, s[1], -z[1] * s[1], hi);
          }
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            const V16 xv = live ? *(const V16*)(xr[t] + k0 + j * 8) : V16{0u, 0u, 0u, 0u};
            unsigned b[4];
            if constexpr (GROUPED) {
              wo_pair_x<BITS>(xv, b);
              wo_scale_x<BITS, T::kBf16>(b);
            } else {
              b[0] = xv.x, b[1] = xv.y, b[2] = xv.z, b[3] = xv.w;
            }
            float (&acc)[4] = GROUPED ? cq[t] : c[t];
            mma16816_f32<T::kBf16>(acc, lo[0], hi[0], lo[1], hi[1], b[0], b[1]);
            mma16816_f32<T::kBf16>(acc, lo[2], hi[2], lo[3], hi[3], b[2], b[3]);
            if (GROUPED && (BITS == 4 || zp)) {  // sum x: raw int4 values' offset, the zero points
              const unsigned one = T::kBf16 ? 0x3f803f80u : 0x3c003c00u;
              mma16816_f32<T::kBf16>(cs[t], one, one, one, one, b[0], b[1]);
              mma16816_f32<T::kBf16>(cs[t], one, one, one, one, b[2], b[3]);
            }
          }
        }
        if constexpr (GROUPED) {
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              typedef WoFragments<BITS, T::kBf16> F;
              const float sum = fmaf(-(z[i >> 1] + F::kOffset) * F::kCs, cs[t][i], cq[t][i] * F::kInv);
              c[t][i] = fmaf(s[i >> 1], sum, c[t][i]);
            }
        }
      }
    }
  }
#else
  // No mma.m16n8k16 before sm_80: each lane sums its own entries, one product at a time.
  if (n0 < N)
    for (i64 k = ws; k < K; k += split) {
      const i64 grp = k / a.group;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 n = nr[i >> 1];
        const float zf = zp ? T::get(zp, n * a.groups + grp) : 0.0f;
        const float wf = (wo_value<BITS>(w + n * a.row_bytes, k) - zf) * T::get(sc, n * a.groups + grp);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const int col = t * 8 + 2 * t4 + (i & 1);
          c[t][i] = fmaf(T::get(x, (i64)(col < M ? col : M - 1) * K + k), wf, c[t][i]);
        }
      }
    }
#endif
  if (!split_sum_lanes<NT * 4>(&c[0][0], part, split, g, ws)) return;
  S* out = (S*)a.out + m0 * N;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const i64 n = n0 + (i >> 1) * 8 + g8;
      const int m = t * 8 + 2 * t4 + (i & 1);
      if (m < M && n < N) T::put(out, m * N + n, c[t][i]);
    }
}

#define WO_RING_SLOTS 12  // 16-byte pieces of the ring a lane holds (48 KiB a block: the most without opt-in)

DEVI void wo_cp16(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
DEVI void wo_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> DEVI void wo_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// The grouped tile of 8 rows of x (a decode step's, B1 to B8) with the weight streamed through a
// ring in shared memory: each lane copies its own pieces of a step P - 1 steps ahead with cp.async
// and reads back only what it copied (no barrier), and loads x and the scales of the next step
// while multiplying this one, so the weight's loads stay in flight without registers to hold them.
// A warp group takes 8 H weight rows, H / 2 tiles of 16: lane (g, t) holds piece t of a step of
// rows g + 8h (h < H), and every tile meets the same fragments of x (loaded, paired and summed once
// for all of them). Where the weight is a program constant (wo_early) the first steps' copies go out
// before the entry point waits for the previous kernel. Fragments and sums as in wo_mma's grouped
// path, int4 values raw (wo_raw4); K a multiple of a step (the caller checks), so no lane is past
// the last piece. Gate and up of Llama-3-8B in int4 at one row on an H200, timed alone
// (scripts/weight_only_bench.cu): 35.4 us on the CUDA-core rows, 36.0 us on this ring with 16 rows
// a warp group and two-instruction masks, 28.2 us here.
template <class T, int BITS, int H>
DEVI void wo_mma_ring(const WoArgs& a) {
  typedef typename T::S S;
  constexpr int VALS = BITS == 4 ? 32 : 16, TT = H / 2, P = WO_RING_SLOTS / H, RING = P - 1;
  __shared__ V16 ring[P][H][WO_BLOCK];
  // The split's partial sums reuse the ring once every copy has landed and been read.
  float (*part)[TT * 4 * 32] = reinterpret_cast<float (*)[TT * 4 * 32]>(&ring[0][0][0]);
  static_assert(sizeof(ring) >= sizeof(float) * TT * 4 * 32 * (WO_BLOCK / 32), "the ring holds the partial sums");
  const WoMmaPlace at = wo_mma_place<WO_MMA_ROWS>(a, 8 * H);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  const i64 N = a.N, K = a.K, n0 = at.n0, m0 = at.m0;
  const bool zp = a.zero != 0;
  // Rows past N read row N - 1, rows of x past M row M - 1 (their sums are dropped). Row h's bytes
  // and scales at 32-bit offsets from row n0's (fewer registers than a pointer a row).
  const i64 n_first = n0 < N ? n0 : N - 1;
  const signed char* w0 = (const signed char*)a.w + n_first * a.row_bytes + t4 * 16;
  const S* s0 = (const S*)a.scale + n_first * a.groups;
  const S* z0 = zp ? (const S*)a.zero + n_first * a.groups : s0;
  int wo[H], so[H];
#pragma unroll
  for (int h = 0; h < H; ++h) {
    const i64 n = n0 + h * 8 + g8 < N ? n0 + h * 8 + g8 : N - 1;
    wo[h] = (int)((n - n_first) * a.row_bytes);
    so[h] = (int)((n - n_first) * a.groups);
  }
  const S* xr = (const S*)a.x + (m0 + (g8 < M ? g8 : M - 1)) * K + t4 * VALS;
  // This warp's steps: every split-th from ws; a step's group by a shift where steps per group
  // is a power of two (32-bit math: K and the steps are far below 2^31 values).
  const int steps = (int)(K / (4 * VALS)), gs = (int)(a.group / (4 * VALS));
  const int gshift = (gs & (gs - 1)) == 0 ? __ffs(gs) - 1 : -1;
  const int mine = n0 < N && ws < steps ? (steps - ws + split - 1) / split : 0;
  auto copy = [&](int i) {  // step i's pieces into slot i % P; a group per call, empty or not
    if (i < mine) {
      const int off = (ws + i * split) * 64;
#pragma unroll
      for (int h = 0; h < H; ++h) wo_cp16(&ring[i % P][h][threadIdx.x], w0 + wo[h] + off);
    }
    wo_commit();
  };
  V16 xn[VALS / 8];
  float sn[H], zn[H];
  auto fetch = [&](int i) {  // x and the scales of step i
    const int s = ws + i * split, grp = gshift >= 0 ? s >> gshift : s / gs;
#pragma unroll
    for (int j = 0; j < VALS / 8; ++j) xn[j] = *(const V16*)(xr + s * 4 * VALS + j * 8);
#pragma unroll
    for (int h = 0; h < H; ++h) {
      sn[h] = T::get(s0, so[h] + grp);
      zn[h] = zp ? T::get(z0, so[h] + grp) : 0.0f;
    }
  };
  // A constant weight's first steps go out before the wait, arriving while the previous kernel ends.
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < RING; ++i) copy(i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < RING; ++i) copy(i);
  if (mine > 0) fetch(0);
  float c[TT][4];
#pragma unroll
  for (int t = 0; t < TT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[t][e] = 0.0f;
  for (int i = 0; i < mine; ++i) {
    copy(i + RING);
    V16 xv[VALS / 8];
#pragma unroll
    for (int j = 0; j < VALS / 8; ++j) xv[j] = xn[j];
    float s[H], z[H];
#pragma unroll
    for (int h = 0; h < H; ++h) s[h] = sn[h], z[h] = zn[h];
    if (i + 1 < mine) fetch(i + 1);
    wo_wait<RING>();  // step i's group has landed
    V16 wv[H];
#pragma unroll
    for (int h = 0; h < H; ++h) wv[h] = ring[i % P][h][threadIdx.x];
    float cq[TT][4], cs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int t = 0; t < TT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) cq[t][e] = 0.0f;
#pragma unroll
    for (int j = 0; j < VALS / 8; ++j) {
      unsigned b[4];
      wo_pair_x<BITS>(xv[j], b);
      wo_scale_x<BITS, T::kBf16>(b);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        unsigned lo[4], hi[4];  // weight rows g + 16t and g + 16t + 8
        if constexpr (BITS == 4) {
          wo_raw4<T::kBf16>(wv[2 * t], j, lo);
          wo_raw4<T::kBf16>(wv[2 * t + 1], j, hi);
        } else {
          wo_bytes8<BITS, T::kBf16>(wv[2 * t], j, lo);
          wo_bytes8<BITS, T::kBf16>(wv[2 * t + 1], j, hi);
        }
        mma16816_f32<T::kBf16>(cq[t], lo[0], hi[0], lo[1], hi[1], b[0], b[1]);
        mma16816_f32<T::kBf16>(cq[t], lo[2], hi[2], lo[3], hi[3], b[2], b[3]);
      }
      if (BITS == 4 || zp) {  // sum x (every row of A ones): the raw values' offset, and the zero points
        const unsigned one = T::kBf16 ? 0x3f803f80u : 0x3c003c00u;
        mma16816_f32<T::kBf16>(cs, one, one, one, one, b[0], b[1]);
        mma16816_f32<T::kBf16>(cs, one, one, one, one, b[2], b[3]);
      }
    }
    typedef WoFragments<BITS, T::kBf16> F;
#pragma unroll
    for (int t = 0; t < TT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = 2 * t + (e >> 1);
        c[t][e] = fmaf(s[h], fmaf(-(z[h] + F::kOffset) * F::kCs, cs[e], cq[t][e] * F::kInv), c[t][e]);
      }
  }
  wo_wait<0>();
  if (split > 1) __syncthreads();  // every lane's copies landed and read: the ring becomes `part`
  if (!split_sum_lanes<TT * 4>(&c[0][0], part, split, g, ws)) return;
  S* out = (S*)a.out + m0 * N;
#pragma unroll
  for (int t = 0; t < TT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const i64 n = n0 + (2 * t + (e >> 1)) * 8 + g8;
      const int m = 2 * t4 + (e & 1);
      if (m < M && n < N) T::put(out, m * N + n, c[t][e]);
    }
}

// The entry point's body: from WO_MMA_ROWS rows of x, the tensor-core tiles where the launch chose
// them (vec and mma_split: its grid counts 16 weight rows a warp group), grouped where a step of 4
// pieces lies in one group; else the CUDA-core rows. The tile of 8 rows through the shared-memory
// ring is an entry point of its own (wo_mma_ring: the launch's aligned form, where K and the group
// are whole steps), so that neither's registers and shared memory bound the other's occupancy.
template <class T, int BITS, int MT, int R>
DEVI void wo_dot(const WoArgs& a) {
  if constexpr (T::kMma && MT >= WO_MMA_ROWS) {
    if (a.vec && a.mma_split) {
      constexpr i64 kStepValues = 4 * (BITS == 4 ? 32 : 16);
      if (a.group % kStepValues == 0) wo_mma<T, BITS, MT, true>(a);
      else wo_mma<T, BITS, MT, false>(a);
      return;
    }
  }
  wo_rows<T, BITS, MT, R>(a);
}

// The weight dequantized into a.out [N, K] of x's dtype ((q - z) s in float32, rounded once, as the
// CUDA-core rows compute each value), for many rows of x: cuBLASLt's GEMM then reads it from the
// program's workspace (cuda_weight_only_dot.cc), reading the packed weight once instead of once a
// tile of rows. Where the addresses are 16-byte aligned (vec) and K and the group are multiples of
// 8, the weight is one run of 8-value chunks over every lane of the grid (a block a row left half
// its lanes idle at K = 4096): a lane turns each of WO_DQ_CHUNKS chunks a grid's width apart (4 or
// 8 bytes, a warp's loads and 16-byte stores contiguous) into one 16-byte store (two for float32)
// with its group's scale and zero point, every chunk's loads issued before the first is used, in
// 32-bit index math (64-bit divisions a chunk made a flat run slower than the rows). Else a block a
// weight row, one value a lane.
#define WO_DQ_CHUNKS 4
template <class T, int BITS>
DEVI void wo_dequantize(const WoArgs& a) {
  typedef typename T::S S;
  const i64 N = a.N, K = a.K;
  const signed char* w = (const signed char*)a.w;
  const S* sc = (const S*)a.scale;
  const S* zp = (const S*)a.zero;
  if (a.vec && K % 8 == 0 && a.group % 8 == 0 && N * (K / 8) < (i64{1} << 31)) {
    constexpr int U = WO_DQ_CHUNKS, CB = BITS == 4 ? 4 : 8;  // CB: a chunk's bytes
    const unsigned cpr = (unsigned)(K / 8), total = (unsigned)(N * cpr), cpg = (unsigned)(a.group / 8);
    const int gshift = (cpg & (cpg - 1)) == 0 ? __ffs(cpg) - 1 : -1;
    const unsigned row_bytes = (unsigned)a.row_bytes, groups = (unsigned)a.groups, width = gridDim.x * blockDim.x;
    for (unsigned c0 = blockIdx.x * blockDim.x + threadIdx.x; c0 < total; c0 += U * width) {
      uint2 raw[U];
      float s[U], z[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const unsigned c = c0 + u * width, n = c < total ? c / cpr : 0, kc = c < total ? c - n * cpr : 0;
        const unsigned grp = n * groups + (gshift >= 0 ? kc >> gshift : kc / cpg);
        const signed char* p = w + (i64)n * row_bytes + kc * CB;  // chunk 0 where past the end: read, unused
        raw[u] = BITS == 4 ? make_uint2(*(const unsigned*)p, 0u) : *(const uint2*)p;
        s[u] = T::get(sc, grp), z[u] = zp ? T::get(zp, grp) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const unsigned c = c0 + u * width;
        if (c >= total) break;
        float q[8];
        if (BITS == 4) {
#pragma unroll
          for (int e = 0; e < 8; ++e) q[e] = (float)((int)((raw[u].x >> (4 * e)) & 15u) - 8);  // nibble e: value e
        } else {
#pragma unroll
          for (int e = 0; e < 8; e += 2) {
            const unsigned word = e < 4 ? raw[u].x : raw[u].y;
            if (BITS == WO_E4M3) {
              wo_e4m3x2(word, (e >> 1) & 1, q[e], q[e + 1]);
            } else {
              q[e] = (float)(signed char)((word >> (8 * (e & 3))) & 0xffu);
              q[e + 1] = (float)(signed char)((word >> (8 * (e & 3) + 8)) & 0xffu);
            }
          }
        }
        alignas(16) S o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) T::put(o, e, (q[e] - z[u]) * s[u]);
        S* out = (S*)a.out + (i64)c * 8;  // row n's chunk kc of [N, K]: 8 (n cpr + kc) = 8 c
#pragma unroll
        for (int v = 0; v < (int)sizeof(o) / 16; ++v) ((V16*)out)[v] = ((const V16*)o)[v];
      }
    }
    return;
  }
  for (i64 n = blockIdx.x; n < N; n += gridDim.x) {
    const signed char* wr = w + n * a.row_bytes;
    const S* sr = sc + n * a.groups;
    const S* zr = zp ? zp + n * a.groups : sr;
    S* out = (S*)a.out + n * K;
    for (i64 k = threadIdx.x; k < K; k += blockDim.x) {
      const i64 grp = k / a.group;
      const float s = T::get(sr, grp), z = zp ? T::get(zr, grp) : 0.0f;
      T::put(out, k, (wo_value<BITS>(wr, k) - z) * s);
    }
  }
}

// The weight-only dot module (weight_only_dot_module_source() in cuda_weight_only_dot_source.cc,
// after device_prelude.cuh): kWeightOnlyDot, out[r, n] = sum_k x[r, k] (q[n, k] - z[n, g]) s[n, g]
// with g = k / group, the weight read packed (int8, or two int4 values a byte: k even in the low
// nibble, each nibble u meaning u - 8) and dequantized in registers; float32 sums. Bound by reading
// the packed weight for a few rows of x (a decode step), so every lane streams 16-byte pieces of
// R weight rows (a warp's load instruction reads 512 contiguous bytes of a row), turns each byte
// into a float with one byte permute and one subtraction (2^23 + u as a float's bits, minus
// 2^23 + offset: exact), and multiplies them with x, which stays in the L1. A piece lies inside
// one group, so its products are summed first and scaled once: s (sum x q - z sum x). `split` warps
// of a block share R rows, each taking every split-th piece, and add their sums through shared
// memory. Rows of x come in tiles of MT (a block per tile and group of weight rows), so any number
// of rows runs, each tile reading the weight again. Pieces need K and the group to be multiples
// of the values a piece holds (32 at 4 bits, 16 at 8) and 16-byte aligned addresses; otherwise
// every lane takes single values (any K, any group). The C++ side appends the entry point.

// Words, in this order (cuda_weight_only_dot.cc fills them).
struct WoArgs {
  i64 out, x, w, scale, zero;  // out [rows, N], x [rows, K], w [N, row_bytes], scale and zero [N, groups] (zero 0: none)
  i64 rows, N, K, row_bytes, groups, group;
  i64 split;     // warps summing one group of weight rows (1, 2, 4 or 8: divides the block's 8 warps)
  i64 n_blocks;  // blocks along N; blockIdx.x / n_blocks is the block's tile of rows of x
  i64 vec;       // 1: every address 16-byte aligned (the launch checks); the sizes are checked here
};

#define WO_BLOCK 256

struct WoHalf {
  typedef unsigned short S;
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

// The VALS values of one 16-byte piece as exact floats q: BITS 4 holds 32 (nibble u -> u - 8),
// BITS 8 holds 16 (signed bytes).
template <int BITS>
DEVI void wo_dequantize(const V16& v, float (&q)[BITS == 4 ? 32 : 16]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  if (BITS == 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned lo = u[j] & 0x0f0f0f0fu, hi = (u[j] >> 4) & 0x0f0f0f0fu;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        q[8 * j + 2 * b] = wo_byte(lo, b) - 8388616.0f;  // 2^23 + 8
        q[8 * j + 2 * b + 1] = wo_byte(hi, b) - 8388616.0f;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned b8 = u[j] ^ 0x80808080u;  // q + 128 per byte
#pragma unroll
      for (int b = 0; b < 4; ++b) q[4 * j + b] = wo_byte(b8, b) - 8388736.0f;  // 2^23 + 128
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
      const i64 pieces = K / VALS;
      for (i64 c = ws * 32 + lane; c < pieces; c += step) {
        V16 wv[R];
#pragma unroll
        for (int r = 0; r < R; ++r) wv[r] = wo_stream(w + nr[r] * a.row_bytes + c * 16);
        const i64 k0 = c * VALS, grp = k0 / a.group;
        // x's sums over the piece (for the zero points) and, with one row, its values, loaded once.
        float xs[MT];
        float x1[MT == 1 ? VALS : 1];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          xs[m] = 0.0f;
          if (m >= M) continue;
#pragma unroll
          for (int p = 0; p < VALS / 8; ++p) {
            float f[8];
            T::load8(x + m * K + k0 + p * 8, f);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              xs[m] += f[j];
              if (MT == 1) x1[p * 8 + j] = f[j];
            }
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float q[VALS];
          wo_dequantize<BITS>(wv[r], q);
          const float s = T::get(sc, nr[r] * a.groups + grp), z = zp ? T::get(zp, nr[r] * a.groups + grp) : 0.0f;
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m >= M) break;
            float p = 0.0f;
            if (MT == 1) {
#pragma unroll
              for (int j = 0; j < VALS; ++j) p = fmaf(x1[j], q[j], p);
            } else {
#pragma unroll
              for (int pc = 0; pc < VALS / 8; ++pc) {
                float f[8];
                T::load8(x + m * K + k0 + pc * 8, f);
#pragma unroll
                for (int j = 0; j < 8; ++j) p = fmaf(f[j], q[pc * 8 + j], p);
              }
            }
            acc[r][m] = fmaf(s, p - z * xs[m], acc[r][m]);
          }
        }
      }
    } else {
      for (i64 k = ws * 32 + lane; k < K; k += step) {
        const i64 grp = k / a.group;
        float wf[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int byte = w[nr[r] * a.row_bytes + (BITS == 4 ? (k >> 1) : k)];
          const int q = BITS == 4 ? ((((unsigned)byte & 0xffu) >> ((k & 1) * 4)) & 15) - 8 : byte;
          const float s = T::get(sc, nr[r] * a.groups + grp), z = zp ? T::get(zp, nr[r] * a.groups + grp) : 0.0f;
          wf[r] = ((float)q - z) * s;
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
  // Every lane gets the warp's sums; lane (r * MT + m) % 32 owns entry (r, m) from here on.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], o);
  if (split > 1) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m)
        if (((r * MT + m) & 31) == lane) part[warp][r * MT + m] = acc[r][m];
    __syncthreads();
    if (ws != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m)
        if (((r * MT + m) & 31) == lane) {
          float s = 0.0f;
          for (int j = 0; j < split; ++j) s += part[g * split + j][r * MT + m];
          acc[r][m] = s;
        }
  }
  S* out = (S*)a.out + m0 * N;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (((r * MT + m) & 31) == lane && m < M && n0 + r < N) T::put(out, m * N + n0 + r, acc[r][m]);
}

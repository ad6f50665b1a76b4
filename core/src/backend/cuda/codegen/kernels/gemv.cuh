// The GEMV module (gemv_module_source() in cuda_gemv_source.cc, after device_prelude.cuh): kDot
// for a few rows of x, out[m, n] = act(sum_k x[m, k] w[n, k] + bias[n]) with the weight stored
// [N, K] (transpose_rhs), float16 or bfloat16 operands summed in float32. A decode step's products
// are bound by reading the weight once, so every warp streams whole rows of w with 16-byte loads
// (a lane takes every 32nd chunk of 8 elements: each load instruction reads 512 contiguous bytes)
// that bypass the L1, while x (a few KB) is read through it and reused for the warp's R rows of w.
// `split` warps of a block share one group of R rows, each summing every split-th chunk, and add
// their sums through shared memory (more warps per row when N alone cannot fill the GPU). No
// shared weight tiles, no allocation, no host synchronisation (CUDA graphs record the launch).
// The C++ side appends one entry point per (dtype, MT, R): MT >= M rows of x, R rows of w a group.
//
// From 8 rows of x on (MT >= GEMV_MMA_ROWS) the multiply-adds on CUDA cores would cost more time
// than the weight's bytes (8 per weight element, 2 bytes read), so those tiles run on tensor cores
// instead (gemv_mma): a group is R tiles of 16 rows of w, each lane streaming 16 contiguous bytes of
// two of them per step, fed to mma.m16n8k16 as they are (the sum over k is the same in any order,
// so the lane's 8 elements take its fragment slots, x's likewise: no shuffles, no shared memory).

// Words, in this order (cuda_gemv.cc fills them).
struct GemvArgs {
  i64 out, x, w, bias;  // out [M, N], x [M, K], w [N, K], bias [N] (0: none); all of the dtype
  i64 M, N, K;
  i64 act;    // rt::Activation: 0 none, 1 relu, 2 gelu
  i64 split;  // warps summing one group of rows (1, 2, 4 or 8: divides the block's 8 warps)
  i64 vec;    // 1: every address 16-byte aligned (the launch checks); K % 8 is checked here
  i64 early;  // 1: w is a constant of the program (no kernel writes it), so it may be read before
              // the wait for the previous kernel
};

#define GEMV_BLOCK 256
#define GEMV_MMA_ROWS 8  // MT from which the tensor-core kernel runs (cuda_gemv.h: kGemvMmaRows)

struct GemvHalf {
  static constexpr bool kBf16 = false;
  static DEVI float get(unsigned short v) { return h2f(v); }
  static DEVI unsigned short put(float f) { return f2h(f); }
  static DEVI float lo(unsigned u) { return h2f((unsigned short)(u & 0xffffu)); }
  static DEVI float hi(unsigned u) { return h2f((unsigned short)(u >> 16)); }
};
struct GemvBf16 {
  static constexpr bool kBf16 = true;
  static DEVI float get(unsigned short v) { return b2f(v); }
  static DEVI unsigned short put(float f) { return f2b(f); }
  static DEVI float lo(unsigned u) { return __uint_as_float(u << 16); }
  static DEVI float hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
};

// 16 bytes of the weight: read once, so kept out of the L1 (x stays there).
DEVI V16 gemv_stream(const unsigned short* p) {
  V16 v;
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#endif
  return v;
}
DEVI V16 gemv_cached(const unsigned short* p) {
  V16 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// acc[r] += the 8 products of one x chunk with one w chunk.
template <class T> DEVI float gemv_dot8(float acc, const float (&xf)[8], const V16& w) {
  acc = fmaf(xf[0], T::lo(w.x), acc);
  acc = fmaf(xf[1], T::hi(w.x), acc);
  acc = fmaf(xf[2], T::lo(w.y), acc);
  acc = fmaf(xf[3], T::hi(w.y), acc);
  acc = fmaf(xf[4], T::lo(w.z), acc);
  acc = fmaf(xf[5], T::hi(w.z), acc);
  acc = fmaf(xf[6], T::lo(w.w), acc);
  acc = fmaf(xf[7], T::hi(w.w), acc);
  return acc;
}

// U chunks of each of the R rows are loaded before any is used (R * U loads in flight per lane).
template <int R, int U>
DEVI void gemv_load(V16 (&wv)[U][R], const unsigned short* const (&wr)[R], i64 c, i64 step) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = gemv_stream(wr[r] + (c + u * step) * 8);
}
template <class T, int MT, int R, int U>
DEVI void gemv_use(float (&acc)[R][MT], const V16 (&wv)[U][R], const unsigned short* x, int M, i64 K, i64 c,
                   i64 step) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= M) break;
      const V16 xv = gemv_cached(x + m * K + (c + u * step) * 8);
      const float xf[8] = {T::lo(xv.x), T::hi(xv.x), T::lo(xv.y), T::hi(xv.y),
                           T::lo(xv.z), T::hi(xv.z), T::lo(xv.w), T::hi(xv.w)};
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][m] = gemv_dot8<T>(acc[r][m], xf, wv[u][r]);
    }
}
template <class T, int MT, int R, int U>
DEVI void gemv_chunks(float (&acc)[R][MT], const unsigned short* const (&wr)[R], const unsigned short* x, int M,
                      i64 K, i64 c, i64 step) {
  V16 wv[U][R];
  gemv_load<R, U>(wv, wr, c, step);
  gemv_use<T, MT, R, U>(acc, wv, x, M, K, c, step);
}

// The CUDA-core rows. Its entry point does not wait for the previous kernel first: this does, once
// it has asked for its first A steps of U chunks of w where w is a constant of the program
// (a.early), so that they arrive while the previous kernel ends (a decode step's weights come from
// memory, not L2). A is 1 unless the module says otherwise (TRIPY_GEMV_AHEAD, to compare).

template <class T, int MT, int R, int A = 1>
DEVI void gemv_rows(const GemvArgs& a) {
  __shared__ float part[GEMV_BLOCK / 32][R * MT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int S = (int)a.split, groups = (GEMV_BLOCK / 32) / S, g = warp / S, ws = warp % S;
  const int M = (int)a.M;
  const i64 N = a.N, K = a.K;
  const i64 n0 = ((i64)blockIdx.x * groups + g) * R;
  const unsigned short* x = (const unsigned short*)a.x;
  const unsigned short* w = (const unsigned short*)a.w;
  // Rows past N read row N - 1 (their sums are dropped), so every lane runs the same loop.
  const unsigned short* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + (n0 + r < N ? n0 + r : N - 1) * K;
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;
  const i64 step = 32 * S;
  constexpr int U = R >= 4 ? 1 : 4 / R;
  const bool wide = a.vec && (K & 7) == 0;
  const i64 chunks = K >> 3;
  i64 c = ws * 32 + lane;
  V16 first[A][U][R];
  const bool ahead = a.early && n0 < N && wide && c + (A * U - 1) * step < chunks;
  if (ahead)
#pragma unroll
    for (int s = 0; s < A; ++s) gemv_load<R, U>(first[s], wr, c + s * U * step, step);
  enter_after_previous();
  if (n0 < N) {
    if (wide) {
      if (ahead)
#pragma unroll
        for (int s = 0; s < A; ++s) {
          gemv_use<T, MT, R, U>(acc, first[s], x, M, K, c, step);
          c += U * step;
        }
      for (; c + (U - 1) * step < chunks; c += U * step) gemv_chunks<T, MT, R, U>(acc, wr, x, M, K, c, step);
      for (; c < chunks; c += step) gemv_chunks<T, MT, R, 1>(acc, wr, x, M, K, c, step);
    } else {
      for (i64 k = ws * 32 + lane; k < K; k += step) {
        float wf[R];
#pragma unroll
        for (int r = 0; r < R; ++r) wf[r] = T::get(wr[r][k]);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (m >= M) break;
          const float xv = T::get(x[m * K + k]);
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r][m] = fmaf(xv, wf[r], acc[r][m]);
        }
      }
    }
  }
  // Lane (r * MT + m) % 32 owns entry (r, m) of the group's sums from here on.
  if (!split_sum_entries<R * MT>(&acc[0][0], part, S, g, ws)) return;
  unsigned short* out = (unsigned short*)a.out;
  const unsigned short* bias = (const unsigned short*)a.bias;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (((r * MT + m) & 31) == lane && m < M && n0 + r < N) {
        float v = acc[r][m];
        if (bias) v += T::get(bias[n0 + r]);
        out[m * N + n0 + r] = T::put(activate(a.act, v));
      }
}

// Elements k .. k + 7 of a row of K (zeros past K): one 16-byte load where `vec` (the launch's
// alignment) and K allow, else element by element.
template <bool STREAM> DEVI V16 gemv_load8(const unsigned short* row, i64 k, i64 K, bool vec) {
  if (vec && k + 8 <= K) return STREAM ? gemv_stream(row + k) : gemv_cached(row + k);
  unsigned short e[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = k + i < K ? row[k + i] : (unsigned short)0;
  return V16{e[0] | ((unsigned)e[1] << 16), e[2] | ((unsigned)e[3] << 16), e[4] | ((unsigned)e[5] << 16),
             e[6] | ((unsigned)e[7] << 16)};
}

// MT rows of x (NT tiles of 8) against R tiles of 16 rows of w per group of `split` warps. Lane
// (g, t) reads elements [32 s + 8 t, 32 s + 8 t + 8) of w rows g and g + 8 of each tile and of x
// rows g, g + 8, ... at step s; its first four elements are slots {2t, 2t + 1, 2t + 8, 2t + 9} of
// one mma, the other four of a second. The accumulator c[r][n] holds out rows (of w) g and g + 8,
// columns (rows of x) 2t and 2t + 1.
template <class T, int MT, int R>
DEVI void gemv_mma(const GemvArgs& a) {
  constexpr int NT = MT / 8;
  __shared__ float part[GEMV_BLOCK / 32][R * NT * 4 * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, t4 = lane & 3;
  const int S = (int)a.split, groups = (GEMV_BLOCK / 32) / S, g = warp / S, ws = warp % S;
  const int M = (int)a.M;
  const i64 N = a.N, K = a.K;
  const i64 n0 = ((i64)blockIdx.x * groups + g) * 16 * R;
  const unsigned short* x = (const unsigned short*)a.x;
  const unsigned short* w = (const unsigned short*)a.w;
  const bool vec = a.vec != 0 && (K & 7) == 0;  // rows start 16 bytes apart too
  // Rows past N read row N - 1 and rows of x past M read row M - 1 (their sums are dropped).
  const unsigned short* wr[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 n = n0 + r * 16 + h * 8 + g8;
      wr[r][h] = w + (n < N ? n : N - 1) * K;
    }
  const unsigned short* xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xr[t] = x + (t * 8 + g8 < M ? t * 8 + g8 : M - 1) * K;
  float c[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[r][t][i] = 0.0f;
#if __CUDA_ARCH__ >= 800
  if (n0 < N) {
    constexpr int U = R >= 2 ? 2 : 4;  // steps whose loads are in flight together
    const i64 steps = (K + 31) / 32;
    for (i64 s0 = ws; s0 < steps; s0 += (i64)U * S) {
      V16 wv[U][R][2], xv[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const i64 k = (s0 + (i64)u * S) * 32 + t4 * 8;
        if (s0 + (i64)u * S >= steps) break;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int h = 0; h < 2; ++h) wv[u][r][h] = gemv_load8<true>(wr[r][h], k, K, vec);
#pragma unroll
        for (int t = 0; t < NT; ++t) xv[u][t] = gemv_load8<false>(xr[t], k, K, vec);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (s0 + (i64)u * S >= steps) break;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            const V16 &lo = wv[u][r][0], &hi = wv[u][r][1], &b = xv[u][t];
            mma16816_f32<T::kBf16>(c[r][t], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
            mma16816_f32<T::kBf16>(c[r][t], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
          }
      }
    }
  }
#else
  // No mma.m16n8k16 before sm_80: each lane sums its own entries, one product at a time.
  if (n0 < N)
    for (i64 k = ws; k < K; k += S)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int col = t * 8 + 2 * t4 + (i & 1);
            const float xk = T::get(x[(col < M ? col : M - 1) * K + k]);
            c[r][t][i] = fmaf(T::get(wr[r][i >> 1][k]), xk, c[r][t][i]);
          }
#endif
  if (!split_sum_lanes<R * NT * 4>(&c[0][0][0], part, S, g, ws)) return;
  unsigned short* out = (unsigned short*)a.out;
  const unsigned short* bias = (const unsigned short*)a.bias;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 n = n0 + r * 16 + (i >> 1) * 8 + g8;
        const int m = t * 8 + 2 * t4 + (i & 1);
        if (m < M && n < N) {
          float v = c[r][t][i];
          if (bias) v += T::get(bias[n]);
          out[m * N + n] = T::put(activate(a.act, v));
        }
      }
}

// The tensor-core tiles with the weight streamed by the tensor memory accelerator (sm_90, the
// build's timed choice beside gemv_mma): gemv_mma's lanes read 64 bytes of a row a step, which
// keep too few bytes in flight for the memory's bandwidth (8 rows of x: 2.5 of 3.8 TB/s on an
// H200). Here each warp of a group of `split` takes contiguous boxes of 16 rows x 64 elements
// (2 KB, one copy instruction from lane 0) through a ring of GEMV_TMA_STAGES slots in shared
// memory; the tensor map's 128-byte swizzle puts 16-byte chunk c of box row r at c ^ (r % 8), and
// lane (g, t) multiplies box rows rho(g) = g / 2 + 4 (g % 2) and 8 + rho(g) (a quarter warp's
// reads then meet 8 distinct bank groups), so its accumulator rows are w rows n0 + rho(g) and
// n0 + 8 + rho(g). Rows past N and elements past K arrive as zeros; x's chunks past K are zeros.
#define GEMV_TMA_STAGES 2

// The TMA form's arguments: GemvArgs' words, its own split and blocks along N (a fallback entry
// point reads the same words), and w's tensor map at word 16 (cuda_gemv.cc's kWordMap).
struct GemvTmaArgs {
  GemvArgs g;
  i64 split, n_blocks;
  i64 unused[3];
  TmaMap w_map;  // w as N rows of 2K bytes, boxes of 16 rows x 128 bytes, swizzled 128B
};

template <class T, int NT>
DEVI void gemv_tma(const GemvTmaArgs& a) {
#if __CUDA_ARCH__ >= 900
  constexpr int W = GEMV_BLOCK / 32, S = GEMV_TMA_STAGES, BOX = 2048;
  __shared__ __align__(1024) unsigned char ring[W][S][BOX];
  __shared__ float part[W][NT * 4 * 32];
  __shared__ u64 bars[W][S];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, t4 = lane & 3;
  const int split = (int)a.split, wg = warp / split, ws = warp % split;
  const i64 n0 = ((i64)blockIdx.x * (W / split) + wg) * 16, N = a.g.N, K = a.g.K;
  const int M = (int)a.g.M, boxes = (int)((K + 63) / 64);
  const int per = (boxes + split - 1) / split, b0 = ws * per, nb = max(0, min(boxes, b0 + per) - b0);
  const bool live = n0 < N && nb > 0;
  if (lane == 0)
    for (int s = 0; s < S; ++s) tma_barrier_init(&bars[warp][s]);
  __syncwarp();
  auto fill = [&](int i) {  // box b0 + i into slot i % S (lane 0)
    u64* bar = &bars[warp][i % S];
    tma_arm(bar, BOX);
    tma_load_2d(&ring[warp][i % S][0], &a.w_map, (b0 + i) * 128, (int)n0, bar);
  };
  // A constant weight's first boxes go out before the wait for the previous kernel.
  if (a.g.early && live && lane == 0)
    for (int i = 0; i < S && i < nb; ++i) fill(i);
  enter_after_previous();
  if (!a.g.early && live && lane == 0)
    for (int i = 0; i < S && i < nb; ++i) fill(i);
  const int rho = (g8 >> 1) + 4 * (g8 & 1);
  const int at0 = rho * 128 + (t4 ^ rho) * 16, at1 = rho * 128 + ((4 + t4) ^ rho) * 16;
  const unsigned short* xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xr[t] = (const unsigned short*)a.g.x + (t * 8 + g8 < M ? t * 8 + g8 : M - 1) * K + t4 * 8;
  float c[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[t][e] = 0.0f;
  if (live)
    for (int i = 0; i < nb; ++i) {
      const i64 k0 = (i64)(b0 + i) * 64;
      V16 xv[2][NT];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int t = 0; t < NT; ++t)
          xv[j][t] = k0 + j * 32 + t4 * 8 < K ? gemv_cached(xr[t] + k0 + j * 32) : V16{0u, 0u, 0u, 0u};
      tma_wait(&bars[warp][i % S], (i / S) & 1);
      const unsigned char* box = &ring[warp][i % S][0];
      const V16 w[2][2] = {{lds16(box + at0), lds16(box + at0 + 1024)}, {lds16(box + at1), lds16(box + at1 + 1024)}};
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const V16 &lo = w[j][0], &hi = w[j][1], &b = xv[j][t];
          mma16816_f32<T::kBf16>(c[t], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
          mma16816_f32<T::kBf16>(c[t], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
        }
      __syncwarp();  // every lane's reads of the slot are done (the mmas used them)
      if (lane == 0 && i + S < nb) {
        tma_reuse();
        fill(i + S);
      }
    }
  if (!split_sum_lanes<NT * 4>(&c[0][0], part, split, wg, ws)) return;
  unsigned short* out = (unsigned short*)a.g.out;
  const unsigned short* bias = (const unsigned short*)a.g.bias;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const i64 n = n0 + (e >> 1) * 8 + rho;
      const int m = t * 8 + 2 * t4 + (e & 1);
      if (m < M && n < N) {
        float v = c[t][e];
        if (bias) v += T::get(bias[n]);
        out[m * N + n] = T::put(activate(a.g.act, v));
      }
    }
#endif
}

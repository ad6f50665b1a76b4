// The attention kernels' shared part and two of them (attention_source_body() in
// cuda_attention_source.cc). A module is device_prelude.cuh, the variant's macros
// (cuda_attention_generate.cc: ST, LOAD_T, STORE_T, MMA_T, CAUSAL, SCALE_POS, MASK_KIND, OFFSET_T,
// OFFSET_MAX, HAS_FLASH, HAS_GENERIC, HAS_SPLIT1, HAS_SPLIT16, SPLIT_RM, HD, WM), this file, then
// attention_split.cuh. MASK_KIND 3 (a causal offset) reads the offset through `mask` and bounds the
// keys each kernel visits by it.
//
// tripy_attention_flash: flash attention on tensor cores for float16/bfloat16 with head size 64 or
// 128 read with unit stride along the head dim. One CTA of 4 warps per (batch*head, block of BM
// queries); each warp owns 16 * WM query rows, its Q fragments live in registers for the whole
// key loop. K and V tiles of BN keys are staged in shared memory with cp.async (V_j loads while
// S = Q K_j^T computes, K_j+1 while the softmax and O += P V_j run), read with ldmatrix (V
// transposed), multiplied with mma.sync m16n8k16 (float32 accumulate). The softmax is online in
// registers in the log2 domain: the S accumulator fragment of two n8 tiles is exactly the A
// fragment of the next product, so P never leaves registers. Causal key tiles past the block's
// diagonal are skipped, as are those past its rows' last visible key under a causal offset; masks
// are read per tile from global memory with broadcast strides.
//
// tripy_attention_generic: one warp per query row (any float dtype, head sizes, strides): lanes
// split the head dim, each key's score is a warp reduction; a simple path that is always correct.

// Words of the by-value argument block (all 64-bit; see plan_attention).
struct AttnArgs {
  i64 q, k, v, mask, out;          // addresses
  i64 B, Hq, Hkv, L, S, D, Dv;     // logical sizes
  i64 qs[4], ks[4], vs[4], ms[4], os[4];  // element strides of (b, h, row, d); 0 where a mask broadcasts
  i64 scale_log2;                  // float bits of scale * log2(e)
  i64 nqb;                         // query blocks (flash) or row blocks (generic)
  i64 nd;                          // generic: chunks of 256 output columns
  i64 vec;                         // flash, split: 1 when every address is 16-byte aligned
  i64 nsplit, chunk;               // split: chunks of keys per (batch, kv head), keys per chunk
  i64 ws, ctr;                     // split: float32 partials, per (batch, kv head) counters at zero
  i64 vvec;                        // split: 1 when V rows can be read in 16-byte pieces (strides)
  i64 min_keys;                    // split under a causal offset: keys per block at least
  // split: a step's KV cache writes folded in (fold_cache_writes, cuda_attention.cc). Keys [start, start +
  // arows) of k and v are read from ak and av (the writes' sources: element (b, h, row, d) at
  // aks[] / avs[] strides) and written into k and v by each (batch, kv head)'s first block;
  // start is one int32 (a64 0) or int64 element read when the kernel runs. A start outside
  // [0, S - arows] writes nothing and records an error (err, tag, claim: record_error), as the
  // update_slice kernel would have. arows 0: none.
  i64 ak, av, astart, a64, arows, aks[4], avs[4], err, tag, claim;
};

#define LOG2E 1.4426950408889634f
DEVI float fexp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
DEVI float as_float(i64 bits) { return __int_as_float((int)bits); }

DEVI float mask_term(const AttnArgs& a, int b, int h, i64 row, i64 col, bool* keep) {
  *keep = true;
#if MASK_KIND == 0 || MASK_KIND == 3
  return 0.0f;  // a causal offset bounds the keys instead (offset_keys)
#else
  const i64 off = b * a.ms[0] + h * a.ms[1] + row * a.ms[2] + col * a.ms[3];
#if MASK_KIND == 1
  *keep = ((const unsigned char*)a.mask)[off] != 0;
  return 0.0f;
#else
  return LOAD_T(((const ST*)a.mask)[off]) * LOG2E;
#endif
#endif
}

// MASK_KIND 3: key s is visible to query row l iff s <= l + o, the sum in the offset's dtype
// (largest value OFFSET_MAX) wrapping to negative, i.e. to no key (rt::causal_offset_keys). The
// offset is one element, read by every thread when the kernel runs (a decode step's position).
#ifndef OFFSET_T
#define OFFSET_T long long
#define OFFSET_MAX 0x7fffffffffffffffLL
#endif
DEVI i64 load_offset(const AttnArgs& a) { return (i64)*(const OFFSET_T*)a.mask; }
// The keys row `row` sees: [0, offset_keys).
DEVI i64 offset_keys(i64 off, i64 row, i64 S) {
  if (off > 0 && row > OFFSET_MAX - off) return 0;
  const i64 last = row + off;
  return last < 0 ? 0 : last >= S ? S : last + 1;
}
// The most and the fewest keys a row of [r0, r1) sees: the count grows with the row until the sum
// wraps, and is 0 from there on.
DEVI i64 offset_keys_max(i64 off, i64 r0, i64 r1, i64 S) {
  i64 last = r1 - 1;
  if (off > 0 && last > OFFSET_MAX - off) last = OFFSET_MAX - off;
  return last < r0 ? 0 : offset_keys(off, last, S);
}
DEVI i64 offset_keys_min(i64 off, i64 r0, i64 r1, i64 S) {
  return r1 <= r0 || (off > 0 && r1 - 1 > OFFSET_MAX - off) ? 0 : offset_keys(off, r0, S);
}

#if HAS_GENERIC
// ---------------------------------------------------------------------------------------------
// Generic path: blockDim 128 = 4 warps = 4 query rows; lanes own head-dim elements lane + 32 i.
extern "C" __global__ void __launch_bounds__(128) tripy_attention_generic(const AttnArgs a) {
  enter_after_previous();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const i64 blk = blockIdx.x;
  const i64 dchunk = blk % a.nd, rest = blk / a.nd;
  const i64 row = (rest % a.nqb) * 4 + warp, bh = rest / a.nqb;
  if (row >= a.L) return;
  const int b = (int)(bh / a.Hq), h = (int)(bh % a.Hq), hk = (int)(h / (a.Hq / a.Hkv));
  const float sl2 = as_float(a.scale_log2);
  const ST* q = (const ST*)a.q + b * a.qs[0] + h * a.qs[1] + row * a.qs[2];
  const ST* kb = (const ST*)a.k + b * a.ks[0] + hk * a.ks[1];
  const ST* vb = (const ST*)a.v + b * a.vs[0] + hk * a.vs[1];
  float qr[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const i64 d = lane + 32 * i;
    qr[i] = d < a.D ? LOAD_T(q[d * a.qs[3]]) * sl2 : 0.0f;
  }
  const i64 d0 = dchunk * 256;
  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.0f;
  float m = -__int_as_float(0x7f800000), l = 0.0f;
  const i64 send = MASK_KIND == 3 ? offset_keys(load_offset(a), row, a.S)
                   : CAUSAL       ? (a.S < row + 1 ? a.S : row + 1)
                                  : a.S;
  for (i64 j = 0; j < send; ++j) {
    const ST* kr = kb + j * a.ks[2];
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const i64 d = lane + 32 * i;
      if (d < a.D) part += qr[i] * LOAD_T(kr[d * a.ks[3]]);
    }
    for (i64 d = lane + 256; d < a.D; d += 32) part += LOAD_T(q[d * a.qs[3]]) * sl2 * LOAD_T(kr[d * a.ks[3]]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    bool keep;
    float x = part + mask_term(a, b, h, row, j, &keep);
    if (!keep) x = -__int_as_float(0x7f800000);
    const float m_new = x > m ? x : m;
    if (m_new == -__int_as_float(0x7f800000)) continue;
    const float corr = exp2f(m - m_new), p = exp2f(x - m_new);
    l = l * corr + p;
    m = m_new;
    const ST* vr = vb + j * a.vs[2];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const i64 d = d0 + lane + 32 * i;
      acc[i] = acc[i] * corr + (d < a.Dv ? p * LOAD_T(vr[d * a.vs[3]]) : 0.0f);
    }
  }
  // No visible key: l == 0 and 0 * (1 / 0) is the NaN of a softmax over nothing. No key at all
  // (S == 0): the product with an empty value matrix, zero.
  const float inv = a.S == 0 ? 0.0f : 1.0f / l;
  ST* o = (ST*)a.out + b * a.os[0] + h * a.os[1] + row * a.os[2];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const i64 d = d0 + lane + 32 * i;
    if (d < a.Dv) o[d * a.os[3]] = STORE_T(acc[i] * inv);
  }
}

#endif  // HAS_GENERIC

#ifdef MMA_T
// Tensor-core helpers of the flash and split-KV kernels (float16/bfloat16 modules).
DEVI unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
DEVI void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
DEVI void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> DEVI void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
DEVI void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
DEVI void ldsm_x4_t(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
// d (16x8 f32) += a (16x16, row) * b (16x8, col): the m16n8k16 fragments of the PTX ISA.
DEVI void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_T "." MMA_T ".f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats as one register of two 16-bit values, `lo` in the low half (the lower column).
DEVI unsigned pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn." MMA_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#endif  // MMA_T

#if HAS_FLASH
// ---------------------------------------------------------------------------------------------
// Flash path. HD: head size; BM = 64 * WM query rows per CTA; BN keys per tile; rows padded by 8
// elements (16 bytes) so that ldmatrix's eight row addresses fall in distinct banks.
#define BM (64 * WM)
#define BN 64
#define SP (HD + 8)
#define QV_ROWS (BM > BN ? BM : BN)

// rows x HD elements of one operand into shared memory at `s` (shared address `sa`; row stride
// SP); rows past `valid` are zero, so padded keys contribute nothing (not even NaN) and padded
// queries stay finite. Each thread copies one 16-byte chunk of every (128 / (HD / 8))-th row.
DEVI void load_tile(unsigned short* s, unsigned sa, const unsigned short* g, i64 row_stride, int rows, i64 valid,
                    bool vec) {
  constexpr int CH = HD / 8, RPI = 128 / CH;
  const int r0 = threadIdx.x / CH, col = (threadIdx.x % CH) * 8;
  const unsigned short* src = g + r0 * row_stride + col;
  const i64 step = RPI * row_stride;
#pragma unroll
  for (int r = r0; r < rows; r += RPI, src += step) {
    const int off = r * SP + col;
    if (vec) {
      cp_async16(sa + 2 * off, r < valid ? (const void*)src : (const void*)g, r < valid ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) s[off + e] = r < valid ? src[e] : (unsigned short)0;
    }
  }
}

// Scales one row half (`half` 0: row g, 1: row g + 8) of an m-tile's S fragment into the log2
// domain, hides masked and out-of-range keys (EDGE only: tiles crossing the diagonal or the key
// range, or any tile under an explicit mask) and returns the quad's row maximum. Two partial
// maxima keep the dependent chain short.
template <bool EDGE>
DEVI float scale_mask_max(const AttnArgs& a, float (*s)[4], int half, int b, int h, i64 row, i64 n0, i64 kv_end,
                          i64 row_keys, float sl2) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tq = (threadIdx.x & 31) & 3;
  float mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
  for (int n = 0; n < BN / 8; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      // Inner tiles with a positive scale keep the raw scores: the maximum commutes with the
      // scaling, and the exponent then folds it in (one fma per score instead of mul and sub).
      float x = !EDGE && SCALE_POS ? s[n][half * 2 + e] : s[n][half * 2 + e] * sl2;
      if (EDGE) {
        const i64 col = n0 + n * 8 + 2 * tq + e;
        bool keep = true;
        if (MASK_KIND != 0 && row < a.L && col < a.S) x += mask_term(a, b, h, row, col, &keep);
        if (col >= kv_end || col >= row_keys || (CAUSAL && col > row)) keep = false;
        x = keep ? x : NEG_INF;
      }
      s[n][half * 2 + e] = x;
      if (e == 0) mx0 = fmaxf(mx0, x);
      else mx1 = fmaxf(mx1, x);
    }
  float mx = fmaxf(mx0, mx1);
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  return !EDGE && SCALE_POS ? mx * sl2 : mx;
}

// p = 2^(scaled score - m) over one row half, in place, and the thread's part of the row sum (two
// independent chains). Scores are raw on inner tiles with a positive scale (see scale_mask_max).
template <bool RAW>
DEVI float exp_sum(float (*s)[4], int half, float m, float sl2) {
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int n = 0; n < BN / 8; ++n) {
    float* x = &s[n][half * 2];
    x[0] = fexp2(RAW ? fmaf(x[0], sl2, -m) : x[0] - m);
    x[1] = fexp2(RAW ? fmaf(x[1], sl2, -m) : x[1] - m);
    sum0 += x[0];
    sum1 += x[1];
  }
  return sum0 + sum1;
}

extern "C" __global__ void __launch_bounds__(128) tripy_attention_flash(const AttnArgs a) {
  enter_after_previous();
  __shared__ __align__(16) unsigned short sK[BN * SP];
  __shared__ __align__(16) unsigned short sQV[QV_ROWS * SP];  // Q first, then each V tile
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const i64 BH = a.B * a.Hq;
  const i64 qb = a.nqb - 1 - (i64)blockIdx.x / BH;  // the longest causal blocks start first
  const i64 bh = (i64)blockIdx.x % BH;
  const int b = (int)(bh / a.Hq), h = (int)(bh % a.Hq), hk = (int)(h / (a.Hq / a.Hkv));
  const i64 m0 = qb * BM;
  const bool vec = a.vec != 0;
  const unsigned short* qg = (const unsigned short*)a.q + b * a.qs[0] + h * a.qs[1] + m0 * a.qs[2];
  const unsigned short* kg = (const unsigned short*)a.k + b * a.ks[0] + hk * a.ks[1];
  const unsigned short* vg = (const unsigned short*)a.v + b * a.vs[0] + hk * a.vs[1];
  const unsigned sK_a = smem_addr(sK), sQV_a = smem_addr(sQV);
  const i64 q_valid = a.L - m0;
  // Keys [0, kv_end) are visited; every row sees [0, kv_lo), so tiles inside it need no per-key test.
  i64 kv_end = CAUSAL ? (a.S < m0 + BM ? a.S : m0 + BM) : a.S, kv_lo = kv_end;
  const i64 off = MASK_KIND == 3 ? load_offset(a) : 0;
  if (MASK_KIND == 3) {
    const i64 r1 = a.L < m0 + BM ? a.L : m0 + BM;
    kv_end = offset_keys_max(off, m0, r1, a.S);
    kv_lo = offset_keys_min(off, m0, r1, a.S);
  }
  const int ntiles = (int)((kv_end + BN - 1) / BN);

  load_tile(sQV, sQV_a, qg, a.qs[2], BM, q_valid, vec);
  if (ntiles > 0) load_tile(sK, sK_a, kg, a.ks[2], BN, kv_end, vec);
  cp_commit();
  cp_wait<0>();
  __syncthreads();
  // Q fragments: for m-tile t and head chunk kk, matrices (rows +0..7 | +8..15) x (cols +0..7 | +8..15).
  unsigned qf[WM][HD / 16][4];
#pragma unroll
  for (int t = 0; t < WM; ++t)
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const int r = warp * 16 * WM + t * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, c = kk * 16 + (lane >> 4) * 8;
      ldsm_x4(smem_addr(sQV + r * SP + c), qf[t][kk][0], qf[t][kk][1], qf[t][kk][2], qf[t][kk][3]);
    }
  __syncthreads();

  float o[WM][HD / 8][4];
  float mrow[WM][2], lrow[WM][2];
#pragma unroll
  for (int t = 0; t < WM; ++t) {
#pragma unroll
    for (int d = 0; d < HD / 8; ++d) o[t][d][0] = o[t][d][1] = o[t][d][2] = o[t][d][3] = 0.0f;
    mrow[t][0] = mrow[t][1] = -__int_as_float(0x7f800000);
    lrow[t][0] = lrow[t][1] = 0.0f;
  }
  const float sl2 = as_float(a.scale_log2);
  const float NEG_INF = -__int_as_float(0x7f800000);
  // The keys each of this thread's rows sees (all of them but under a causal offset).
  i64 rkeys[WM][2];
#pragma unroll
  for (int t = 0; t < WM; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half)
      rkeys[t][half] = MASK_KIND == 3 ? offset_keys(off, m0 + warp * 16 * WM + t * 16 + g + half * 8, a.S) : a.S;
  // This lane's ldmatrix row address in a K tile (keys + 0..7 | 8..15, head cols + 0 | 8) and in a
  // V tile read transposed (keys + 0..7 | 8..15, head cols + 0 | 8 by lane >> 4); loops add constants.
  const unsigned k_lane = sK_a + 2 * (((lane & 7) + ((lane >> 4) & 1) * 8) * SP + ((lane >> 3) & 1) * 8);
  const unsigned v_lane = sQV_a + 2 * (((lane & 7) + ((lane >> 3) & 1) * 8) * SP + (lane >> 4) * 8);

  for (int j = 0; j < ntiles; ++j) {
    const i64 n0 = (i64)j * BN;
    if (j > 0) __syncthreads();  // every warp is done reading the previous V tile
    load_tile(sQV, sQV_a, vg + n0 * a.vs[2], a.vs[2], BN, kv_end - n0, vec);
    cp_commit();
    cp_wait<1>();  // K_j has landed (V_j may still be in flight)
    __syncthreads();

    float s[WM][BN / 8][4];
#pragma unroll
    for (int t = 0; t < WM; ++t)
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) s[t][n][0] = s[t][n][1] = s[t][n][2] = s[t][n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
      for (int p = 0; p < BN / 16; ++p) {
        // Keys p*16 + (0..7 | 8..15) x head cols kk*16 + (0..7 | 8..15): b0, b1 of n-tiles 2p, 2p+1.
        unsigned b0, b1, b2, b3;
        ldsm_x4(k_lane + 2 * (p * 16 * SP + kk * 16), b0, b1, b2, b3);
#pragma unroll
        for (int t = 0; t < WM; ++t) {
          mma16816(s[t][2 * p], qf[t][kk], b0, b1);
          mma16816(s[t][2 * p + 1], qf[t][kk], b2, b3);
        }
      }
    __syncthreads();  // every warp is done reading K_j
    if (j + 1 < ntiles) load_tile(sK, sK_a, kg + (n0 + BN) * a.ks[2], a.ks[2], BN, kv_end - n0 - BN, vec);
    cp_commit();

    // Scale, mask and the online softmax, two rows (g, g + 8) per m-tile. Tiles inside the
    // causal diagonal and the key range, without a mask, take the path with no per-element test.
    const bool edge = (MASK_KIND != 0 && MASK_KIND != 3) || n0 + BN > kv_lo || (CAUSAL && n0 + BN - 1 > m0);
#pragma unroll
    for (int t = 0; t < WM; ++t) {
      const i64 row0 = m0 + warp * 16 * WM + t * 16 + g;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const i64 row = row0 + half * 8, rk = rkeys[t][half];
        const float mx = edge ? scale_mask_max<true>(a, s[t], half, b, h, row, n0, kv_end, rk, sl2)
                              : scale_mask_max<false>(a, s[t], half, b, h, row, n0, kv_end, rk, sl2);
        const float m_new = fmaxf(mrow[t][half], mx);
        const float m_use = m_new == NEG_INF ? 0.0f : m_new;
        const float corr = fexp2(mrow[t][half] - m_use);
        mrow[t][half] = m_new;
        const float sum = !edge && SCALE_POS ? exp_sum<true>(s[t], half, m_use, sl2) : exp_sum<false>(s[t], half, m_use, sl2);
        lrow[t][half] = lrow[t][half] * corr + sum;  // this thread's part; the quad sums at the end
#pragma unroll
        for (int d = 0; d < HD / 8; ++d) {
          o[t][d][half * 2] *= corr;
          o[t][d][half * 2 + 1] *= corr;
        }
      }
    }

    cp_wait<1>();  // V_j has landed (K_j+1 may still be in flight)
    __syncthreads();
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      unsigned pf[WM][4];
#pragma unroll
      for (int t = 0; t < WM; ++t) {
        pf[t][0] = pack2(s[t][2 * kc][0], s[t][2 * kc][1]);
        pf[t][1] = pack2(s[t][2 * kc][2], s[t][2 * kc][3]);
        pf[t][2] = pack2(s[t][2 * kc + 1][0], s[t][2 * kc + 1][1]);
        pf[t][3] = pack2(s[t][2 * kc + 1][2], s[t][2 * kc + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        // Keys kc*16 + (0..7 | 8..15) x head cols dp*16 + (0..7 | 8..15), transposed: b0, b1 of
        // d-tiles 2dp and 2dp+1.
        unsigned b0, b1, b2, b3;
        ldsm_x4_t(v_lane + 2 * (kc * 16 * SP + dp * 16), b0, b1, b2, b3);
#pragma unroll
        for (int t = 0; t < WM; ++t) {
          mma16816(o[t][2 * dp], pf[t], b0, b1);
          mma16816(o[t][2 * dp + 1], pf[t], b2, b3);
        }
      }
    }
  }
  cp_wait<0>();

  // O / l: row sums are spread over the quad's four threads.
  unsigned short* og = (unsigned short*)a.out + b * a.os[0] + h * a.os[1];
#pragma unroll
  for (int t = 0; t < WM; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = lrow[t][half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = a.S == 0 ? 0.0f : 1.0f / l;
      const i64 row = m0 + warp * 16 * WM + t * 16 + g + half * 8;
      if (row >= a.L) continue;
      unsigned short* orow = og + row * a.os[2];
#pragma unroll
      for (int d = 0; d < HD / 8; ++d) {
        const int col = d * 8 + 2 * tq;
        const unsigned pair = pack2(o[t][d][half * 2] * inv, o[t][d][half * 2 + 1] * inv);
        if (vec) {
          *(unsigned*)(orow + col) = pair;
        } else {
          orow[col] = (unsigned short)(pair & 0xffffu);
          orow[col + 1] = (unsigned short)(pair >> 16);
        }
      }
    }
}
#endif  // HAS_FLASH

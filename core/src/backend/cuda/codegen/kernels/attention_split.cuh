// The split-KV ("flash-decoding") attention kernels (attention_split_source() in
// cuda_attention_source.cc), after attention.cuh in every attention module (AttnArgs, mask_term,
// fexp2).
//
// A decode step attends with one query row per head: the flash kernel's CTA of 128 query rows
// would run B * Hq blocks on a GPU of 132 SMs, each walking the whole cache alone. Here the keys
// are split instead: one block per (batch, kv head, chunk of keys) serves every query row of the
// kv head's group (GQA: all q heads sharing it, times the L query rows), keeps the chunk's softmax
// max m, sum l and unnormalised output o in float32 in the program's workspace, and the last block
// of each (batch, kv head) to finish (an atomicInc counter that wraps back to zero, so the
// counters stay zero between launches and graph replays) merges the partials with the
// log-sum-exp rule: M = max m_s, out = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s.
//
// Scores run on CUDA cores: the work is a matrix-vector product per kv head, bound by reading K and
// V once, and many blocks in flight hide the memory latency. Inside a block, tiles of 128 keys:
// thread t scores key t against every row (K rows read in 16-byte pieces when aligned), warps own
// rows for the tile's max and sum, then thread t accumulates output column t % CW over keys
// t / CW, t / CW + 128 / CW, ... (CW = 32, 64 or 128 columns per pass, two passes past 128).
//
// Under a causal offset the blocks in use follow the keys visible now (at least SPLIT_MIN_KEYS
// each, so a short cache runs as few blocks that each walk a tile or two); a block left alone
// writes the output itself, with no partials and no merge. Either way a decode step is a chain of
// memory latencies more than a stream of bytes: loads are issued together wherever they can be.
//
// tripy_attention_split1 serves one row per kv head (multi-head decode), tripy_attention_split16
// up to 16 (GQA groups, a few query rows: as many as the module's sizes need, since each row
// unrolls its loops once more); a module holds those its sizes can use and the host picks one per
// launch (cuda_attention.cc).

#define SPLIT_T 128     // keys per tile: one per thread in the score phase
#define SPLIT_DMAX 256  // head sizes up to this (the host checks)
#define SPLIT_MIN_KEYS 256  // keys per block at least under a causal offset (kSplitMinKeys too)
#define SPLIT_VROWS 4   // rows served by the register V path at most (its accumulators: rows x 16 B)

template <int RM>
DEVI void attention_split(const AttnArgs& a) {
  __shared__ float sQ[RM * SPLIT_DMAX];  // queries scaled into the log2 domain; then the key groups' outputs
  __shared__ float sS[RM * SPLIT_T];     // a tile's scores, then its probabilities; then the merge weights
  __shared__ float sM[RM], sL[RM], sC[RM];
  __shared__ int sLast;
  // The register V path's partial outputs: one per warp and row (head sizes up to 128).
  __shared__ float sV[RM <= SPLIT_VROWS ? 4 * RM * 128 : 1];
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const i64 G = a.Hq / a.Hkv, R = G * a.L, groups = a.B * a.Hkv;
  const i64 split = (i64)blockIdx.x % a.nsplit, grp = (i64)blockIdx.x / a.nsplit;
  const int b = (int)(grp / a.Hkv), hk = (int)(grp % a.Hkv);
  const float sl2 = as_float(a.scale_log2);
  // The causal offset's load goes out with the queries'.
  const i64 off = MASK_KIND == 3 ? load_offset(a) : 0;
  // Row r of the block is query row r % L of q head hk * G + r / L.
#pragma unroll 4
  for (i64 i = tid; i < R * a.D; i += 128) {
    const i64 r = i / a.D, d = i - r * a.D;
    const i64 h = hk * G + r / a.L, row = r % a.L;
    sQ[r * SPLIT_DMAX + d] = LOAD_T(((const ST*)a.q)[b * a.qs[0] + h * a.qs[1] + row * a.qs[2] + d * a.qs[3]]) * sl2;
  }
  if (tid < RM) {
    sM[tid] = NEG_INF;
    sL[tid] = 0.0f;
  }
  const int CW = a.Dv <= 32 ? 32 : a.Dv <= 64 ? 64 : 128, NKG = 128 / CW, kg = tid / CW, c = tid % CW;
  float acc[RM][2];
#pragma unroll
  for (int r = 0; r < RM; ++r) acc[r][0] = acc[r][1] = 0.0f;
  // Keys [0, keys) in chunks of `chunk` over `nsplit` blocks. Under a causal offset all three
  // follow the offset read now: the keys any row sees split evenly (in multiples of 32) over as
  // many blocks as have SPLIT_MIN_KEYS each, up to the launch's; the others leave at once (they
  // take no part in the merge either), so a decode step's cost follows the rows written.
  i64 keys = a.S, chunk = a.chunk, nsplit = a.nsplit;
  if (MASK_KIND == 3) {
    keys = offset_keys_max(off, 0, a.L, a.S);
    const i64 want = (keys + SPLIT_MIN_KEYS - 1) / SPLIT_MIN_KEYS;
    nsplit = want < 1 ? 1 : want < a.nsplit ? want : a.nsplit;
    chunk = ((keys + nsplit - 1) / nsplit + 31) / 32 * 32;
    if (split >= nsplit) return;  // the same for every thread of the block
  }
  const i64 k0 = split * chunk;
  i64 k1 = k0 + chunk < keys ? k0 + chunk : keys;
  if (CAUSAL && k1 > a.L) k1 = a.L;  // key j is visible to query rows >= j only
  const ST* kb = (const ST*)a.k + b * a.ks[0] + hk * a.ks[1];
  const ST* vb = (const ST*)a.v + b * a.vs[0] + hk * a.vs[1];
  constexpr int VE = 16 / sizeof(ST);
  // Up to SPLIT_VROWS rows with V rows readable in 16-byte pieces (the host checks the strides,
  // a.vec the addresses): thread t owns piece t % P of keys t / P, t / P + RP, ... of each tile (P
  // pieces per row, RP rows per pass), loaded as the tile starts so that their latency overlaps
  // the score phase's (the per-key loop further down, for other sizes, waits on a load every few
  // keys).
  constexpr bool VROWS = RM <= SPLIT_VROWS;
  constexpr int VK = 16;  // pieces per row at most: so also keys per thread and tile
  const int P = (int)(a.Dv / VE);
  const bool vv = VROWS && a.vec && a.vvec && P > 0 && P <= VK && 128 % P == 0;
  const int RP = vv ? 128 / P : 1, pc = vv ? tid % P : 0, rs = vv ? tid / P : 0;
  float vacc[VROWS ? RM : 1][VE];
  uint4 vreg[VROWS ? VK : 1];
#pragma unroll
  for (int r = 0; r < (VROWS ? RM : 1); ++r)
#pragma unroll
    for (int e = 0; e < VE; ++e) vacc[r][e] = 0.0f;
  __syncthreads();

  for (i64 t0 = k0; t0 < k1; t0 += SPLIT_T) {
    const int n = (int)(k1 - t0 < SPLIT_T ? k1 - t0 : SPLIT_T);
    if constexpr (VROWS) {
      if (vv) {
        const ST* vt = vb + t0 * a.vs[2] + pc * VE;
#pragma unroll
        for (int i = 0; i < VK; ++i) {
          const int j = rs + i * RP;
          if (i < P && j < n) vreg[i] = *(const uint4*)(vt + j * a.vs[2]);
        }
      }
    }
    if (tid < n) {
      const i64 col = t0 + tid;
      const ST* kr = kb + col * a.ks[2];
      float s[RM];
#pragma unroll
      for (int r = 0; r < RM; ++r) s[r] = 0.0f;
      if (a.vec && a.D <= VK * VE) {  // unit stride, 16-byte aligned rows, D a multiple of VE (the host checks)
        // The row's pieces are loaded before any is used: one memory latency, not D / VE.
        uint4 kreg[VK];
#pragma unroll
        for (int i = 0; i < VK; ++i)
          if (i * VE < a.D) kreg[i] = *(const uint4*)(kr + i * VE);
#pragma unroll
        for (int i = 0; i < VK; ++i) {
          if (i * VE >= a.D) break;
          const ST* e = (const ST*)&kreg[i];
#pragma unroll
          for (int x = 0; x < VE; ++x) {
            const float kv = LOAD_T(e[x]);
#pragma unroll
            for (int r = 0; r < RM; ++r)
              if (r < R) s[r] += sQ[r * SPLIT_DMAX + i * VE + x] * kv;
          }
        }
      } else if (a.vec) {
#pragma unroll 8
        for (int d = 0; d < a.D; d += VE) {
          const uint4 u = *(const uint4*)(kr + d);
          const ST* e = (const ST*)&u;
#pragma unroll
          for (int i = 0; i < VE; ++i) {
            const float kv = LOAD_T(e[i]);
#pragma unroll
            for (int r = 0; r < RM; ++r)
              if (r < R) s[r] += sQ[r * SPLIT_DMAX + d + i] * kv;
          }
        }
      } else {
        for (int d = 0; d < a.D; ++d) {
          const float kv = LOAD_T(kr[d * a.ks[3]]);
#pragma unroll
          for (int r = 0; r < RM; ++r)
            if (r < R) s[r] += sQ[r * SPLIT_DMAX + d] * kv;
        }
      }
#pragma unroll
      for (int r = 0; r < RM; ++r) {
        if (r >= R) break;
        const i64 row = r % a.L;
        bool keep = true;
        float x = s[r] + mask_term(a, b, (int)(hk * G + r / a.L), row, col, &keep);
        if (CAUSAL && col > row) keep = false;
        if (MASK_KIND == 3 && col >= offset_keys(off, row, a.S)) keep = false;
        sS[r * SPLIT_T + tid] = keep ? x : NEG_INF;
      }
    }
    __syncthreads();
    // The online softmax: warp w owns rows w, w + 4, ...
    for (int r = warp; r < R; r += 4) {
      float mx = NEG_INF;
      for (int j = lane; j < n; j += 32) mx = fmaxf(mx, sS[r * SPLIT_T + j]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = sM[r], m_new = fmaxf(m_old, mx), m_use = m_new == NEG_INF ? 0.0f : m_new;
      float sum = 0.0f;
      for (int j = lane; j < n; j += 32) {
        const float p = fexp2(sS[r * SPLIT_T + j] - m_use);
        sS[r * SPLIT_T + j] = p;
        sum += p;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      __syncwarp();
      if (lane == 0) {
        const float corr = fexp2(m_old - m_use);
        sC[r] = corr;
        sL[r] = sL[r] * corr + sum;
        sM[r] = m_new;
      }
    }
    __syncthreads();
    if constexpr (VROWS) {
      if (vv) {
#pragma unroll
        for (int r = 0; r < RM; ++r)
          if (r < R) {
            const float corr = sC[r];
#pragma unroll
            for (int e = 0; e < VE; ++e) vacc[r][e] *= corr;
          }
#pragma unroll
        for (int i = 0; i < VK; ++i) {
          const int j = rs + i * RP;
          if (i < P && j < n) {
            const ST* e8 = (const ST*)&vreg[i];
            float v8[VE];
#pragma unroll
            for (int e = 0; e < VE; ++e) v8[e] = LOAD_T(e8[e]);
#pragma unroll
            for (int r = 0; r < RM; ++r)
              if (r < R) {
                const float p = sS[r * SPLIT_T + j];
#pragma unroll
                for (int e = 0; e < VE; ++e) vacc[r][e] += p * v8[e];
              }
          }
        }
        __syncthreads();  // the next tile rewrites sS
        continue;
      }
    }
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (r < R) {
        acc[r][0] *= sC[r];
        acc[r][1] *= sC[r];
      }
    const ST* vt = vb + t0 * a.vs[2];
    const bool c0 = c < a.Dv, c1 = c + CW < a.Dv;
#pragma unroll 4
    for (int j = kg; j < n; j += NKG) {
      const ST* vr = vt + j * a.vs[2];
      const float v0 = c0 ? LOAD_T(vr[c * a.vs[3]]) : 0.0f, v1 = c1 ? LOAD_T(vr[(c + CW) * a.vs[3]]) : 0.0f;
#pragma unroll
      for (int r = 0; r < RM; ++r)
        if (r < R) {
          const float p = sS[r * SPLIT_T + j];
          acc[r][0] += p * v0;
          acc[r][1] += p * v1;
        }
    }
    __syncthreads();  // the next tile rewrites sS
  }

  // A block alone writes the output (1 / l: a row with no visible key is 0 * (1 / 0), the NaN of
  // a softmax over nothing, as elsewhere); otherwise its partials, for the merge below.
  const bool alone = nsplit == 1;
  float* part_o = (float*)a.ws;                                  // [groups][a.nsplit][R][Dv]
  float* part_ml = part_o + groups * a.nsplit * R * a.Dv;        // [groups][a.nsplit][R][2]
  float* po = part_o + (grp * a.nsplit + split) * R * a.Dv;
  auto put = [&](i64 r, i64 col, float o) {
    if (alone) {
      const i64 h = hk * G + r / a.L, row = r % a.L;
      ((ST*)a.out)[b * a.os[0] + h * a.os[1] + row * a.os[2] + col * a.os[3]] = STORE_T(o * (1.0f / sL[r]));
    } else {
      po[r * a.Dv + col] = o;
    }
  };
  if (vv) {
    // The row slots' sums: lanes P apart within a warp, then the 4 warps through shared memory.
#pragma unroll
    for (int r = 0; r < (VROWS ? RM : 1); ++r)
      if (r < R)
#pragma unroll
        for (int e = 0; e < VE; ++e) {
          for (int o = 16; o >= P; o >>= 1) vacc[r][e] += __shfl_xor_sync(0xffffffffu, vacc[r][e], o);
          if (lane < P) sV[(warp * R + r) * a.Dv + pc * VE + e] = vacc[r][e];
        }
    __syncthreads();
    for (i64 idx = tid; idx < R * a.Dv; idx += 128) {
      const i64 r = idx / a.Dv, col = idx - r * a.Dv, w = R * a.Dv;
      put(r, col, sV[idx] + sV[w + idx] + sV[2 * w + idx] + sV[3 * w + idx]);
    }
  } else {
    // The key groups' sums through shared memory (the queries are done).
    float* red = sQ;
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (r < R) {
        red[((r * 2 + 0) * NKG + kg) * CW + c] = acc[r][0];
        red[((r * 2 + 1) * NKG + kg) * CW + c] = acc[r][1];
      }
    __syncthreads();
    for (i64 idx = tid; idx < R * a.Dv; idx += 128) {
      const i64 r = idx / a.Dv, col = idx - r * a.Dv, i = col / CW, cc = col - i * CW;
      float sum = 0.0f;
      for (int g = 0; g < NKG; ++g) sum += red[((r * 2 + i) * NKG + g) * CW + cc];
      put(r, col, sum);
    }
  }
  if (alone) return;
  if (tid < R) {
    float* pml = part_ml + ((grp * a.nsplit + split) * R + tid) * 2;
    pml[0] = sM[tid];
    pml[1] = sL[tid];
  }
  // The last block of this (batch, kv head) merges: every block's partials are visible to it.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned n1 = (unsigned)(nsplit - 1);
    sLast = atomicInc((unsigned*)a.ctr + grp, n1) == n1;
  }
  __syncthreads();
  if (!sLast) return;
  __threadfence();
  const float* ml = part_ml + grp * a.nsplit * R * 2;
  for (int r = warp; r < R; r += 4) {
    float M = NEG_INF;
    for (i64 s = lane; s < nsplit; s += 32) M = fmaxf(M, __ldcg(ml + (s * R + r) * 2));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float l = 0.0f;
    for (i64 s = lane; s < nsplit; s += 32) {
      const float m = __ldcg(ml + (s * R + r) * 2);
      const float w = m == NEG_INF ? 0.0f : fexp2(m - M);
      l += w * __ldcg(ml + (s * R + r) * 2 + 1);
      sS[s * RM + r] = w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    // No visible key in any chunk: 0 * (1 / 0), the NaN of a softmax over nothing, as elsewhere.
    if (lane == 0) sC[r] = 1.0f / l;
  }
  __syncthreads();
  const float* pg = part_o + grp * a.nsplit * R * a.Dv;
  for (i64 idx = tid; idx < R * a.Dv; idx += 128) {
    const i64 r = idx / a.Dv, col = idx - r * a.Dv;
    float o = 0.0f;
    for (i64 s = 0; s < nsplit; s += 8) {  // eight chunks' partials loaded at once
      float part[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) part[u] = s + u < nsplit ? __ldcg(pg + (s + u) * R * a.Dv + idx) : 0.0f;
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (s + u < nsplit) o += sS[(s + u) * RM + r] * part[u];
    }
    const i64 h = hk * G + r / a.L, row = r % a.L;
    ((ST*)a.out)[b * a.os[0] + h * a.os[1] + row * a.os[2] + col * a.os[3]] = STORE_T(o * sC[r]);
  }
}

#if HAS_SPLIT1
extern "C" __global__ void __launch_bounds__(128) tripy_attention_split1(const AttnArgs a) { attention_split<1>(a); }
#endif
#if HAS_SPLIT16
// SPLIT_RM rows (2 to 16: attention_split_capacity), as few as the module's sizes need.
extern "C" __global__ void __launch_bounds__(128) tripy_attention_split16(const AttnArgs a) { attention_split<SPLIT_RM>(a); }
#endif

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
// Under a causal offset the blocks in use follow the keys visible now (at least a.min_keys
// each, so a short cache runs as few blocks that each walk a tile or two); a block left alone
// writes the output itself, with no partials and no merge. Either way a decode step is a chain of
// memory latencies more than a stream of bytes: loads are issued together wherever they can be.
//
// tripy_attention_split1 serves one row per kv head (multi-head decode), tripy_attention_split16
// up to 16 (GQA groups, a few query rows: as many as the module's sizes need, since each row
// unrolls its loops once more); a module holds those its sizes can use and the host picks one per
// launch (cuda_attention.cc). Each has a tensor-core form (_tc) where the dtype and head allow it,
// the launch's aligned form.

#define SPLIT_T 128     // keys per tile: one per thread in the score phase
#define SPLIT_DMAX 256  // head sizes up to this (the host checks)
#define SPLIT_VROWS 4   // rows served by the register V path at most (its accumulators: rows x 16 B)

// Block row r is query row r % L of q head hk * G + r / L: the element offsets of its q and output
// rows, computed once per block (threads r < R) so that no loop divides by L.
DEVI void split_row_offsets(const AttnArgs& a, int b, int hk, int G, int R, i64* qoff, i64* ooff) {
  const int r = threadIdx.x, L = (int)a.L;
  if (r < R) {
    const int h = hk * G + r / L, row = r - r / L * L;
    qoff[r] = b * a.qs[0] + h * a.qs[1] + row * a.qs[2];
    ooff[r] = b * a.os[0] + h * a.os[1] + row * a.os[2];
  }
}

// A step's KV cache writes folded into the launch (AttnArgs::ak ... claim): keys [start, start +
// rows) of the (batch, kv head) come from the writes' sources, which every block reads instead
// of the caches, so the (batch, kv head)'s first block may write them into the caches at any
// time. A start out of range writes nothing and records the error (rows 0: the caches' rows are
// read, as they would have been).
struct SplitAppend {
  i64 start = 0, rows = 0;
};
DEVI SplitAppend split_append(const AttnArgs& a, int b, int hk, int split) {
  SplitAppend ap;
  if (a.arows == 0) return ap;
  const i64 s = a.a64 ? (i64)*(const long long*)a.astart : (i64)*(const int*)a.astart;
  if (s < 0 || s > a.S - a.arows) {
    if (blockIdx.x == 0 && threadIdx.x == 0) record_error(a.err, a.claim, a.tag, s, a.S, a.arows);
    return ap;
  }
  ap.start = s, ap.rows = a.arows;
  if (split != 0) return ap;
  const ST* ksrc = (const ST*)a.ak + b * a.aks[0] + hk * a.aks[1];
  const ST* vsrc = (const ST*)a.av + b * a.avs[0] + hk * a.avs[1];
  ST* kc = (ST*)a.k + b * a.ks[0] + hk * a.ks[1];
  ST* vc = (ST*)a.v + b * a.vs[0] + hk * a.vs[1];
  for (i64 i = threadIdx.x; i < a.arows * a.D; i += blockDim.x) {
    const i64 r = i / a.D, d = i - r * a.D;
    kc[(s + r) * a.ks[2] + d * a.ks[3]] = ksrc[r * a.aks[2] + d * a.aks[3]];
  }
  for (i64 i = threadIdx.x; i < a.arows * a.Dv; i += blockDim.x) {
    const i64 r = i / a.Dv, d = i - r * a.Dv;
    vc[(s + r) * a.vs[2] + d * a.vs[3]] = vsrc[r * a.avs[2] + d * a.avs[3]];
  }
  return ap;
}
// Key `key`'s row: the source's where the launch appends it, else the cache's (`cache`, `src`:
// the (batch, kv head)'s rows 0; `cs`, `ss`: their row strides).
DEVI const ST* kv_row(const ST* cache, i64 cs, const ST* src, i64 ss, const SplitAppend& ap, i64 key) {
  const i64 i = key - ap.start;
  return (unsigned long long)i < (unsigned long long)ap.rows ? src + i * ss : cache + key * cs;
}

// The last block of a (batch, kv head) merges every block's partials (m, l, o) into the output:
// M = max m_s, out = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s. `w` holds nsplit * RM floats
// of shared memory, `inv` RM; `ooff` the rows' output offsets (split_row_offsets). 32-bit index
// math and short loops: a decode step runs this code once, cold in the instruction cache.
template <int RM>
DEVI void split_merge(const AttnArgs& a, int grp, int nsplit, int R, const i64* ooff, float* w, float* inv) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, ns = (int)a.nsplit, Dv = (int)a.Dv;
  const float* part_o = (const float*)a.ws;
  const float* ml = part_o + a.B * a.Hkv * ns * R * Dv + (i64)grp * ns * R * 2;
  const int warps = (int)(blockDim.x >> 5);
  for (int r = warp; r < R; r += warps) {
    float M = NEG_INF;
    for (int s = lane; s < nsplit; s += 32) M = fmaxf(M, __ldcg(ml + (s * R + r) * 2));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float l = 0.0f;
    for (int s = lane; s < nsplit; s += 32) {
      const float m = __ldcg(ml + (s * R + r) * 2);
      const float x = m == NEG_INF ? 0.0f : fexp2(m - M);
      l += x * __ldcg(ml + (s * R + r) * 2 + 1);
      w[s * RM + r] = x;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    // No visible key in any chunk: 0 * (1 / 0), the NaN of a softmax over nothing, as elsewhere.
    if (lane == 0) inv[r] = 1.0f / l;
  }
  __syncthreads();
  const float* pg = part_o + (i64)grp * ns * R * Dv;
  for (int r = 0; r < R; ++r)
    for (int col = tid; col < Dv; col += (int)blockDim.x) {
      const float* pr = pg + r * Dv + col;
      float o = 0.0f;
      for (int s = 0; s < nsplit; s += 4) {  // four chunks' partials loaded at once
        float part[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) part[u] = s + u < nsplit ? __ldcg(pr + (s + u) * R * Dv) : 0.0f;
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (s + u < nsplit) o += w[(s + u) * RM + r] * part[u];
      }
      ((ST*)a.out)[ooff[r] + col * a.os[3]] = STORE_T(o * inv[r]);
    }
}

// Where a split kernel's block ends: its (batch, kv head) group and chunk, and the shared memory
// that split_finish reads (the rows' maxima m, sums l and output offsets) and reuses for the merge
// (w: nsplit * RM floats, inv: RM); merge is false where the block wrote the output alone or had
// no keys. Both split kernels of a module end through the one split_finish call of its entry
// point, so NVRTC compiles the finish and the merge once per module (each copy costs ~0.1 s).
struct SplitEnd {
  bool merge = false;
  int grp = 0, split = 0, nsplit = 0, R = 0;
  const i64* ooff = nullptr;
  const float *m = nullptr, *l = nullptr;
  float *w = nullptr, *inv = nullptr;
};

// A block's row maxima m and sums l join its partial outputs, already written; the last block of
// the (batch, kv head) to arrive (every block's partials are visible to it) merges them.
template <int RM>
DEVI void split_finish(const AttnArgs& a, const SplitEnd& e) {
  __shared__ int last;
  const int tid = threadIdx.x, ns = (int)a.nsplit;
  float* part_ml = (float*)a.ws + a.B * a.Hkv * ns * e.R * a.Dv;  // [groups][a.nsplit][R][2]
  if (tid < e.R) {
    float* pml = part_ml + ((i64)(e.grp * ns + e.split) * e.R + tid) * 2;
    pml[0] = e.m[tid];
    pml[1] = e.l[tid];
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned n1 = (unsigned)(e.nsplit - 1);
    last = atomicInc((unsigned*)a.ctr + e.grp, n1) == n1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  split_merge<RM>(a, e.grp, e.nsplit, e.R, e.ooff, e.w, e.inv);
}

// LEAN: the body only serves what the module's tensor-core path cannot (addresses off a 16-byte
// boundary, which the launch finds), so it keeps one plain copy of each loop: no 16-byte K path,
// no register V path, no unrolling. Each unrolled copy costs NVRTC time (a GPT-2 decode step's
// module took 1.06 s on the build machine with the full body beside the tensor-core path, 0.67 s
// with the lean one).
template <int RM, bool LEAN>
DEVI SplitEnd attention_split(const AttnArgs& a) {
  __shared__ float sQ[RM * SPLIT_DMAX];  // queries scaled into the log2 domain; then the key groups' outputs
  __shared__ float sS[RM * SPLIT_T];     // a tile's scores, then its probabilities; then the merge weights
  __shared__ float sM[RM], sL[RM], sC[RM];
  __shared__ i64 sQo[RM], sOo[RM];
  // The register V path's partial outputs: one per warp and row (head sizes up to 128).
  __shared__ float sV[RM <= SPLIT_VROWS ? 4 * RM * 128 : 1];
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const i64 G = a.Hq / a.Hkv, R = G * a.L;
  const i64 split = (i64)blockIdx.x % a.nsplit, grp = (i64)blockIdx.x / a.nsplit;
  const int b = (int)(grp / a.Hkv), hk = (int)(grp % a.Hkv);
  const float sl2 = as_float(a.scale_log2);
  // The causal offset's load goes out with the queries' (and the appended rows' start).
  const i64 off = MASK_KIND == 3 ? load_offset(a) : 0;
  const SplitAppend ap = split_append(a, b, hk, (int)split);
  split_row_offsets(a, b, hk, (int)G, (int)R, sQo, sOo);
  // Row r of the block is query row r % L of q head hk * G + r / L.
#pragma unroll(LEAN ? 1 : 4)
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
  // many blocks as have a.min_keys each, up to the launch's; the others leave at once (they
  // take no part in the merge either), so a decode step's cost follows the rows written.
  i64 keys = a.S, chunk = a.chunk, nsplit = a.nsplit;
  if (MASK_KIND == 3) {
    keys = offset_keys_max(off, 0, a.L, a.S);
    const i64 want = (keys + a.min_keys - 1) / a.min_keys;
    nsplit = want < 1 ? 1 : want < a.nsplit ? want : a.nsplit;
    chunk = ((keys + nsplit - 1) / nsplit + 31) / 32 * 32;
    if (split >= nsplit) return SplitEnd{};  // the same for every thread of the block
  }
  const i64 k0 = split * chunk;
  i64 k1 = k0 + chunk < keys ? k0 + chunk : keys;
  if (CAUSAL && k1 > a.L) k1 = a.L;  // key j is visible to query rows >= j only
  const ST* kb = (const ST*)a.k + b * a.ks[0] + hk * a.ks[1];
  const ST* vb = (const ST*)a.v + b * a.vs[0] + hk * a.vs[1];
  const ST* akb = (const ST*)a.ak + b * a.aks[0] + hk * a.aks[1];
  const ST* avb = (const ST*)a.av + b * a.avs[0] + hk * a.avs[1];
  constexpr int VE = 16 / sizeof(ST);
  // Up to SPLIT_VROWS rows with V rows readable in 16-byte pieces (the host checks the strides,
  // a.vec the addresses): thread t owns piece t % P of keys t / P, t / P + RP, ... of each tile (P
  // pieces per row, RP rows per pass), loaded as the tile starts so that their latency overlaps
  // the score phase's (the per-key loop further down, for other sizes, waits on a load every few
  // keys).
  constexpr bool VROWS = !LEAN && RM <= SPLIT_VROWS;
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
#pragma unroll
        for (int i = 0; i < VK; ++i) {
          const int j = rs + i * RP;
          if (i < P && j < n) vreg[i] = *(const uint4*)(kv_row(vb, a.vs[2], avb, a.avs[2], ap, t0 + j) + pc * VE);
        }
      }
    }
    if (tid < n) {
      const i64 col = t0 + tid;
      const ST* kr = kv_row(kb, a.ks[2], akb, a.aks[2], ap, col);
      float s[RM];
#pragma unroll
      for (int r = 0; r < RM; ++r) s[r] = 0.0f;
      if (!LEAN && a.vec) {  // unit stride, 16-byte aligned rows, D a multiple of VE (the host checks)
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
    const bool c0 = c < a.Dv, c1 = c + CW < a.Dv;
#pragma unroll(LEAN ? 1 : 4)
    for (int j = kg; j < n; j += NKG) {
      const ST* vr = kv_row(vb, a.vs[2], avb, a.avs[2], ap, t0 + j);
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
  float* po = part_o + (grp * a.nsplit + split) * R * a.Dv;
  auto put = [&](i64 r, i64 col, float o) {
    if (alone) {
      ((ST*)a.out)[sOo[r] + col * a.os[3]] = STORE_T(o * (1.0f / sL[r]));
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
  if (alone) return SplitEnd{};
  return SplitEnd{true, (int)grp, (int)split, (int)nsplit, (int)R, sOo, sM, sL, sS, sC};
}

#if SPLIT_TC_HD && __CUDA_ARCH__ >= 800
// ---------------------------------------------------------------------------------------------
// The same blocks, chunks, partials and merge on tensor cores, for float16/bfloat16 with a head
// of SPLIT_TC_HD (64 or 128) for q, k and v and 16-byte rows: each of the block's warps (up to
// TW) takes tiles of 16 keys in turn. Scores S = Q K^T per tile come from mma.m16n8k16 with the
// block's rows as the 16 rows of A (zero past R) and 8 keys as B's columns: a lane's 16 contiguous
// bytes of a K row (loaded straight from global memory) take its fragment slots, Q's likewise,
// since the sum over the head is the same in any order. The online softmax runs on the accumulators
// (rows g and g + 8 of lane (g, t)); the probabilities, packed to 16 bits, are the A fragments of
// O += P V (the scores' C layout is that A layout), and V passes through the warp's shared tile for
// ldmatrix.trans. The warps' (m, l, o) combine through shared memory at the end. On CUDA cores the
// same work was thousands of dependent instructions a warp; here a tile is about 420 (Nsight
// Compute, H200), so a decode step's short cache is a chain of tiles a warp: 8 warps, not 4, halve
// it (129 keys: 2 tiles a warp, not 3).
#define TC_VROW (SPLIT_TC_HD + 8)  // a staged V row, padded so that ldmatrix's 8 rows hit distinct banks

template <int RM, int TW>
DEVI SplitEnd attention_split_tc(const AttnArgs& a) {
  constexpr int TD = SPLIT_TC_HD, KS = TD / 32, NT = TD / 8;
  constexpr int VP = 16 * TD / 8 / 32;  // 16-byte pieces of a 16-key V tile per lane
  constexpr int SM_V = TW * 16 * TC_VROW * 2, SM_O = 2 * RM * TD * 4;
  __shared__ __align__(16) unsigned char smem[SM_V > SM_O ? SM_V : SM_O];
  __shared__ float wm[TW][16], wl[TW][16], sM[16], sL[16], sInv[16];
  __shared__ i64 sQo[16], sOo[16];
  const int warps = (int)(blockDim.x >> 5);  // the launch's: TW, or fewer where groups are many
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int ns = (int)a.nsplit, Hkv = (int)a.Hkv, G = (int)(a.Hq / a.Hkv), L = (int)a.L, R = G * L;
  const int split = (int)blockIdx.x % ns, grp = (int)blockIdx.x / ns, b = grp / Hkv, hk = grp - b * Hkv;
  const float sl2 = as_float(a.scale_log2);
  const i64 off = MASK_KIND == 3 ? load_offset(a) : 0;
  const SplitAppend ap = split_append(a, b, hk, split);
  split_row_offsets(a, b, hk, G, R, sQo, sOo);
  int nsplit = ns;
  i64 keys = a.S, chunk = a.chunk;
  if (MASK_KIND == 3) {
    keys = offset_keys_max(off, 0, a.L, a.S);
    const i64 want = (keys + a.min_keys - 1) / a.min_keys;
    nsplit = want < 1 ? 1 : want < ns ? (int)want : ns;
    chunk = ((keys + nsplit - 1) / nsplit + 31) / 32 * 32;
    if (split >= nsplit) return SplitEnd{};  // the same for every thread of the block
  }
  __syncthreads();  // sQo, sOo
  // Rows g and g + 8 of the block as A fragments: lane t's elements 8t .. 8t + 7 of each 32 of the
  // head, one 16-byte load each where q's rows allow (a.vec: every address is 16-byte aligned).
  const bool qvec = a.vec && a.qs[3] == 1 && ((a.qs[0] | a.qs[1] | a.qs[2]) & 7) == 0;
  unsigned qf[2][KS][4];
  int row[2], head[2];
  i64 vis[2];  // keys [0, vis) visible to the row
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = g + hr * 8;
    row[hr] = r < R ? r % L : 0;
    head[hr] = hk * G + (r < R ? r / L : 0);
    vis[hr] = r < R ? a.S : 0;
    if (CAUSAL && vis[hr] > row[hr] + 1) vis[hr] = row[hr] + 1;
    if (MASK_KIND == 3) {
      const i64 v = offset_keys(off, row[hr], a.S);
      if (vis[hr] > v) vis[hr] = v;
    }
    const ST* qr = (const ST*)a.q + (r < R ? sQo[r] : 0);
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      V16 u = {0u, 0u, 0u, 0u};
      if (r < R && qvec) {
        u = *(const V16*)(qr + 32 * s + 8 * t);
      } else if (r < R) {
        unsigned w[4];
#pragma unroll 1
        for (int j = 0; j < 4; ++j) {
          const i64 d = 32 * s + 8 * t + 2 * j;
          w[j] = (unsigned)qr[d * a.qs[3]] | ((unsigned)qr[(d + 1) * a.qs[3]] << 16);
        }
        u = {w[0], w[1], w[2], w[3]};
      }
      qf[hr][s][0] = u.x, qf[hr][s][1] = u.y, qf[hr][s][2] = u.z, qf[hr][s][3] = u.w;
    }
  }
  const i64 k0 = split * chunk;
  i64 k1 = k0 + chunk < keys ? k0 + chunk : keys;
  if (CAUSAL && k1 > a.L) k1 = a.L;
  const ST* kb = (const ST*)a.k + b * a.ks[0] + hk * a.ks[1];
  const ST* vb = (const ST*)a.v + b * a.vs[0] + hk * a.vs[1];
  const ST* akb = (const ST*)a.ak + b * a.aks[0] + hk * a.aks[1];
  const ST* avb = (const ST*)a.av + b * a.avs[0] + hk * a.avs[1];
  unsigned short* vs = (unsigned short*)smem + warp * 16 * TC_VROW;
  float o[NT][4], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < NT; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  for (i64 kt = k0 + warp * 16; kt < k1; kt += 16 * warps) {
    // The tile's K and V rows, every load in flight at once (rows past k1 read row k1 - 1).
    V16 kv[2][KS], vv[VP];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const i64 key = kt + nt * 8 + g;
      const ST* kr = kv_row(kb, a.ks[2], akb, a.aks[2], ap, key < k1 ? key : k1 - 1) + 8 * t;
#pragma unroll
      for (int s = 0; s < KS; ++s) kv[nt][s] = *(const V16*)(kr + 32 * s);
    }
#pragma unroll
    for (int i = 0; i < VP; ++i) {
      const int piece = lane + 32 * i, j = piece / (TD / 8), col = piece % (TD / 8) * 8;
      vv[i] = *(const V16*)(kv_row(vb, a.vs[2], avb, a.avs[2], ap, kt + j < k1 ? kt + j : k1 - 1) + col);
    }
    float c[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        const unsigned a0[4] = {qf[0][s][0], qf[1][s][0], qf[0][s][1], qf[1][s][1]};
        const unsigned a1[4] = {qf[0][s][2], qf[1][s][2], qf[0][s][3], qf[1][s][3]};
        mma16816(c[nt], a0, kv[nt][s].x, kv[nt][s].y);
        mma16816(c[nt], a1, kv[nt][s].z, kv[nt][s].w);
      }
    }
    // c[nt][i]: row g + (i / 2) * 8, key kt + nt * 8 + 2t + i % 2, scaled into the log2 domain.
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = NEG_INF;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const i64 key = kt + nt * 8 + 2 * t + e;
          bool keep = key < k1 && key < vis[hr];
          float x = c[nt][hr * 2 + e] * sl2;
          if (keep) x += mask_term(a, b, head[hr], row[hr], key, &keep);
          c[nt][hr * 2 + e] = keep ? x : NEG_INF;
          mx = fmaxf(mx, c[nt][hr * 2 + e]);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[hr], mx), m_use = m_new == NEG_INF ? 0.0f : m_new;
      const float corr = fexp2(m[hr] - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = fexp2(c[nt][hr * 2 + e] - m_use);
          c[nt][hr * 2 + e] = p;
          sum += p;
        }
      l[hr] = l[hr] * corr + sum;
      m[hr] = m_new;
#pragma unroll
      for (int d = 0; d < NT; ++d) {
        o[d][hr * 2] *= corr;
        o[d][hr * 2 + 1] *= corr;
      }
    }
    const unsigned pa[4] = {pack2(c[0][0], c[0][1]), pack2(c[0][2], c[0][3]), pack2(c[1][0], c[1][1]),
                            pack2(c[1][2], c[1][3])};
    __syncwarp();  // the previous tile's ldmatrix reads are done
#pragma unroll
    for (int i = 0; i < VP; ++i) {
      const int piece = lane + 32 * i, j = piece / (TD / 8), col = piece % (TD / 8) * 8;
      *(V16*)(vs + j * TC_VROW + col) = vv[i];
    }
    __syncwarp();
    // ldmatrix.x4.trans: lanes 8q..8q+7 address rows of matrix q (keys (q % 2) * 8.., columns
    // of the n-tile pair's (q / 2)-th tile); each lane gets B fragments of two n-tiles.
    const unsigned vbase = smem_addr(vs + ((lane >> 3) & 1) * 8 * TC_VROW + (lane & 7) * TC_VROW + (lane >> 4) * 8);
#pragma unroll
    for (int d = 0; d < NT; d += 2) {
      unsigned b0, b1, b2, b3;
      ldsm_x4_t(vbase + d * 8 * 2, b0, b1, b2, b3);
      mma16816(o[d], pa, b0, b1);
      mma16816(o[d + 1], pa, b2, b3);
    }
  }
  // Each warp's row sums over its lanes t; the block's rows combine through shared memory:
  // M = max m_w, o = sum_w 2^(m_w - M) o_w, warps 0 and 1 storing, then each next pair adding
  // (plain stores, no atomics, one copy of the code: it runs once a step, cold in the instruction
  // cache).
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
  }
  __syncthreads();  // the V tiles are done: smem becomes the warps' outputs
  if (t == 0)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      if (g + hr * 8 < RM) wm[warp][g + hr * 8] = m[hr], wl[warp][g + hr * 8] = l[hr];
  __syncthreads();
  float f[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = g + hr * 8 < RM ? g + hr * 8 : 0;
    float M = wm[0][r];
    for (int w = 1; w < warps; ++w) M = fmaxf(M, wm[w][r]);
    f[hr] = m[hr] == NEG_INF ? 0.0f : fexp2(m[hr] - M);
  }
  float* wo = (float*)smem;  // [2][RM][TD]
#pragma unroll 1
  for (int round = 0; round < warps / 2; ++round) {
    if (warp >> 1 == round)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int r = g + hr * 8;
        if (r >= RM || r >= R) continue;
        float* dst = wo + ((warp & 1) * RM + r) * TD + 2 * t;
#pragma unroll
        for (int d = 0; d < NT; ++d) {
          float2 x = make_float2(o[d][hr * 2] * f[hr], o[d][hr * 2 + 1] * f[hr]);
          if (round) {
            const float2 y = *(const float2*)(dst + d * 8);
            x.x += y.x, x.y += y.y;
          }
          *(float2*)(dst + d * 8) = x;
        }
      }
    __syncthreads();
  }
  if (tid < R) {
    float M = wm[0][tid];
    for (int w = 1; w < warps; ++w) M = fmaxf(M, wm[w][tid]);
    float Lsum = 0.0f;
    for (int w = 0; w < warps; ++w)
      if (wm[w][tid] != NEG_INF) Lsum += fexp2(wm[w][tid] - M) * wl[w][tid];
    sM[tid] = M;
    sL[tid] = Lsum;
    sInv[tid] = 1.0f / Lsum;  // no visible key: 0 * (1 / 0), the NaN of a softmax over nothing
  }
  __syncthreads();
  const bool alone = nsplit == 1;
  float* po = (float*)a.ws + (i64)(grp * ns + split) * R * TD;  // [groups][a.nsplit][R][Dv]
#pragma unroll 1
  for (int r = 0; r < R; ++r) {
    const int col = tid;  // TD <= 128 columns: one a thread
    if (col >= TD) continue;
    const float v = wo[r * TD + col] + wo[(RM + r) * TD + col];
    if (alone)
      ((ST*)a.out)[sOo[r] + col * a.os[3]] = STORE_T(v * sInv[r]);
    else
      po[r * TD + col] = v;
  }
  if (alone) return SplitEnd{};
  __syncthreads();  // wo is read; split_merge reuses smem
  return SplitEnd{true, grp, split, nsplit, R, sOo, sM, sL, (float*)smem, sInv};
}
#endif  // SPLIT_TC_HD

// Where the tensor-core path is compiled, the CUDA-core body only serves what it cannot: the
// launch's aligned form runs the tensor-core entry points below where they exist.
#define SPLIT_LEAN (SPLIT_TC_HD && __CUDA_ARCH__ >= 800)
// A split entry point's body: the CUDA-core path, then the finish.
template <int RM>
DEVI void attention_split_entry(const AttnArgs& a) {
  const SplitEnd e = attention_split<RM, SPLIT_LEAN>(a);
  if (e.merge) split_finish<RM>(a, e);
}
#if HAS_SPLIT1
extern "C" __global__ void __launch_bounds__(128) tripy_attention_split1(const AttnArgs a) { enter_after_previous(); attention_split_entry<1>(a); }
#endif
#if HAS_SPLIT16
// SPLIT_RM rows (2 to 16: attention_split_capacity), as few as the module's sizes need.
extern "C" __global__ void __launch_bounds__(128) tripy_attention_split16(const AttnArgs a) {
  enter_after_previous();
  attention_split_entry<SPLIT_RM>(a);
}
#endif

#if SPLIT_TC_HD && __CUDA_ARCH__ >= 800
// The tensor-core form's entry points (the launch's aligned form where q, k and v have the head
// SPLIT_TC_HD and 16-byte rows): up to SPLIT_TC_WARPS warps a block, as the launch says (8 where
// the blocks leave most SMs idle, a decode step's few heads: shorter chains a warp; else 4, two
// blocks an SM).
#define SPLIT_TC_WARPS 8
template <int RM>
DEVI void attention_split_tc_entry(const AttnArgs& a) {
  const SplitEnd e = attention_split_tc<RM, SPLIT_TC_WARPS>(a);
  if (e.merge) split_finish<RM>(a, e);
}
#if HAS_SPLIT1
extern "C" __global__ void __launch_bounds__(32 * SPLIT_TC_WARPS) tripy_attention_split1_tc(const AttnArgs a) {
  enter_after_previous();
  attention_split_tc_entry<1>(a);
}
#endif
#if HAS_SPLIT16
extern "C" __global__ void __launch_bounds__(32 * SPLIT_TC_WARPS) tripy_attention_split16_tc(const AttnArgs a) {
  enter_after_previous();
  attention_split_tc_entry<SPLIT_RM>(a);
}
#endif
#endif

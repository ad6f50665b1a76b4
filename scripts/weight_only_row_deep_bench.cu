// The one-row int4 tile (kernels/weight_only_frag.cuh, wo_frag_row) against forms of it that ask
// for the weight's chunks and their scales several chunks ahead: the kernel file's tile keeps one
// chunk in flight a warp for both (a ring of 2 slots, the scales loaded one chunk ahead), so each
// chunk waits on a memory round trip whichever of the two is deepened alone. Llama-3-8B's int4
// products at one row (groups of 128 with zero points), weight copies past the L2, back-to-back
// launches, best split of a block's warps; each form's outputs against the kernel file's tile.
// A diagnostic; on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wod scripts/weight_only_row_deep_bench.cu && /tmp/wod
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_frag.cuh"
#include "weight_only_bench_util.cuh"

// One chunk of the one-row tile's arithmetic, as wo_frag_row does it: rows g and g + 8's weight
// words, their {scale, zero point} pairs (bfloat16 each), the chunk's x (its pieces at xc) and
// {sum x 2^-24, 2^24 / scale}, added into acc.
DEVI void deep_chunk(const V16& va, const V16& vb, const unsigned (&sz)[2], float2 sm, float zf, const uint4* xc,
                     float (&acc)[2]) {
  const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
  float lo[4] = {}, hi[4] = {};
#pragma unroll
  for (int k = 0; k < 4; ++k) wo_row_mmas<4>(lo, hi, wa[k], wb[k], xc[k], k);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float s = __uint_as_float(sz[h] << 16) * sm.y, o = fmaf(zf, __uint_as_float(sz[h] & 0xffff0000u), 8.0f);
    acc[h] = fmaf(s, fmaf(-o, sm.x, fmaf(hi[2 * h], 0.0625f, lo[2 * h])), acc[h]);
  }
}

// DEEP_RING: the weight through a ring of P slots in shared memory (x's room cut to MAXK values);
// else P - 1 chunks ahead in registers (x's room for WO_ROW_MAX_K values). Either way chunk i's
// scales and zero points are loaded when its weight is asked for, P - 1 chunks ahead.
template <int MAXK, int P, bool DEEP_RING>
DEVI void row_deep(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<4> C;
  __shared__ uint4 xs[MAXK / 8];
  __shared__ float2 sums[MAXK / C::kValues];
  constexpr int RING = DEEP_RING ? P : 1;
  __shared__ V16 ring[RING][2][WO_BLOCK];
  float (*part)[2 * 32] = reinterpret_cast<float (*)[2 * 32]>(&ring[0][0][0]);
  static_assert(sizeof(ring) >= sizeof(float) * 64 * 8, "the ring holds the partial sums");
  const WoMmaPlace at = wo_mma_place<8>(a);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws;
  const int N = static_cast<int>(a.N), n0 = static_cast<int>(at.n0), K = static_cast<int>(a.K);
  const int chunks = n0 < N ? K / C::kValues : 0;
  const int gshift = a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / C::kValues)) - 1;
  const int ra = min(n0 + g8, N - 1), rb = min(n0 + g8 + 8, N - 1);
  const signed char* wp = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16 + ws * 64;
  const int wd = (rb - ra) * static_cast<int>(a.row_bytes), sd = (rb - ra) * static_cast<int>(a.groups);
  const int wstep = split * 64;
  const S* sp = (const S*)a.scale + (i64)ra * a.groups;
  const S* zp = (const S*)(a.zero ? a.zero : a.scale) + (i64)ra * a.groups;
  const float zf = a.zero ? 1.0f : 0.0f;
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  V16 qa[P], qb[P];  // DEEP_RING false: chunk i's weight words in slot i % P
  unsigned sz[P][2];  // chunk i's {scale, zero point} of rows g and g + 8, as bfloat16 pairs
  auto ask = [&](int i, int u) {  // chunk i's weight and scales into slot u
    if (i < mine) {
      const int off = i * wstep, grp = (ws + i * split) >> gshift;
      if (DEEP_RING) {
        wo_cp16(&ring[u][0][threadIdx.x], wp + off);
        wo_cp16(&ring[u][1][threadIdx.x], wp + off + wd);
      } else {
        qa[u] = wo_stream(wp + off), qb[u] = wo_stream(wp + off + wd);
      }
      sz[u][0] = sp[grp] | (unsigned)zp[grp] << 16;
      sz[u][1] = sp[sd + grp] | (unsigned)zp[sd + grp] << 16;
    }
    if (DEEP_RING) wo_commit();
  };
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) ask(i, i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) ask(i, i);
  wo_row_x<4, MAXK>((const S*)a.x + at.m0 * a.K, K, xs, sums);
  __syncthreads();
  float acc[2] = {};
#pragma unroll 1
  for (int i0 = 0; i0 < mine; i0 += P) {
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int i = i0 + u;
      if (i >= mine) break;
      ask(i + P - 1, (u + P - 1) % P);
      const int c = ws + i * split;
      V16 va, vb;
      if (DEEP_RING) {
        wo_wait<P - 1>();
        va = ring[u][0][threadIdx.x], vb = ring[u][1][threadIdx.x];
      } else {
        va = qa[u], vb = qb[u];
      }
      deep_chunk(va, vb, sz[u], sums[c], zf, xs + c * C::kPieces + t4 * (C::kPieces / 4), acc);
    }
  }
  if (DEEP_RING) wo_wait<0>();
  __syncthreads();  // every lane's copies landed and read: the ring becomes `part`
  if (!split_sum_lanes<2>(acc, part, split, g, ws)) return;
  S* out = (S*)a.out + at.m0 * a.N;
  if (t4 == 0) {
    if (n0 + g8 < N) out[n0 + g8] = f2b(acc[0]);
    if (n0 + g8 + 8 < N) out[n0 + g8 + 8] = f2b(acc[1]);
  }
}


// T tiles of 16 weight rows a warp group, one after another, after one x prologue a block: a
// warp's (tile, chunk) units stream through one ring of P slots, so the next tile's first chunks
// are in flight while this tile's last ones are multiplied; each tile's sums meet across the split
// in `part` (two barriers a tile).
template <int MAXK, int P, int T>
DEVI void row_multi(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<4> C;
  __shared__ uint4 xs[MAXK / 8];
  __shared__ float2 sums[MAXK / C::kValues];
  __shared__ V16 ring[P][2][WO_BLOCK];
  __shared__ float part[WO_BLOCK / 32][64];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, t4 = lane & 3;
  const int split = (int)(a.mma_split & 0xff), g = warp / split, ws = warp % split, gpb = 8 / split;
  const int N = static_cast<int>(a.N), K = static_cast<int>(a.K);
  const int chunks = K / C::kValues;
  const int gshift = a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / C::kValues)) - 1;
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  const int wstep = split * 64;
  const float zf = a.zero ? 1.0f : 0.0f;
  auto n0_of = [&](int tt) { return ((blockIdx.x * T + tt) * gpb + g) * 16; };
  unsigned sz[P][2];
  // The unit to ask for next: its tile and chunk, and its tile's row offsets.
  int at_tile = 0, at_i = 0;
  auto ask = [&](int u) {
    if (at_tile < T && n0_of(at_tile) < N && mine > 0) {
      const int n0 = n0_of(at_tile), ra = min(n0 + g8, N - 1), rb = min(n0 + g8 + 8, N - 1);
      const signed char* wp = (const signed char*)a.w + (i64)ra * a.row_bytes + t4 * 16 + ws * 64 + at_i * wstep;
      const int wd = (rb - ra) * static_cast<int>(a.row_bytes), sd = (rb - ra) * static_cast<int>(a.groups);
      wo_cp16(&ring[u][0][threadIdx.x], wp);
      wo_cp16(&ring[u][1][threadIdx.x], wp + wd);
      const int grp = (ws + at_i * split) >> gshift;
      const S* sp = (const S*)a.scale + (i64)ra * a.groups + grp;
      const S* zp = (const S*)(a.zero ? a.zero : a.scale) + (i64)ra * a.groups + grp;
      sz[u][0] = sp[0] | (unsigned)zp[0] << 16;
      sz[u][1] = sp[sd] | (unsigned)zp[sd] << 16;
    }
    wo_commit();
    if (++at_i == mine) at_i = 0, ++at_tile;
  };
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) ask(i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) ask(i);
  wo_row_x<4, MAXK>((const S*)a.x, K, xs, sums);
  __syncthreads();
  const int units = T * mine;
  float acc[2] = {};
  int tile = 0, i = 0;
#pragma unroll 1
  for (int j0 = 0; j0 < units; j0 += P) {
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int j = j0 + u;
      if (j >= units) break;
      ask((u + P - 1) % P);
      const int c = ws + i * split;
      wo_wait<P - 1>();
      deep_chunk(ring[u][0][threadIdx.x], ring[u][1][threadIdx.x], sz[u], sums[c], zf,
                 xs + c * C::kPieces + t4 * (C::kPieces / 4), acc);
      if (++i == mine) {  // the tile's last chunk: its sums over the split, written
        const int n0 = n0_of(tile);
        float (*pp)[64] = part;
        pp[warp][lane] = acc[0], pp[warp][32 + lane] = acc[1];
        __syncthreads();
        if (ws == 0 && t4 == 0) {
          float s0 = 0.0f, s1 = 0.0f;
          for (int w = 0; w < split; ++w) s0 += pp[g * split + w][lane], s1 += pp[g * split + w][32 + lane];
          S* out = (S*)a.out;
          if (n0 + g8 < N) out[n0 + g8] = f2b(s0);
          if (n0 + g8 + 8 < N) out[n0 + g8 + 8] = f2b(s1);
        }
        __syncthreads();
        acc[0] = acc[1] = 0.0f, i = 0, ++tile;
      }
    }
  }
  wo_wait<0>();
}

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_base(const WoArgs a) { wo_frag_row<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_ring4(const WoArgs a) { row_deep<4096, 4, true>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_reg2(const WoArgs a) { row_deep<14336, 2, false>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_reg3(const WoArgs a) { row_deep<14336, 3, false>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_reg4(const WoArgs a) { row_deep<14336, 4, false>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 4) k_m2t2(const WoArgs a) { row_multi<14336, 2, 2>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 4) k_m2t4(const WoArgs a) { row_multi<14336, 2, 4>(a); }

int main(int argc, char** argv) {
  struct Form { const char* name; void (*fn)(WoArgs); long max_k; int tiles; } forms[] = {
      {"base", k_base, 14336}, {"ring4", k_ring4, 4096}, {"reg2", k_reg2, 14336}, {"reg3", k_reg3, 14336},
      {"reg4", k_reg4, 14336}, {"m2t2", k_m2t2, 14336, 2}, {"m2t4", k_m2t4, 14336, 4}};
  print_forms(forms);
  for (const LlamaShape& s : llama_shapes_to_run()) {
    PackedRows p(s.N, s.K);
    WoArgs& a = p.a;
    int tiles = 1;  // tiles of 16 weight rows a warp group (row_multi)
    auto place = [&](int split) {
      a.mma_split = split | 0x100;  // the weight a constant: the first chunks asked for before the wait
      a.mma_blocks = (p.N + (8 / split) * 16 * tiles - 1) / ((8 / split) * 16 * tiles);
    };
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, p.N, p.K, p.wbytes / 1e6);
    for (auto& f : forms) {
      if (p.K > f.max_k) {
        printf(" %s -", f.name);
        continue;
      }
      tiles = f.tiles ? f.tiles : 1;
      float best = 1e9;
      int best_split = 0;
      for (int split : {1, 2, 4, 8}) {
        place(split);
        a.out = (i64)p.out;
        const float t = time_us([&](int i) {
          a.w = (i64)p.copy(i);
          f.fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
        });
        if (t < best) best = t, best_split = split;
      }
      place(4);
      a.w = (i64)p.copy(0), a.out = (i64)(f.fn == k_base ? p.ref : p.out);
      f.fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
      CK(cudaDeviceSynchronize());
      printf(" %s %6.2f (s%d%s)", f.name, best, best_split, f.fn != k_base && p.wrong() ? " WRONG" : "");
    }
    printf(" | read floor %6.2f\n", p.read_floor_us());
  }
}

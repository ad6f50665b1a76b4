// The few-rows int4 tile (kernels/weight_only_frag.cuh, wo_few: 16 rows of x laid out by wo_few_x,
// a warp group of 16 weight rows whose `split` warps walk K) against a K-sliced form, as the
// one-row tile's (wo_row_sliced): each warp of a block takes every W-th chunk of K, loads that
// chunk's x fragments (both tiles of 8 rows of x) and sums once, and meets them with RT tiles of
// 16 weight rows; the warps sum their rows once at the end. Llama-3-8B's int4 products at 16 rows
// (groups of 128 with zero points), weight copies past the L2, back-to-back launches of the tile
// alone (the layout once), best split or warps; each form's outputs against wo_few's; with x's
// high-nibble pairs laid out a sixteenth (h), the mmas over both nibbles add into one sum. A
// diagnostic; on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -Iscripts -o /tmp/wofk scripts/weight_only_few_kslice_bench.cu && /tmp/wofk
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

// NT tiles of 8 rows of x (wo_few_x's layout at a.x), RT tiles of 16 weight rows a block of
// blockDim.x / 32 warps (at most MAXW). HI16 (int4; x laid out by wo_few_x<.., true>): the mmas
// over high and low nibbles add into one sum (one chain of mmas a tile of x, one fixup less an
// entry).
template <int NT, int BITS, int RT, bool HI16 = false>
DEVI void few_sliced(const WoArgs& a) {
  typedef unsigned short S;
  typedef WoRowChunk<BITS> C;
  constexpr int PL = C::kPieces / 4, MAXW = RT >= 4 ? 8 : 16;  // x's pieces a lane holds a chunk
  __shared__ float red[MAXW][RT * 16][NT * 8];
  const int W = static_cast<int>(blockDim.x) / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int N = static_cast<int>(a.N), M = static_cast<int>(a.rows), chunks = static_cast<int>(a.K) / C::kValues;
  const int n0 = blockIdx.x * RT * 16;
  const WoSlicedRows<RT, C::kValues> rows(a, n0, g, t);
  const float zf = a.zero ? 1.0f : 0.0f, offset = BITS == 4 ? 8.0f : BITS == 8 ? 128.0f : 0.0f;
  const float unit = BITS == WO_E4M3 ? 0x1p-24f : 1.0f;
  const uint4* frags = reinterpret_cast<const uint4*>(a.x) + lane;
  const float4* sums = reinterpret_cast<const float4*>(reinterpret_cast<const uint4*>(a.x) + NT * a.K) + t;
  float acc[RT][NT][4] = {};
  V16 q[RT][2];
  const bool early = wo_early(a) && w < chunks;
  if (early) rows.ask(q, w);
  enter_after_previous();
#pragma unroll 1
  for (int c = w; c < chunks; c += W) {
    if (c != w || !early) rows.ask(q, c);
    S sv[RT][2], zv[RT][2];
    rows.scales(sv, zv, c);
    V16 b[NT][PL];
    float4 sx[NT];  // rows 2 t and 2 t + 1 of each tile of x: {sum 2^-24, 2^24 / scale} each
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int p = 0; p < PL; ++p) b[nt][p] = wo_load_x(reinterpret_cast<const S*>(frags + ((c * NT + nt) * PL + p) * 32));
      sx[nt] = __ldg(sums + (c * NT + nt) * 4);
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      float lo[NT][4] = {}, hi[NT][4] = {};
#pragma unroll
      for (int k = 0; k < 4; ++k)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const V16& bp = b[nt][BITS == 4 ? k : k >> 1];
          wo_row_mmas<BITS>(lo[nt], HI16 ? lo[nt] : hi[nt], (&q[r][0].x)[k], (&q[r][1].x)[k],
                            make_uint4(bp.x, bp.y, bp.z, bp.w), k);
        }
      float s_[2], o_[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) s_[h] = b2f(sv[r][h]), o_[h] = fmaf(zf, b2f(zv[r][h]), offset);
      // Entry e: weight row g (e < 2) or g + 8, x's row 8 nt + 2 t + (e & 1).
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float xs = e & 1 ? sx[nt].z : sx[nt].x, xi = e & 1 ? sx[nt].w : sx[nt].y;
          const float qv = (HI16 ? lo[nt][e] : fmaf(hi[nt][e], 0.0625f, lo[nt][e])) * unit;
          acc[r][nt][e] = fmaf(s_[e >> 1] * xi, fmaf(-o_[e >> 1], xs, qv), acc[r][nt][e]);
        }
    }
  }
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) red[w][r * 16 + g + 8 * (e >> 1)][nt * 8 + 2 * t + (e & 1)] = acc[r][nt][e];
  __syncthreads();
  S* out = (S*)a.out;
  for (int i = threadIdx.x; i < RT * 16 * NT * 8; i += W * 32) {
    const int row = i / (NT * 8), col = i % (NT * 8);
    float sum = 0.0f;
    for (int v = 0; v < W; ++v) sum += red[v][row][col];
    if (n0 + row < N && col < M) out[(i64)col * N + n0 + row] = f2b(sum);
  }
}

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_few(const WoArgs a) { wo_few<2, 4>(a); }
extern "C" __global__ void k_few_x(const WoArgs a) { wo_few_x<2, 4>(a); }
extern "C" __global__ void k_few_x16(const WoArgs a) { wo_few_x<2, 4, true>(a); }
#define KS(RT, THREADS, HI16, NAME) \
  extern "C" __global__ void __launch_bounds__(THREADS) NAME(const WoArgs a) { few_sliced<2, 4, RT, HI16>(a); }
// 4 tiles: at most 8 warps (more registers, no spills).
KS(1, 512, false, k_ks1) KS(2, 512, false, k_ks2) KS(4, 256, false, k_ks4)
KS(1, 512, true, k_ks1h) KS(2, 512, true, k_ks2h) KS(4, 256, true, k_ks4h)

int main() {
  // h: x's high-nibble pairs laid out a sixteenth (k_few_x16), one chain of sums a tile of x.
  struct Form { const char* name; void (*fn)(WoArgs); int rt, warps; bool hi16; } forms[] = {
      {"few", k_few, 0, 8, false},      {"r1w4", k_ks1, 1, 4, false},    {"r1w8", k_ks1, 1, 8, false},
      {"r1w16", k_ks1, 1, 16, false},   {"r2w4", k_ks2, 2, 4, false},    {"r2w8", k_ks2, 2, 8, false},
      {"r2w16", k_ks2, 2, 16, false},   {"r4w4", k_ks4, 4, 4, false},    {"r4w8", k_ks4, 4, 8, false},
      {"r1w8h", k_ks1h, 1, 8, true},    {"r1w16h", k_ks1h, 1, 16, true}, {"r2w4h", k_ks2h, 2, 4, true},
      {"r2w8h", k_ks2h, 2, 8, true},    {"r2w16h", k_ks2h, 2, 16, true}, {"r4w4h", k_ks4h, 4, 4, true},
      {"r4w8h", k_ks4h, 4, 8, true}};
  print_forms(forms);
  const int rows = 16;
  for (const LlamaShape& s : llama_shapes_to_run()) {
    Int4Rows p(s.N, s.K, rows);
    WoArgs& a = p.a;
    // x laid out twice: as wo_few_x lays it out, and with its high-nibble pairs a sixteenth.
    void* lay[2];
    const unsigned grid = (unsigned)((16 * p.K / 8 + 255) / 256);
    for (int h = 0; h < 2; ++h) {
      CK(cudaMalloc(&lay[h], 16 * p.K * 2 + p.K / 128 * 16 * 8));
      a.out = (i64)lay[h];
      (h ? k_few_x16 : k_few_x)<<<grid, 256>>>(a);
    }
    CK(cudaDeviceSynchronize());
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, p.N, p.K, p.wbytes / 1e6);
    float best_ks = 1e9;
    const char* best_name = "";
    for (auto& f : forms) {
      const bool base = f.fn == k_few;
      a.x = (i64)lay[f.hi16];
      unsigned blocks = base ? 0 : (unsigned)((p.N + f.rt * 16 - 1) / (f.rt * 16)), threads = f.warps * 32;
      auto place = [&](int split) {  // wo_few's: 8 / split groups of 16 weight rows a block
        a.mma_split = split | 0x100;  // the weight a constant: the first chunks asked for before the wait
        a.mma_blocks = (p.N + (8 / split) * 16 - 1) / ((8 / split) * 16);
        blocks = (unsigned)a.mma_blocks;
      };
      float best = 1e9;
      int best_split = 0;
      for (int split : base ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{0}) {
        if (base) place(split);
        a.out = (i64)p.out;
        const float t = time_us([&](int i) {
          a.w = (i64)p.copy(i);
          f.fn<<<blocks, threads>>>(a);
        });
        if (t < best) best = t, best_split = split;
      }
      if (base) place(2);
      a.w = (i64)p.copy(0), a.out = (i64)(base ? p.ref : p.out);
      f.fn<<<blocks, threads>>>(a);
      CK(cudaDeviceSynchronize());
      if (base) {
        printf(" few %6.2f (s%d) |", best, best_split);
      } else {
        printf(" %s %6.2f%s", f.name, best, p.wrong() ? " WRONG" : "");
        if (best < best_ks) best_ks = best, best_name = f.name;
      }
    }
    printf(" | best %s %6.2f | read floor %6.2f\n", best_name, best_ks, p.read_floor_us());
    cudaFree(lay[0]), cudaFree(lay[1]);
  }
}

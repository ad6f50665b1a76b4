// Sixteen rows of x (a decode step of 16 sequences) against Llama-3-8B's int4 products (groups of
// 128 with zero points): the register-fed tile of 16 rows of kernels/weight_only_frag.cuh
// (wo_frag4<2, 2>: 32 weight rows a warp group, each lane's next chunk in registers; 168 registers,
// so one block a multiprocessor) against the same arithmetic with the weight fed by a cp.async ring
// in shared memory (no registers hold the next chunk: with two slots 128 registers without a bound,
// so two blocks a multiprocessor; with three 134; bounded to two blocks, ptxas spills 44 bytes
// instead), each against the CUDA-core rows' outputs for all 16 rows. A diagnostic for the next
// form of the batch-16 products; run on the GPU machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wo16 scripts/weight_only_rows16_bench.cu && /tmp/wo16
// Prints, per shape, each kernel's best time over the splits (µs), its GB/s and the largest
// difference of its outputs from the rows kernel's (over the largest output).
#include <algorithm>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_frag.cuh"
#include "weight_only_bench_util.cuh"

// wo_frag4<2, WT> with the weight through a ring of P slots: lane (g, t) copies its 16 bytes of
// rows g and g + 8 of each of the WT tiles of 16 weight rows, P - 1 chunks ahead, and reads back
// only what it copied (no barrier); x, its pairs and its sums' mmas as wo_frag4's.
template <int WT, int P>
DEVI void wo_frag4_ring(const WoArgs& a) {
  typedef unsigned short S;
  constexpr int NT = 2;
  __shared__ V16 ring[P][2 * WT][WO_BLOCK];
  // The split's partial sums reuse the ring once every lane's copies have landed and been read.
  float (*part)[WT * NT * 4 * 32] = reinterpret_cast<float (*)[WT * NT * 4 * 32]>(&ring[0][0][0]);
  static_assert(sizeof(ring) >= sizeof(float) * (WO_BLOCK / 32) * WT * NT * 4 * 32, "part fits the ring");
  const WoMmaPlace at = wo_mma_place<8 * NT>(a, 16 * WT);
  const int g8 = at.g8, t4 = at.t4, split = at.split, g = at.g, ws = at.ws, M = at.M;
  const int N = (int)a.N, n0 = (int)at.n0;
  // One address for this lane's row g of the first tile and 32-bit offsets to its other rows
  // (fewer registers: two blocks a multiprocessor).
  const int ra0 = min(n0 + g8, N - 1);
  const signed char* w0 = (const signed char*)a.w + (i64)ra0 * a.row_bytes + t4 * 16 + ws * 64;
  const S* s0 = (const S*)a.scale + (i64)ra0 * a.groups;
  const S* z0 = (const S*)(a.zero ? a.zero : a.scale) + (i64)ra0 * a.groups;  // read, times 0, where none
  int woff[2 * WT], soff[2 * WT];
#pragma unroll
  for (int r = 0; r < 2 * WT; ++r) {
    const int row = min(n0 + 8 * r + g8, N - 1) - ra0;  // rows g, g + 8 of tile 0, then of tile 1
    woff[r] = row * (int)a.row_bytes, soff[r] = row * (int)a.groups;
  }
  const float zf = a.zero ? 1.0f : 0.0f;
  const S* x = (const S*)a.x + at.m0 * a.K + t4 * 32;
  int xo[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xo[nt] = (8 * nt + g8 < M ? 8 * nt + g8 : M - 1) * (int)a.K;
  const int chunks = n0 < N ? (int)(a.K / 128) : 0, cpg = (int)(a.group / 128);
  const int gshift = (cpg & (cpg - 1)) == 0 ? __ffs(cpg) - 1 : -1;
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  const i64 wstep = split * 64;
  const signed char* wp = w0;
  auto copy = [&](int i) {  // this warp's i-th chunk into slot i % P (a group of copies a call, empty or not)
    if (i < mine) {
#pragma unroll
      for (int r = 0; r < 2 * WT; ++r) wo_cp16(&ring[i % P][r][threadIdx.x], wp + woff[r]);
      wp += wstep;
    }
    wo_commit();
  };
  // Each tile's scales and zero points of rows g and g + 8 as bfloat16 pairs (half the registers).
  unsigned sv[WT], zv[WT];
  auto fetch_s = [&](int c) {
    const int grp = gshift >= 0 ? c >> gshift : c / cpg;
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) {
      sv[wt] = (unsigned)s0[soff[2 * wt] + grp] | (unsigned)s0[soff[2 * wt + 1] + grp] << 16;
      zv[wt] = (unsigned)z0[soff[2 * wt] + grp] | (unsigned)z0[soff[2 * wt + 1] + grp] << 16;
    }
  };
  const bool early = wo_early(a);
  if (early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  enter_after_previous();
  if (!early)
#pragma unroll
    for (int i = 0; i < P - 1; ++i) copy(i);
  if (mine > 0) fetch_s(ws);
  float acc[WT][NT][4] = {};
  int c = ws;
#pragma unroll 1
  for (int i = 0; c < chunks; c += split, ++i) {
    copy(i + P - 1);
    unsigned csv[WT], czv[WT];
#pragma unroll
    for (int wt = 0; wt < WT; ++wt) csv[wt] = sv[wt], czv[wt] = zv[wt];
    if (c + split < chunks) fetch_s(c + split);
    const S* xc = x + c * 128;
    float cq[WT][NT][4] = {}, cs[NT][4] = {};
    wo_wait<P - 1>();
#pragma unroll
    for (int i4 = 0; i4 < 4; ++i4) {
      unsigned b[NT][4];
      const unsigned one = 0x3f803f80u;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        wo_pair_x<4>(wo_load_x(xc + xo[nt] + 8 * i4), b[nt]);
        wo_mma_nv<true>(cs[nt], one, one, one, one, b[nt][0], b[nt][1]);
        wo_mma_nv<true>(cs[nt], one, one, one, one, b[nt][2], b[nt][3]);
      }
#pragma unroll
      for (int wt = 0; wt < WT; ++wt) {
        const unsigned wu = (&ring[i % P][2 * wt][threadIdx.x].x)[i4], wl = (&ring[i % P][2 * wt + 1][threadIdx.x].x)[i4];
        unsigned lo[4], hi[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          lo[j] = wo_mask_or(wu >> (4 * j), 0x000f000fu, 0x43004300u);
          hi[j] = wo_mask_or(wl >> (4 * j), 0x000f000fu, 0x43004300u);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          wo_mma_nv<true>(cq[wt][nt], lo[0], hi[0], lo[1], hi[1], b[nt][0], b[nt][1]);
          wo_mma_nv<true>(cq[wt][nt], lo[2], hi[2], lo[3], hi[3], b[nt][2], b[nt][3]);
        }
      }
    }
#pragma unroll
    for (int wt = 0; wt < WT; ++wt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = __uint_as_float(e < 2 ? csv[wt] << 16 : csv[wt] & 0xffff0000u);
          const float o = fmaf(zf, __uint_as_float(e < 2 ? czv[wt] << 16 : czv[wt] & 0xffff0000u), 136.0f);
          acc[wt][nt][e] = fmaf(s, fmaf(-o, cs[nt][e], cq[wt][nt][e]), acc[wt][nt][e]);
        }
  }
  wo_wait<0>();
  if (split > 1) __syncthreads();  // every lane's copies landed and read: the ring becomes `part`
  if (!split_sum_lanes<WT * NT * 4>(&acc[0][0][0], part, split, g, ws)) return;
  S* out = (S*)a.out + at.m0 * a.N;
#pragma unroll
  for (int wt = 0; wt < WT; ++wt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + 16 * wt + (e >> 1) * 8 + g8;
        const int m = 8 * nt + 2 * t4 + (e & 1);
        if (m < M && n < N) out[m * a.N + n] = f2b(acc[wt][nt][e]);
      }
}

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_frag32(const WoArgs a) { wo_frag4<2, 2>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 2) k_frag16_2(const WoArgs a) { wo_frag4<2, 1>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 2) k_ring32(const WoArgs a) { wo_frag4_ring<2, 2>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 2) k_ring32_3(const WoArgs a) { wo_frag4_ring<2, 3>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_ring32_free(const WoArgs a) { wo_frag4_ring<2, 2>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_ring32_3free(const WoArgs a) { wo_frag4_ring<2, 3>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows(const WoArgs a) { wo_dot<WoBf16, 4, 1, 4>(a); }

int main() {
  struct Shape { const char* name; long N, K; } shapes[] = {
      {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  const int rows = 16;
  for (const Shape& s : shapes) {
    const long N = s.N, K = s.K, row_bytes = K / 2, group = 128, groups = K / group;
    const size_t wbytes = (size_t)N * row_bytes;
    const int copies = (int)std::max<size_t>(2, (size_t(512) << 20) / wbytes);
    std::vector<void*> ws(copies);
    for (auto& p : ws) { CK(cudaMalloc(&p, wbytes)); fill_bytes<<<512, 256>>>((unsigned*)p, wbytes / 4, (unsigned)(size_t)p); }
    unsigned short *x, *sc, *zp, *ref, *out;
    CK(cudaMalloc(&x, rows * K * 2)); CK(cudaMalloc(&sc, N * groups * 2)); CK(cudaMalloc(&zp, N * groups * 2));
    CK(cudaMalloc(&ref, rows * N * 2)); CK(cudaMalloc(&out, rows * N * 2));
    fill_bf16<<<256, 256>>>(x, rows * K, -1.f, 1.f, 7, false);
    fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
    fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
    WoArgs a{};
    a.x = (i64)x; a.w = (i64)ws[0]; a.scale = (i64)sc; a.zero = (i64)zp;
    a.rows = rows; a.N = N; a.K = K; a.row_bytes = row_bytes; a.groups = groups; a.group = group;
    // The reference: the CUDA-core rows (a tile of one row a block row: rows tiles), float32 sums.
    a.vec = 0; a.split = 8; a.n_blocks = (N + 3) / 4; a.mma_split = 0; a.out = (i64)ref;
    k_rows<<<(unsigned)(a.n_blocks * rows), WO_BLOCK>>>(a);
    std::vector<unsigned short> want(rows * N), got(rows * N);
    CK(cudaMemcpy(want.data(), ref, want.size() * 2, cudaMemcpyDeviceToHost));
    double most = 0;
    for (unsigned short v : want) most = std::max(most, (double)fabsf(bf(v)));
    a.vec = 1; a.out = (i64)out;
    printf("%-8s (%6ld, %6ld) %6.1f MB:", s.name, N, K, wbytes / 1e6);
    auto variant = [&](const char* name, auto fn, int group_rows) {
      float best = 1e9f;
      int best_split = 0;
      for (int split : {1, 2, 4, 8}) {
        a.mma_split = split; a.mma_blocks = (N + (8 / split) * group_rows - 1) / ((8 / split) * group_rows);
        const float t = time_us([&](int i) { a.w = (i64)ws[i % copies]; fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a); });
        if (t < best) best = t, best_split = split;
      }
      a.w = (i64)ws[0]; a.mma_split = 4; a.mma_blocks = (N + 2 * group_rows - 1) / (2 * group_rows);
      CK(cudaMemset(out, 0, rows * N * 2));
      fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
      CK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
      double diff = 0;
      for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, (double)fabsf(bf(got[i]) - bf(want[i])));
      printf(" | %s %6.2f us s%d %5.0f GB/s diff %.1e", name, best, best_split, wbytes / best / 1e3, diff / most);
    };
    variant("frag32", k_frag32, 32);
    variant("frag16x2", k_frag16_2, 16);
    variant("ring32", k_ring32, 32);
    variant("ring32p3", k_ring32_3, 32);
    variant("ring32free", k_ring32_free, 32);
    variant("ring32p3free", k_ring32_3free, 32);
    printf("\n");
    for (void* p : ws) cudaFree(p);
    cudaFree(x); cudaFree(sc); cudaFree(zp); cudaFree(ref); cudaFree(out);
  }
}

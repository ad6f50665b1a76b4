// The few-rows int4 tile (kernels/weight_only_frag.cuh, wo_few: 9 to 16 rows of x, x's fragments
// laid out by wo_few_x and read through the L1 as each piece's mmas need them) against forms that
// wait less on those loads: held to three blocks a multiprocessor, a chunk's fragments loaded
// together, and the fragments streamed through a per-lane cp.async ring a chunk ahead in blocks of
// 4 warps. Llama-3-8B's int4 products at 16 rows (groups of 128 with zero points), weight copies
// past the L2, back-to-back launches of the tile alone (the layout once), best split; each form's
// outputs against wo_few's. A diagnostic; on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wof scripts/weight_only_few_deep_bench.cu && /tmp/wof
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

// HOIST: a chunk's 4 NT fragments loaded before its first mma. RING > 0: blocks of 4 warps, the
// fragments through a ring of RING chunks a lane (each lane copies and reads only its own pieces).
template <int NT, bool HOIST, int RING>
DEVI void few_var(const WoArgs& a) {
  typedef unsigned short S;
  constexpr int WARPS = RING ? 4 : 8;
  __shared__ float part[WARPS][NT * 4 * 32];
  __shared__ V16 ring[RING ? RING : 1][RING ? NT * 4 : 1][RING ? WARPS * 32 : 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, t4 = lane & 3;
  const int split = (int)(a.mma_split & 0xff), g = warp / split, ws = warp % split;
  const int M = (int)a.rows, N = (int)a.N, K = (int)a.K, n0 = (blockIdx.x * (WARPS / split) + g) * 16;
  const WoWeightRows<1> rows = wo_weight_rows<1>(a, n0, g8, t4);
  const int chunks = n0 < N ? K / 128 : 0;
  const int gshift = a.groups == 1 ? 30 : __ffs(static_cast<int>(a.group / 128)) - 1;
  const float zf = a.zero ? 1.0f : 0.0f;
  const uint4* frags = reinterpret_cast<const uint4*>(a.x) + lane;
  const float4* sums = reinterpret_cast<const float4*>(reinterpret_cast<const uint4*>(a.x) + NT * K) + t4;
  V16 qa, qb;
  S sv[2], zv[2];
  auto fetch_w = [&](int c) { qa = wo_stream(rows.w[0] + c * 64), qb = wo_stream(rows.w[0] + rows.wd[0] + c * 64); };
  auto fetch_s = [&](int c) {
    const int grp = c >> gshift;
    sv[0] = rows.s[0][grp], sv[1] = rows.s[0][rows.sd[0] + grp], zv[0] = rows.z[0][grp], zv[1] = rows.z[0][rows.sd[0] + grp];
  };
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  auto copy_x = [&](int i) {
    if (RING && i < mine) {
      const uint4* src = frags + (ws + i * split) * NT * 128;
#pragma unroll
      for (int p = 0; p < NT * 4; ++p) wo_cp16(&ring[i % (RING ? RING : 1)][p][threadIdx.x], src + p * 32);
    }
    if (RING) wo_commit();
  };
  int c = ws;
  const bool early = wo_early(a);
  if (early && c < chunks) fetch_w(c);
  enter_after_previous();
  if (c < chunks) {
    if (!early) fetch_w(c);
    fetch_s(c);
  }
#pragma unroll
  for (int i = 0; i < RING - 1; ++i) copy_x(i);
  float acc[1][NT][4] = {};
  for (int i = 0; c < chunks; c += split, ++i) {
    const V16 ca = qa, cb = qb;
    float s_[2], o_[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) s_[h] = b2f(sv[h]), o_[h] = fmaf(zf, b2f(zv[h]), 8.0f);
    if (c + split < chunks) {
      fetch_w(c + split);
      fetch_s(c + split);
    }
    copy_x(i + RING - 1);
    const uint4* bc = frags + c * NT * 128;
    V16 all[HOIST ? NT * 4 : 1];
    if (RING) wo_wait<(RING > 0 ? RING - 1 : 0)>();
    if (HOIST)
#pragma unroll
      for (int p = 0; p < NT * 4; ++p) all[HOIST ? p : 0] = wo_load_x(reinterpret_cast<const unsigned short*>(bc + p * 32));
    float lo[NT][4] = {};  // both nibbles' sums in one, as wo_few_x lays x out
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      V16 b[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        b[nt] = RING ? ring[i % (RING ? RING : 1)][nt * 4 + k][threadIdx.x]
                : HOIST ? all[HOIST ? nt * 4 + k : 0]
                        : wo_load_x(reinterpret_cast<const unsigned short*>(bc + (nt * 4 + k) * 32));
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        wo_row_mmas<4>(lo[nt], lo[nt], (&ca.x)[k], (&cb.x)[k], make_uint4(b[nt].x, b[nt].y, b[nt].z, b[nt].w), k);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 sx = __ldg(sums + (c * NT + nt) * 4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float xs = e & 1 ? sx.z : sx.x, xi = e & 1 ? sx.w : sx.y;
        acc[0][nt][e] = fmaf(s_[e >> 1] * xi, fmaf(-o_[e >> 1], xs, lo[nt][e]), acc[0][nt][e]);
      }
    }
  }
  if (RING) wo_wait<0>();
  if (!split_sum_lanes<NT * 4>(&acc[0][0][0], part, split, g, ws)) return;
  wo_store_tiles<1, NT>(acc, (S*)a.out, a.N, n0, g8, t4, M, N);
}

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_few(const WoArgs a) { wo_few<2, 4>(a); }
extern "C" __global__ void k_few_x(const WoArgs a) { wo_few_x<2, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 3) k_few3(const WoArgs a) { wo_few<2, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_fewh(const WoArgs a) { few_var<2, true, 0>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, 3) k_fewh3(const WoArgs a) { few_var<2, true, 0>(a); }
extern "C" __global__ void __launch_bounds__(128) k_fewr2(const WoArgs a) { few_var<2, false, 2>(a); }
extern "C" __global__ void __launch_bounds__(128, 6) k_fewr2b6(const WoArgs a) { few_var<2, false, 2>(a); }

int main() {
  struct Shape { const char* name; long N, K; } shapes[] = {
      {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  struct Form { const char* name; void (*fn)(WoArgs); int warps; } forms[] = {
      {"few", k_few, 8}, {"few3", k_few3, 8}, {"hoist", k_fewh, 8}, {"hoist3", k_fewh3, 8}, {"ring2", k_fewr2, 4}, {"ring2b6", k_fewr2b6, 4}};
  for (auto& f : forms) {
    cudaFuncAttributes at;
    CK(cudaFuncGetAttributes(&at, f.fn));
    printf("%-7s %3d registers, %6zu bytes shared, %d bytes local\n", f.name, at.numRegs, at.sharedSizeBytes, (int)at.localSizeBytes);
  }
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  const int rows = 16;
  for (auto& s : shapes) {
    const long N = s.N, K = s.K, row_bytes = K / 2, group = 128, groups = K / group;
    const size_t wbytes = (size_t)N * row_bytes;
    std::vector<void*> ws = weight_copies(wbytes);
    const int copies = (int)ws.size();
    unsigned short *x, *sc, *zp, *ref, *out;
    void* lay;
    CK(cudaMalloc(&x, rows * K * 2));
    CK(cudaMalloc(&sc, N * groups * 2));
    CK(cudaMalloc(&zp, N * groups * 2));
    CK(cudaMalloc(&ref, rows * N * 2));
    CK(cudaMalloc(&out, rows * N * 2));
    CK(cudaMalloc(&lay, 16 * K * 2 + K / 128 * 16 * 8));
    fill_bf16<<<256, 256>>>(x, rows * K, -1.f, 1.f, 7, false);
    fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
    fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
    WoArgs a{};
    a.x = (i64)x, a.out = (i64)lay, a.scale = (i64)sc, a.zero = (i64)zp, a.rows = rows, a.N = N, a.K = K;
    a.row_bytes = row_bytes, a.groups = groups, a.group = group, a.vec = 1;
    k_few_x<<<(unsigned)((16 * K / 8 + 255) / 256), 256>>>(a);
    CK(cudaDeviceSynchronize());
    a.x = (i64)lay;
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, N, K, wbytes / 1e6);
    std::vector<unsigned short> h_ref(rows * N), h(rows * N);
    for (auto& f : forms) {
      int threads = f.warps * 32;
      auto place = [&](int split) {
        a.mma_split = split | 0x100;
        a.mma_blocks = (N + (f.warps / split) * 16 - 1) / ((f.warps / split) * 16);
      };
      float best = 1e9;
      int best_split = 0;
      for (int split : {1, 2, 4, 8}) {
        if (split > f.warps) continue;
        place(split);
        a.out = (i64)out;
        const float t = time_us([&](int i) {
          a.w = (i64)ws[i % copies];
          f.fn<<<(unsigned)a.mma_blocks, threads>>>(a);
        });
        if (t < best) best = t, best_split = split;
      }
      place(2);
      const bool base = f.fn == k_few;
      a.w = (i64)ws[0], a.out = (i64)(base ? ref : out);
      f.fn<<<(unsigned)a.mma_blocks, threads>>>(a);
      CK(cudaMemcpy((base ? h_ref : h).data(), (void*)a.out, rows * N * 2, cudaMemcpyDeviceToHost));
      double d = 0, m = 0;
      if (!base)
        for (long i = 0; i < rows * N; ++i) d = std::max(d, (double)fabsf(bf(h[i]) - bf(h_ref[i]))), m = std::max(m, (double)fabsf(bf(h_ref[i])));
      printf(" %s %6.2f (s%d%s)", f.name, best, best_split, d > 1e-2 * m ? " WRONG" : "");
    }
    float fl = 1e9;
    for (int blocks : {132 * 2, 132 * 4, 132 * 8})
      fl = std::min(fl, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); }));
    printf(" | read floor %6.2f\n", fl);
    for (auto p : ws) cudaFree(p);
    cudaFree(x), cudaFree(sc), cudaFree(zp), cudaFree(ref), cudaFree(out), cudaFree(lay);
  }
}

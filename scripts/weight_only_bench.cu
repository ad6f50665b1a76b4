// The weight-only products of a Llama-3-8B decode step and its output head (one row of x, int4 in
// groups of 128 with zero points, int8 per output feature) timed alone, outside Tripy: the
// CUDA-core rows, the tensor-core ring, for int4 the register-fed tile, and at one row the
// one-row tile (for int8 also its short rows' entry point) and the K-sliced one-row tile
// (kernels/weight_only_dot.cuh, weight_only_frag.cuh) at each split of a block's warps, against a
// kernel that only reads the same bytes, with back-to-back launches over weight copies larger
// than the L2.
// Past 8 rows of x the register-fed tile is the 16-row module's (FRAG16_WT tiles of 16 weight rows a
// group), and the few-rows tile (wo_few after its layout of x, wo_few_x) is timed too, with its layout.
// A diagnostic for work on the kernel file; run on the GPU machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wob scripts/weight_only_bench.cu && /tmp/wob [rows]
// -DWO_FILE='"path.cuh"' times another copy of the kernel file, -DRING_H=2 the ring's 16-row form,
// -DFRAG16_WT=1 -DFRAG16_MINB=2 the 16-row register-fed tile with 16 weight rows a group held to
// two blocks a multiprocessor (126 registers against 168: ptxas -v).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "device_prelude.cuh"
#ifndef WO_FILE
#define WO_FILE "weight_only_dot.cuh"
#endif
#include WO_FILE
#include "weight_only_frag.cuh"
#include "weight_only_bench_util.cuh"

#ifndef RING_H
#define RING_H 4
#endif
#define RING_ROWS (8 * RING_H)
#ifndef RING_MINB
#define RING_MINB 2
#endif
extern "C" __global__ void __launch_bounds__(WO_BLOCK, RING_MINB) k_ring4(const WoArgs a) { wo_mma_ring<WoBf16, 4, RING_H>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK, RING_MINB) k_ring8(const WoArgs a) { wo_mma_ring<WoBf16, 8, RING_H>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows4(const WoArgs a) { wo_dot<WoBf16, 4, 1, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows8(const WoArgs a) { wo_dot<WoBf16, 8, 1, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_frag4(const WoArgs a) { wo_frag4<1, 1>(a); }
#ifndef FRAG16_WT
#define FRAG16_WT 2
#endif
#ifndef FRAG16_MINB
#define FRAG16_MINB 1
#endif
extern "C" __global__ void __launch_bounds__(WO_BLOCK, FRAG16_MINB) k_frag16(const WoArgs a) { wo_frag4<2, FRAG16_WT>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_row4(const WoArgs a) { wo_frag_row<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_few(const WoArgs a) { wo_few<2, 4>(a); }
extern "C" __global__ void k_few_x(const WoArgs a) { wo_few_x<2, 4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_row8(const WoArgs a) { wo_frag_row<8>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_row8s(const WoArgs a) {
  wo_frag_row<8, WO_ROW_SHORT_K, WO_ROW_SHORT_SLOTS>(a);
}
// The K-sliced one-row tile's shapes (RT tiles of 16 weight rows a block).
#define SLICED(B, RT) \
  extern "C" __global__ void __launch_bounds__(512) k_sl##B##_##RT(const WoArgs a) { wo_row_sliced<B, RT>(a); }
SLICED(4, 1) SLICED(4, 2) SLICED(4, 4) SLICED(8, 1) SLICED(8, 2) SLICED(8, 4)


int main(int argc, char** argv) {
  struct S { const char* name; long N, K; } shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned* sink; CK(cudaMalloc(&sink, 4));  // the read-only kernel's output, never written
  int rows_x = argc > 1 ? atoi(argv[1]) : 1;
  for (int bits : {4, 8}) {
    for (auto& s : shapes) {
      const long N = s.N, K = s.K, row_bytes = K * bits / 8, group = bits == 4 ? 128 : K, groups = K / group;
      const size_t wbytes = (size_t)N * row_bytes;
      std::vector<void*> ws = weight_copies(wbytes);
      const int copies = (int)ws.size();
      unsigned short *x, *sc, *zp, *out, *out2;
      const long R = std::max(8, rows_x);  // rows of x and of the outputs held
      void* few_ws;  // the few-rows tile's layout of 16 rows of x, and its sums
      CK(cudaMalloc(&x, R * K * 2)); CK(cudaMalloc(&sc, N * groups * 2)); CK(cudaMalloc(&zp, N * groups * 2));
      CK(cudaMalloc(&out, R * N * 2)); CK(cudaMalloc(&out2, R * N * 2)); CK(cudaMalloc(&few_ws, 16 * K * 2 + K / 128 * 16 * 8));
      fill_bf16<<<256, 256>>>(x, R * K, -1.f, 1.f, 7, false);
      fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
      fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
      CK(cudaDeviceSynchronize());
      WoArgs a{};
      a.out = (i64)out; a.x = (i64)x; a.w = (i64)ws[0]; a.scale = (i64)sc; a.zero = bits == 4 ? (i64)zp : 0;
      a.rows = rows_x; a.N = N; a.K = K; a.row_bytes = row_bytes; a.groups = groups; a.group = group; a.vec = 1;
      auto timeit = [&](auto fn, unsigned grid) {
        return time_us([&](int i) { a.w = (i64)ws[i % copies]; fn<<<grid, WO_BLOCK>>>(a); });
      };
      auto time_read = [&](auto fn, int blocks) {
        return time_us([&](int i) { fn<<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); });
      };
      printf("%-8s b%d (%6ld, %6ld) %6.1f MB:", s.name, bits, N, K, wbytes / 1e6);
      float best_rows = 1e9, best_ring = 1e9, best_frag = 1e9, best_row = 1e9, best_short = 1e9, best_sliced = 1e9;
      int sliced_rt = 0, sliced_w = 0;
      for (int split : {1, 2, 4, 8}) {
        a.split = split; a.n_blocks = (N + (8 / split) * 4 - 1) / ((8 / split) * 4); a.mma_split = a.mma_blocks = 0; a.out = (i64)out;
        float t = timeit(bits == 4 ? k_rows4 : k_rows8, (unsigned)a.n_blocks);
        best_rows = std::min(best_rows, t);
      }
      for (int split : {1, 2, 4, 8}) {
        a.mma_split = split; a.mma_blocks = (N + (8 / split) * RING_ROWS - 1) / ((8 / split) * RING_ROWS); a.out = (i64)out2;
        float t = timeit(bits == 4 ? k_ring4 : k_ring8, (unsigned)a.mma_blocks);
        printf(" s%d %6.2f", split, t);
        best_ring = std::min(best_ring, t);
      }
      const auto k_row = bits == 4 ? k_row4 : k_row8;
      // More than 8 rows: the register-fed tile of 16 rows of x (16 FRAG16_WT weight rows a warp group).
      const int frag_rows = rows_x > 8 ? 16 * FRAG16_WT : 16;
      const auto k_frag = rows_x > 8 ? k_frag16 : k_frag4;
      for (int split : {1, 2, 4, 8}) {
        a.mma_split = split; a.mma_blocks = (N + (8 / split) * frag_rows - 1) / ((8 / split) * frag_rows); a.out = (i64)out2;
        if (bits == 4) best_frag = std::min(best_frag, timeit(k_frag, (unsigned)a.mma_blocks));
        a.mma_blocks = (N + (8 / split) * 16 - 1) / ((8 / split) * 16);
        if (rows_x == 1 && K <= WO_ROW_MAX_K) best_row = std::min(best_row, timeit(k_row, (unsigned)a.mma_blocks));
        if (rows_x == 1 && bits == 8 && K <= WO_ROW_SHORT_K) best_short = std::min(best_short, timeit(k_row8s, (unsigned)a.mma_blocks));
      }
      if (rows_x == 1) {  // the K-sliced one-row tile: each shape and warps a block
        const int rts[] = {1, 2, 4};
        void (*const fns4[])(WoArgs) = {k_sl4_1, k_sl4_2, k_sl4_4};
        void (*const fns8[])(WoArgs) = {k_sl8_1, k_sl8_2, k_sl8_4};
        a.mma_split = 0x100;  // the weight a constant: its first chunks asked for before the wait
        a.out = (i64)out2;
        for (int r = 0; r < 3; ++r)
          for (int w : {4, 8, 16}) {
            const auto fn = bits == 4 ? fns4[r] : fns8[r];
            const unsigned blocks = (unsigned)((N + rts[r] * 16 - 1) / (rts[r] * 16));
            const float t = time_us([&](int i) { a.w = (i64)ws[i % copies]; fn<<<blocks, 32 * w>>>(a); });
            if (t < best_sliced) best_sliced = t, sliced_rt = rts[r], sliced_w = w;
          }
      }
      // agreement of the ring with the rows kernel on the first weight copy
      std::vector<unsigned short> h1(N), h2(N);
      a.w = (i64)ws[0]; a.split = 8; a.n_blocks = (N + 3) / 4; a.out = (i64)out; (bits == 4 ? k_rows4 : k_rows8)<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a);
      a.mma_split = 8; a.mma_blocks = (N + RING_ROWS - 1) / RING_ROWS; a.out = (i64)out2; (bits == 4 ? k_ring4 : k_ring8)<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
      CK(cudaMemcpy(h1.data(), out, N * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
      double md = 0, mx = 0;
      for (long i = 0; i < N; ++i) { md = std::max(md, (double)fabsf(bf(h1[i]) - bf(h2[i]))); mx = std::max(mx, (double)fabsf(bf(h1[i]))); }
      float fl = 1e9; int fl_blocks = 0, fl_u = 0;
      for (int blocks : {sms * 2, sms * 4, sms * 8})
        for (int u : {1, 4}) {
          const float t = u == 1 ? time_read(read_floor<1>, blocks) : time_read(read_floor<4>, blocks);
          if (t < fl) fl = t, fl_blocks = blocks, fl_u = u;
        }
      printf(" | read floor %6.2f (%d blocks, %d loads a thread)", fl, fl_blocks, fl_u);
      printf(" | rows %6.2f ring %6.2f us = %5.0f GB/s  diff %.1e", best_rows, best_ring, wbytes / best_ring / 1e3, md / mx);
      if (bits == 4) {  // the register-fed tile, and its agreement with the rows kernel
        a.mma_split = 4; a.mma_blocks = (N + 2 * frag_rows - 1) / (2 * frag_rows); a.out = (i64)out2; k_frag<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
        CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
        double fd = 0;
        for (long i = 0; i < N; ++i) fd = std::max(fd, (double)fabsf(bf(h1[i]) - bf(h2[i])));
        printf(" | frag %6.2f us = %5.0f GB/s  diff %.1e", best_frag, wbytes / best_frag / 1e3, fd / mx);
      }
      if (bits == 4 && rows_x > 8 && rows_x <= 16) {  // the few-rows tile with its layout, and its agreement
        WoArgs lx = a, lt = a;
        lx.out = (i64)few_ws, lt.x = (i64)few_ws, lt.out = (i64)out2;
        const unsigned xg = (unsigned)((16 * K / 8 + 255) / 256);
        float best_few = 1e9;
        int fs = 1;
        for (int split : {1, 2, 4, 8}) {
          lt.mma_split = split; lt.mma_blocks = (N + (8 / split) * 16 - 1) / ((8 / split) * 16);
          const float t = time_us([&](int i) { lt.w = (i64)ws[i % copies]; k_few_x<<<xg, 256>>>(lx); k_few<<<(unsigned)lt.mma_blocks, WO_BLOCK>>>(lt); });
          if (t < best_few) best_few = t, fs = split;
        }
        lt.w = (i64)ws[0]; lt.mma_split = fs; lt.mma_blocks = (N + (8 / fs) * 16 - 1) / ((8 / fs) * 16);
        k_few_x<<<xg, 256>>>(lx);
        k_few<<<(unsigned)lt.mma_blocks, WO_BLOCK>>>(lt);
        CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
        double wd = 0;
        for (long i = 0; i < N; ++i) wd = std::max(wd, (double)fabsf(bf(h1[i]) - bf(h2[i])));
        printf(" | few (with its layout) %6.2f us  diff %.1e", best_few, wd / mx);
      }
      if (best_row < 1e9) {  // the one-row tile, and its agreement with the rows kernel
        a.mma_split = 4; a.mma_blocks = (N + 31) / 32; a.out = (i64)out2; k_row<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
        CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
        double rd = 0;
        for (long i = 0; i < N; ++i) rd = std::max(rd, (double)fabsf(bf(h1[i]) - bf(h2[i])));
        printf(" | one-row %6.2f us = %5.0f GB/s  diff %.1e", best_row, wbytes / best_row / 1e3, rd / mx);
      }
      if (best_short < 1e9) printf(" | one-row short %6.2f us", best_short);
      if (best_sliced < 1e9)
        printf(" | K-sliced %6.2f us = %5.0f GB/s (RT %d, %d warps)", best_sliced, wbytes / best_sliced / 1e3, sliced_rt,
               sliced_w);
      printf("\n");
      for (auto p : ws) cudaFree(p);
      cudaFree(x); cudaFree(sc); cudaFree(zp); cudaFree(out); cudaFree(out2); cudaFree(few_ws);
    }
  }
  printf("empty launch (%d blocks): %.2f us\n", sms * 2,
         time_us([&](int) { read_floor<1><<<sms * 2, 256>>>(nullptr, 0, sink); }));
  // copy bandwidth
  size_t n = size_t(1) << 30; void *p, *q; CK(cudaMalloc(&p, n)); CK(cudaMalloc(&q, n));
  const float us = time_us([&](int) { cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToDevice); });
  printf("copy %.0f GB/s (read + write)\n", 2.0 * n / us / 1e3);
}

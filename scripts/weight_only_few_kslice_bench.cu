// The few-rows int4 tile (kernels/weight_only_frag.cuh, wo_few: 16 rows of x laid out by wo_few_x,
// a warp group of 16 weight rows whose `split` warps walk K) against its K-sliced form
// (wo_few_sliced), as the one-row tile's (wo_row_sliced): each warp of a block takes every W-th chunk of K, loads that
// chunk's x fragments (both tiles of 8 rows of x) and sums once, and meets them with RT tiles of
// 16 weight rows; the warps sum their rows once at the end. Llama-3-8B's int4 products at 16 rows
// (groups of 128 with zero points), weight copies past the L2, back-to-back launches of the tile
// alone (the layout once), best split or warps; each form's outputs against wo_few's. A
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

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_few(const WoArgs a) { wo_few<2, 4>(a); }
extern "C" __global__ void k_few_x(const WoArgs a) { wo_few_x<2, 4>(a); }
#define KS(RT, THREADS, NAME) \
  extern "C" __global__ void __launch_bounds__(THREADS) NAME(const WoArgs a) { wo_few_sliced<2, 4, RT>(a); }
// 4 tiles: at most 8 warps (more registers, no spills).
KS(1, 512, k_ks1) KS(2, 512, k_ks2) KS(4, 256, k_ks4)

int main() {
  struct Form { const char* name; void (*fn)(WoArgs); int rt, warps; } forms[] = {
      {"few", k_few, 0, 8},     {"r1w4", k_ks1, 1, 4}, {"r1w8", k_ks1, 1, 8}, {"r1w16", k_ks1, 1, 16},
      {"r2w4", k_ks2, 2, 4},    {"r2w8", k_ks2, 2, 8}, {"r2w16", k_ks2, 2, 16}, {"r4w4", k_ks4, 4, 4},
      {"r4w8", k_ks4, 4, 8}};
  print_forms(forms);
  const int rows = 16;
  for (const LlamaShape& s : llama_shapes_to_run()) {
    PackedRows p(s.N, s.K, rows);
    WoArgs& a = p.a;
    void* lay;  // x as wo_few_x lays it out
    CK(cudaMalloc(&lay, 16 * p.K * 2 + p.K / 128 * 16 * 8));
    a.out = (i64)lay;
    k_few_x<<<(unsigned)((16 * p.K / 8 + 255) / 256), 256>>>(a);
    CK(cudaDeviceSynchronize());
    a.x = (i64)lay;
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, p.N, p.K, p.wbytes / 1e6);
    float best_ks = 1e9;
    const char* best_name = "";
    for (auto& f : forms) {
      const bool base = f.fn == k_few;
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
    cudaFree(lay);
  }
}

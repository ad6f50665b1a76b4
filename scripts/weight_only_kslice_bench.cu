// The one-row int4 tile (kernels/weight_only_frag.cuh, wo_frag_row) against the K-sliced one
// (wo_row_sliced: a block's warps each take every W-th 128-value chunk of K and meet its x, held
// in registers, with RT tiles of 16 weight rows), each of its shapes (RT 4, 1, 2) with 4, 8 and 16
// warps a block. Llama-3-8B's int4 products at one row (groups of 128 with zero points),
// weight copies past the L2, back-to-back launches; each form's best placement, its outputs
// against the one-row tile's. A diagnostic; on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -Iscripts -o /tmp/wok scripts/weight_only_kslice_bench.cu && /tmp/wok
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

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_base(const WoArgs a) { wo_frag_row<4>(a); }
#define KS(RT) extern "C" __global__ void __launch_bounds__(512) k_s##RT(const WoArgs a) { wo_row_sliced<4, RT>(a); }
KS(4) KS(1) KS(2)

int main(int argc, char** argv) {
  struct Form { const char* name; void (*fn)(WoArgs); int rt, w; } forms[] = {
      {"base", k_base, 0, 0}, {"r4w4", k_s4, 4, 4},   {"r4w8", k_s4, 4, 8}, {"r4w16", k_s4, 4, 16},
      {"r1w4", k_s1, 1, 4},   {"r1w8", k_s1, 1, 8},   {"r1w16", k_s1, 1, 16}, {"r2w4", k_s2, 2, 4},
      {"r2w8", k_s2, 2, 8},   {"r2w16", k_s2, 2, 16}};
  print_forms(forms);
  for (const LlamaShape& s : llama_shapes_to_run()) {
    PackedRows p(s.N, s.K);
    WoArgs& a = p.a;
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, p.N, p.K, p.wbytes / 1e6);
    float best_ks = 1e9;
    const char* best_name = "";
    for (auto& f : forms) {
      const bool base = f.fn == k_base;
      float best = 1e9;
      int best_split = 0;
      unsigned blocks = 0, threads = f.w * 32;  // the K-sliced tile's: RT tiles of 16 rows a block
      if (!base) blocks = (unsigned)((p.N + f.rt * 16 - 1) / (f.rt * 16));
      for (int split : base ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{0}) {
        if (base) {
          a.mma_split = split | 0x100;  // the weight a constant: the first chunks asked for before the wait
          a.mma_blocks = (p.N + (8 / split) * 16 - 1) / ((8 / split) * 16);
          blocks = (unsigned)a.mma_blocks, threads = WO_BLOCK;
        }
        a.out = (i64)p.out;
        const float t = time_us([&](int i) {
          a.w = (i64)p.copy(i);
          f.fn<<<blocks, threads>>>(a);
        });
        if (t < best) best = t, best_split = split;
      }
      if (base) {  // the reference: the one-row tile at a split of 4
        a.mma_split = 4 | 0x100, a.mma_blocks = (p.N + 31) / 32;
        blocks = (unsigned)a.mma_blocks;
      }
      a.w = (i64)p.copy(0), a.out = (i64)(base ? p.ref : p.out);
      f.fn<<<blocks, threads>>>(a);
      CK(cudaDeviceSynchronize());
      if (base) {
        printf(" base %6.2f (s%d) |", best, best_split);
      } else {
        printf(" %s %6.2f%s", f.name, best, p.wrong() ? " WRONG" : "");
        if (best < best_ks) best_ks = best, best_name = f.name;
      }
    }
    printf(" | best %s %6.2f | read floor %6.2f\n", best_name, best_ks, p.read_floor_us());
  }
}

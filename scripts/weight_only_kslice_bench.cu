// The one-row int4 tile (kernels/weight_only_frag.cuh, wo_frag_row) against the K-sliced one
// (wo_row_sliced: a block's warps each take every W-th 128-value chunk of K and meet its x, held
// in registers, with RT tiles of 16 weight rows), each of its shapes (RT 4, 1, 2) with 4, 8 and 16
// warps a block. Llama-3-8B's int4 products at one row (groups of 128 with zero points), weight
// copies past the L2, back-to-back launches; each form's best placement, its outputs against the
// one-row tile's. A diagnostic; on the GPU machine,
// from the repository root:
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
#define KS(RT) extern "C" __global__ void __launch_bounds__(512) k_s##RT(const WoArgs a) { wo_row_sliced<RT>(a); }
KS(4) KS(1) KS(2)

int main(int argc, char** argv) {
  struct Shape { const char* name; long N, K; } shapes[] = {
      {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  struct Form { const char* name; void (*fn)(WoArgs); int rt, w; } forms[] = {
      {"base", k_base, 0, 0}, {"r4w4", k_s4, 4, 4}, {"r4w8", k_s4, 4, 8},
      {"r4w16", k_s4, 4, 16}, {"r1w4", k_s1, 1, 4}, {"r1w8", k_s1, 1, 8},
      {"r1w16", k_s1, 1, 16}, {"r2w4", k_s2, 2, 4}, {"r2w8", k_s2, 2, 8},
      {"r2w16", k_s2, 2, 16}};
  for (auto& f : forms) {
    cudaFuncAttributes at;
    CK(cudaFuncGetAttributes(&at, f.fn));
    printf("%-6s %3d registers, %6zu bytes shared\n", f.name, at.numRegs, at.sharedSizeBytes);
  }
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  const char* only = getenv("ONLY");  // one shape by name (for a profiler's run)
  for (auto& s : shapes) {
    if (only && strcmp(only, s.name) != 0) continue;
    const long N = s.N, K = s.K, row_bytes = K / 2, group = 128, groups = K / group;
    const size_t wbytes = (size_t)N * row_bytes;
    std::vector<void*> ws = weight_copies(wbytes);
    const int copies = (int)ws.size();
    unsigned short *x, *sc, *zp, *ref, *out;
    CK(cudaMalloc(&x, K * 2));
    CK(cudaMalloc(&sc, N * groups * 2));
    CK(cudaMalloc(&zp, N * groups * 2));
    CK(cudaMalloc(&ref, N * 2));
    CK(cudaMalloc(&out, N * 2));
    fill_bf16<<<256, 256>>>(x, K, -1.f, 1.f, 7, false);
    fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
    fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
    CK(cudaDeviceSynchronize());
    WoArgs a{};
    a.x = (i64)x, a.scale = (i64)sc, a.zero = (i64)zp, a.rows = 1, a.N = N, a.K = K, a.row_bytes = row_bytes;
    a.groups = groups, a.group = group, a.vec = 1;
    printf("%-8s (%6ld, %6ld) %6.1f MB |", s.name, N, K, wbytes / 1e6);
    std::vector<unsigned short> h_ref(N), h(N);
    float best_ks = 1e9;
    const char* best_name = "";
    for (auto& f : forms) {
      const bool base = f.fn == k_base;
      float best = 1e9;
      int best_split = 0;
      for (int split : base ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{0}) {
        unsigned blocks, threads;
        if (base) {
          a.mma_split = split | 0x100;  // the weight a constant: the first chunks asked for before the wait
          a.mma_blocks = (N + (8 / split) * 16 - 1) / ((8 / split) * 16);
          blocks = (unsigned)a.mma_blocks, threads = WO_BLOCK;
        } else {
          blocks = (unsigned)((N + f.rt * 16 - 1) / (f.rt * 16)), threads = f.w * 32;
        }
        a.out = (i64)out;
        const float t = time_us([&](int i) {
          a.w = (i64)ws[i % copies];
          f.fn<<<blocks, threads>>>(a);
        });
        if (t < best) best = t, best_split = split;
        if (base) {
          a.w = (i64)ws[0], a.out = (i64)ref;
          a.mma_split = 4 | 0x100, a.mma_blocks = (N + 31) / 32;
          f.fn<<<(unsigned)a.mma_blocks, WO_BLOCK>>>(a);
        } else {
          a.w = (i64)ws[0], a.out = (i64)out;
          f.fn<<<blocks, threads>>>(a);
        }
      }
      CK(cudaMemcpy((base ? h_ref : h).data(), (void*)(base ? ref : out), N * 2, cudaMemcpyDeviceToHost));
      double d = 0, m = 0;
      if (!base)
        for (long i = 0; i < N; ++i) d = std::max(d, (double)fabsf(bf(h[i]) - bf(h_ref[i]))), m = std::max(m, (double)fabsf(bf(h_ref[i])));
      if (base)
        printf(" base %6.2f (s%d) |", best, best_split);
      else
        printf(" %s %6.2f%s", f.name, best, d > 1e-2 * m ? " WRONG" : "");
      if (!base && best < best_ks) best_ks = best, best_name = f.name;
    }
    float fl = 1e9;
    for (int blocks : {132 * 2, 132 * 4, 132 * 8})
      fl = std::min(fl, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); }));
    printf(" | best %s %6.2f | read floor %6.2f\n", best_name, best_ks, fl);
    for (auto p : ws) cudaFree(p);
    cudaFree(x), cudaFree(sc), cudaFree(zp), cudaFree(ref), cudaFree(out);
  }
}

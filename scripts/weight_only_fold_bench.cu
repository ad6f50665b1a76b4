// What a product's folded RMSNorm and residual cost it (kernels/weight_only_frag.cuh's fold forms):
// Llama-3-8B's int4 and int8 products at one row on the K-sliced one-row tile (wo_row_sliced, its
// WO_FOLD_NORM and WO_FOLD_RESIDUAL entry points; gate/up also its gated output's, WO_FOLD_GATE,
// against the plain tile and the SiLU x up kernel) and int4's at 16 rows on the few-rows tile's K-sliced
// form (wo_few_x, then wo_few_sliced), each shape and warps a block as the build times them:
// plain (x normalized apart), folded (x normalized with a weight gamma, eps 1e-5, and a residual
// added; 16 rows only), the norm alone and the residual alone; the best of each, in us. The folded outputs are checked against the plain
// kernel's on x normalized apart (a reference kernel here) plus the residual (WRONG: off by more
// than 1% of the largest output). Weight copies past the L2, back-to-back launches. A diagnostic;
// on the GPU machine, from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -Iscripts -o /tmp/wofold scripts/weight_only_fold_bench.cu && /tmp/wofold
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

#define FEW(RT)                                                                                                   \
  extern "C" __global__ void __launch_bounds__(512) k_few##RT(const WoArgs a) { wo_few_sliced<2, 4, RT>(a); }     \
  extern "C" __global__ void __launch_bounds__(512) k_few_fold##RT(const WoFoldArgs p) {                          \
    wo_few_sliced<2, 4, RT, true>(p.a, p.f);                                                                      \
  }
FEW(1) FEW(2)
#define ROW(B, RT)                                                                                                \
  extern "C" __global__ void __launch_bounds__(512) k_row##B##_##RT(const WoArgs a) { wo_row_sliced<B, RT>(a); }  \
  extern "C" __global__ void __launch_bounds__(512) k_row_norm##B##_##RT(const WoFoldArgs p) {                    \
    wo_row_sliced<B, RT, WO_FOLD_NORM>(p.a, p.f);                                                                 \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(512) k_row_res##B##_##RT(const WoFoldArgs p) {                     \
    wo_row_sliced<B, RT, WO_FOLD_RESIDUAL>(p.a, p.f);                                                             \
  }
ROW(4, 1) ROW(4, 2) ROW(4, 4) ROW(8, 1) ROW(8, 2) ROW(8, 4)
// The gated output's entry points (RT tiles: half of the gate half, half of the up half), alone and
// with the norm.
#define GATE(B, RT)                                                                                               \
  extern "C" __global__ void __launch_bounds__(512) k_gate##B##_##RT(const WoFoldArgs p) {                        \
    wo_row_sliced<B, RT, WO_FOLD_GATE>(p.a, p.f);                                                                 \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(512) k_ngate##B##_##RT(const WoFoldArgs p) {                       \
    wo_row_sliced<B, RT, WO_FOLD_NORM | WO_FOLD_GATE>(p.a, p.f);                                                  \
  }
GATE(4, 2) GATE(4, 4) GATE(8, 2) GATE(8, 4)
// out[n] = SiLU(y[n]) * y[H + n] (y as stored): the kernel a gated output takes out of the step.
__global__ void silu_mul(const unsigned short* y, unsigned short* out, int H) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < H) out[n] = f2b(act_silu(b2f(y[n])) * b2f(y[H + n]));
}
extern "C" __global__ void k_few_x(const WoArgs a) { enter_after_previous(); wo_few_x<2, 4>(a); }
extern "C" __global__ void k_few_x_fold(const WoFoldArgs p) { enter_after_previous(); wo_few_x<2, 4, true>(p.a, p.f); }

// The reference's x: each row times 1 / sqrt(mean(x^2) + eps) and gamma, rounded (a block a row).
__global__ void normalize_rows(const unsigned short* x, const unsigned short* gamma, unsigned short* out, int K, double eps) {
  __shared__ double part[256];
  const unsigned short* row = x + (long)blockIdx.x * K;
  double s = 0;
  for (int k = threadIdx.x; k < K; k += blockDim.x) s += (double)b2f(row[k]) * b2f(row[k]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
    __syncthreads();
  }
  const double factor = 1.0 / sqrt(part[0] / K + eps);
  for (int k = threadIdx.x; k < K; k += blockDim.x)
    out[(long)blockIdx.x * K + k] = f2b((float)(b2f(row[k]) * factor) * b2f(gamma[k]));
}
// ref = round(ref + residual), as an add kernel after the product.
__global__ void add_into(unsigned short* ref, const unsigned short* residual, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    ref[i] = f2b(b2f(ref[i]) + b2f(residual[i]));
}

typedef void (*TileFn)(WoArgs);
typedef void (*FoldFn)(WoFoldArgs);

// One row of int4 or int8 weights: plain on x normalized apart, the norm's entry point on x, the
// residual's on x.
void one_row(const LlamaShape& s, int bits) {
  struct Shape { int rt; TileFn plain; FoldFn norm, res; };
  const Shape int4[] = {{1, k_row4_1, k_row_norm4_1, k_row_res4_1}, {2, k_row4_2, k_row_norm4_2, k_row_res4_2},
                        {4, k_row4_4, k_row_norm4_4, k_row_res4_4}};
  const Shape int8[] = {{1, k_row8_1, k_row_norm8_1, k_row_res8_1}, {2, k_row8_2, k_row_norm8_2, k_row_res8_2},
                        {4, k_row8_4, k_row_norm8_4, k_row_res8_4}};
  PackedRows p(s.N, s.K, 1, bits);
  WoArgs& a = p.a;
  unsigned short *gamma, *xn, *residual;
  CK(cudaMalloc(&gamma, p.K * 2));
  CK(cudaMalloc(&xn, p.K * 2));
  CK(cudaMalloc(&residual, p.N * 2));
  fill_bf16<<<256, 256>>>(gamma, p.K, 0.5f, 1.5f, 13, false);
  fill_bf16<<<256, 256>>>(residual, p.N, -2.f, 2.f, 17, false);
  normalize_rows<<<1, 256>>>(p.x, gamma, xn, (int)p.K, 1e-5);
  CK(cudaDeviceSynchronize());
  float best[3] = {1e9f, 1e9f, 1e9f};
  bool wrong = false;
  a.mma_split = 0x100;  // the weight a constant: its first chunks asked for before the wait
  for (const Shape& sh : bits == 4 ? int4 : int8)
    for (int w : {4, 8, 16}) {
      const unsigned blocks = (unsigned)((p.N + sh.rt * 16 - 1) / (sh.rt * 16)), threads = 32 * w;
      // mode 0 plain (on x, or on x normalized apart), 1 the norm's entry point, 2 the residual's.
      auto run = [&](int mode, int i, unsigned short* out, bool normalized) {
        const WoFold fo{mode == 1 ? (i64)gamma : 0, mode == 2 ? (i64)residual : 0, 0, 1e-5};
        a.w = (i64)p.copy(i), a.out = (i64)out, a.x = (i64)(normalized ? xn : p.x);
        if (mode == 0) sh.plain<<<blocks, threads>>>(a);
        else (mode == 1 ? sh.norm : sh.res)<<<blocks, threads>>>(WoFoldArgs{a, fo});
      };
      for (int mode = 0; mode < 3; ++mode) {
        best[mode] = std::min(best[mode], time_us([&](int i) { run(mode, i, p.out, mode == 0); }));
        if (mode == 0) continue;
        // The check: the plain tile on the normalized x (the norm), or on x plus the residual.
        run(0, 0, p.ref, mode == 1);
        CK(cudaDeviceSynchronize());
        if (mode == 2) add_into<<<256, 256>>>(p.ref, residual, p.N);
        run(mode, 0, p.out, false);
        CK(cudaDeviceSynchronize());
        wrong |= p.wrong();
      }
    }
  printf("%-8s (%6ld, %6ld) b%d M  1 | plain %7.2f | norm %7.2f | residual %7.2f%s | read floor %6.2f\n", s.name, p.N,
         p.K, bits, best[0], best[1], best[2], wrong ? " WRONG" : "", p.read_floor_us());
  cudaFree(gamma), cudaFree(xn), cudaFree(residual);
}

// gate/up at one row: the plain tile's best (x normalized apart for the norm) then the SiLU x up
// kernel, against the gated output's entry points on x (gate alone) and with the norm.
void gated_row(int bits) {
  struct Shape { int rt; FoldFn gate, ngate; };
  const Shape int4[] = {{2, k_gate4_2, k_ngate4_2}, {4, k_gate4_4, k_ngate4_4}};
  const Shape int8[] = {{2, k_gate8_2, k_ngate8_2}, {4, k_gate8_4, k_ngate8_4}};
  const TileFn plain4[] = {k_row4_1, k_row4_2, k_row4_4}, plain8[] = {k_row8_1, k_row8_2, k_row8_4};
  PackedRows p(28672, 4096, 1, bits);
  WoArgs& a = p.a;
  const int H = (int)p.N / 2;
  unsigned short *gamma, *xn, *y;
  CK(cudaMalloc(&gamma, p.K * 2));
  CK(cudaMalloc(&xn, p.K * 2));
  CK(cudaMalloc(&y, p.N * 2));
  fill_bf16<<<256, 256>>>(gamma, p.K, 0.5f, 1.5f, 13, false);
  normalize_rows<<<1, 256>>>(p.x, gamma, xn, (int)p.K, 1e-5);
  CK(cudaDeviceSynchronize());
  a.mma_split = 0x100;
  float plain = 1e9f, silu = 1e9f, best[2] = {1e9f, 1e9f};
  for (int r = 0; r < 3; ++r)
    for (int w : {4, 8, 16}) {
      const unsigned blocks = (unsigned)((p.N + (16 << r) - 1) / (16 << r));
      plain = std::min(plain, time_us([&](int i) {
        a.w = (i64)p.copy(i), a.out = (i64)y, a.x = (i64)xn;
        (bits == 4 ? plain4 : plain8)[r]<<<blocks, 32 * w>>>(a);
      }));
    }
  silu = time_us([&](int) { silu_mul<<<(H + 255) / 256, 256>>>(y, p.out, H); });
  bool wrong = false;
  for (int norm = 0; norm < 2; ++norm) {
    // The reference: the plain tile on x (normalized apart for the norm), then SiLU x up.
    a.w = (i64)p.copy(0), a.out = (i64)y, a.x = (i64)(norm ? xn : p.x);
    (bits == 4 ? plain4 : plain8)[0]<<<(unsigned)(p.N / 16), 128>>>(a);
    silu_mul<<<(H + 255) / 256, 256>>>(y, p.ref, H);
    CK(cudaDeviceSynchronize());
    for (const Shape& sh : bits == 4 ? int4 : int8)
      for (int w : {4, 8, 16}) {
        const unsigned blocks = (unsigned)((H + sh.rt * 8 - 1) / (sh.rt * 8));
        const WoFold fo{norm ? (i64)gamma : 0, 0, 0, 1e-5, H};
        auto run = [&](int i) {
          a.w = (i64)p.copy(i), a.out = (i64)p.out, a.x = (i64)p.x;
          (norm ? sh.ngate : sh.gate)<<<blocks, 32 * w>>>(WoFoldArgs{a, fo});
        };
        best[norm] = std::min(best[norm], time_us(run));
        CK(cudaMemset(p.out, 0, p.N * 2));
        run(0);
        CK(cudaDeviceSynchronize());
        std::vector<unsigned short> got(H), want(H);
        CK(cudaMemcpy(got.data(), p.out, H * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(want.data(), p.ref, H * 2, cudaMemcpyDeviceToHost));
        double d = 0, m = 0;
        for (int n = 0; n < H; ++n) d = std::max(d, (double)fabsf(bf(got[n]) - bf(want[n]))), m = std::max(m, (double)fabsf(bf(want[n])));
        wrong |= d > 1e-2 * m;
      }
  }
  printf("gate_up  ( 28672,   4096) b%d M  1 | plain %7.2f + SiLU x up %5.2f | gated %7.2f | norm + gated %7.2f%s\n",
         bits, plain, silu, best[0], best[1], wrong ? " WRONG" : "");
  cudaFree(gamma), cudaFree(xn), cudaFree(y);
}

int main() {
  for (int bits : {4, 8})
    for (const LlamaShape& s : llama_shapes_to_run()) one_row(s, bits);
  for (int bits : {4, 8}) gated_row(bits);
  struct Shape { int rt; TileFn plain; FoldFn fold; };
  const Shape shapes[] = {{1, k_few1, k_few_fold1}, {2, k_few2, k_few_fold2}};
  const int warps[] = {4, 8, 16};
  const int M = 16;
  for (const LlamaShape& s : llama_shapes_to_run()) {
    PackedRows p(s.N, s.K, M);
    WoArgs& a = p.a;
    unsigned short *gamma, *xn, *residual;
    CK(cudaMalloc(&gamma, p.K * 2));
    CK(cudaMalloc(&xn, M * p.K * 2));
    CK(cudaMalloc(&residual, M * p.N * 2));
    fill_bf16<<<256, 256>>>(gamma, p.K, 0.5f, 1.5f, 13, false);
    fill_bf16<<<256, 256>>>(residual, M * p.N, -2.f, 2.f, 17, false);
    normalize_rows<<<(unsigned)M, 256>>>(p.x, gamma, xn, (int)p.K, 1e-5);
    const long chunks = p.K / 128;
    void* lay;  // the few-rows layout, with the fold's squares after the sums
    CK(cudaMalloc(&lay, 16 * p.K * 2 + chunks * 16 * 8 * 2));
    CK(cudaDeviceSynchronize());
    const unsigned xgrid = (unsigned)((16 * p.K / 8 + 255) / 256);
    // Plain (x normalized apart), folded, the norm alone, the residual alone.
    float best[4] = {1e9f, 1e9f, 1e9f, 1e9f};
    bool wrong = false;
    for (const Shape& sh : shapes)
      for (int w : warps) {
        if (sh.rt == 4 && w > 8) continue;
        const unsigned blocks = (unsigned)((p.N + sh.rt * 16 - 1) / (sh.rt * 16)), threads = 32 * w;
        a.mma_split = 0x100;  // the weight a constant: its first chunks asked for before the wait
        for (int mode = 0; mode < 4; ++mode) {
          const bool fold = mode > 0;
          const WoFold fo{mode != 3 ? (i64)gamma : 0, mode != 2 ? (i64)residual : 0, 0, 1e-5};
          auto run = [&](int i, unsigned short* out) {
            a.w = (i64)p.copy(i);
            a.out = (i64)lay;
            a.x = (i64)(fold ? p.x : xn);
            fold ? k_few_x_fold<<<xgrid, 256>>>(WoFoldArgs{a, fo}) : k_few_x<<<xgrid, 256>>>(a);
            a.x = (i64)lay, a.out = (i64)out;
            fold ? sh.fold<<<blocks, threads>>>(WoFoldArgs{a, fo}) : sh.plain<<<blocks, threads>>>(a);
          };
          best[mode] = std::min(best[mode], time_us([&](int i) { run(i, p.out); }));
          if (mode > 1) continue;
          // The check: plain on the normalized x plus the residual, against the fold.
          run(0, fold ? p.out : p.ref);
          CK(cudaDeviceSynchronize());
          if (!fold) add_into<<<256, 256>>>(p.ref, residual, M * p.N);
          else wrong |= p.wrong();
        }
      }
    printf("%-8s (%6ld, %6ld) M %2d | plain %7.2f | folded %7.2f%s | norm %7.2f | residual %7.2f | read floor %6.2f\n",
           s.name, p.N, p.K, M, best[0], best[1], wrong ? " WRONG" : "", best[2], best[3], p.read_floor_us());
    cudaFree(gamma), cudaFree(xn), cudaFree(residual), cudaFree(lay);
  }
}

// The int4 weight-only products of a Llama-3-8B prefill (many rows of x, int4 in groups of 128,
// with and without zero points) timed alone, outside Tripy: the tensor-core tile that dequantizes
// in registers (kernels/weight_only_frag.cuh's wo_gemm4) (with its layout of x) at each of its shapes, stages and splits, against
// what runs without it, the weight dequantized into memory (wo_dequantize) and cuBLAS's bfloat16
// GEMM on it; each tile's output is checked against that GEMM's. A diagnostic for work on the
// kernel file; run on the GPU machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wog scripts/weight_only_gemm_bench.cu -lcublas && /tmp/wog [rows...]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_frag.cuh"
#include "weight_only_bench_util.cuh"

extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_dequant(const WoArgs a) { wo_dequantize<WoBf16, 4>(a); }
// NT tiles of 8 rows of x, WT of 16 weight rows, at most KS warps a group, ST stages, MB blocks a
// multiprocessor. The module's two (cuda_weight_only_dot_source.cc) come first.
#define GEMM_VARIANTS(X) X(8, 1, 1, 3, 2) X(4, 1, 2, 2, 2) X(8, 2, 1, 3, 1) X(4, 2, 2, 3, 1) X(2, 2, 2, 3, 2)
#define GEMM_KERNEL(NT, WT, KS, ST, MB)                                                                       \
  extern "C" __global__ void __launch_bounds__(WO_BLOCK, MB) k_gemm_##NT##_##WT##_##KS##_##ST##_##MB(const WoArgs a) { \
    wo_gemm4<NT, WT, KS, ST>(a);                                                                               \
  }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_x2(const WoArgs a) { wo_gemm4_x<2>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_x4(const WoArgs a) { wo_gemm4_x<4>(a); }
extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_x8(const WoArgs a) { wo_gemm4_x<8>(a); }
GEMM_VARIANTS(GEMM_KERNEL)

struct Variant { const char* name; void (*fn)(const WoArgs); int nt, wt, ks; };
#define GEMM_ROW(NT, WT, KS, ST, MB) {"nt" #NT " wt" #WT " st" #ST " b" #MB, k_gemm_##NT##_##WT##_##KS##_##ST##_##MB, NT, WT, KS},
static const Variant kVariants[] = {GEMM_VARIANTS(GEMM_ROW)};

#define CB(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { printf("%s: %d\n", #x, (int)s); exit(1); } } while (0)

int main(int argc, char** argv) {
  struct Shape { const char* name; long N, K; } shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  std::vector<long> row_counts;
  for (int i = 1; i < argc; ++i) row_counts.push_back(atol(argv[i]));
  if (row_counts.empty()) row_counts = {64, 128, 512, 2048};
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cublasHandle_t h; CB(cublasCreate(&h));
  for (int zero = 0; zero < 2; ++zero)
    for (auto& s : shapes) {
      const long N = s.N, K = s.K, row_bytes = K / 2, group = 128, groups = K / group, maxM = *std::max_element(row_counts.begin(), row_counts.end());
      signed char* w; unsigned short *scale, *zp, *x, *deq, *ref, *out;
      CK(cudaMalloc(&w, N * row_bytes)); CK(cudaMalloc(&scale, N * groups * 2)); CK(cudaMalloc(&zp, N * groups * 2));
      CK(cudaMalloc(&x, maxM * K * 2)); unsigned short* xf; CK(cudaMalloc(&xf, (maxM + 64) * K * 2)); CK(cudaMalloc(&deq, N * K * 2)); CK(cudaMalloc(&ref, maxM * N * 2)); CK(cudaMalloc(&out, maxM * N * 2));
      fill_bytes<<<512, 256>>>((unsigned*)w, N * row_bytes / 4, 7);
      fill_bf16<<<512, 256>>>(scale, N * groups, 0.002f, 0.02f, 11, false);
      fill_bf16<<<512, 256>>>(zp, N * groups, -3.0f, 3.0f, 13, true);
      fill_bf16<<<512, 256>>>(x, maxM * K, -1.0f, 1.0f, 17, false);
      WoArgs base{};
      base.w = (i64)w, base.scale = (i64)scale, base.zero = zero ? (i64)zp : 0;
      base.N = N, base.K = K, base.row_bytes = row_bytes, base.groups = groups, base.group = group, base.vec = 1;
      WoArgs dq = base;
      dq.out = (i64)deq;
      const unsigned dq_grid = (unsigned)std::min<long>(N, 8L * sms);
      const float t_dq = time_us([&](int) { k_dequant<<<dq_grid, WO_BLOCK>>>(dq); });
      for (long M : row_counts) {
        const float one = 1.0f, nil = 0.0f;
        auto gemm = [&](int) {
          CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, deq, CUDA_R_16BF, (int)K, x, CUDA_R_16BF,
                          (int)K, &nil, ref, CUDA_R_16BF, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        };
        const float t_gemm = time_us(gemm);
        std::vector<unsigned short> hr(M * N), ho(M * N);
        CK(cudaMemcpy(hr.data(), ref, M * N * 2, cudaMemcpyDeviceToHost));
        double rmax = 0;
        for (long i = 0; i < M * N; ++i) rmax = std::max(rmax, (double)std::fabs(bf(hr[i])));
        printf("%-8s %s M %5ld (%5ld, %5ld): dequantize %7.2f + gemm %7.2f = %7.2f us |", s.name, zero ? "zp " : "sym", M, N, K,
               t_dq, t_gemm, t_dq + t_gemm);
        for (const Variant& v : kVariants) {
          float best = 1e30f; int best_split = 0; double err = 0;
          for (int split = 1; split <= v.ks; split *= 2) {
            WoArgs a = base, ax = base;
            a.out = (i64)out, a.x = (i64)xf, a.rows = M, a.mma_split = split | (1 << 8);
            ax.out = (i64)xf, ax.x = (i64)x, ax.rows = M;
            const long bn = (8 / split) * 16 * v.wt, bm = 8 * v.nt;
            const unsigned grid = (unsigned)(((N + bn - 1) / bn) * ((M + bm - 1) / bm));
            auto lay = v.nt == 2 ? k_x2 : v.nt == 4 ? k_x4 : k_x8;
            CK(cudaMemset(out, 0xff, M * N * 2));
            const float t = time_us([&](int) { lay<<<2 * sms, WO_BLOCK>>>(ax); v.fn<<<grid, WO_BLOCK>>>(a); });
            CK(cudaMemcpy(ho.data(), out, M * N * 2, cudaMemcpyDeviceToHost));
            double e = 0;
            for (long i = 0; i < M * N; ++i) {
              const double d = std::fabs((double)bf(ho[i]) - bf(hr[i]));
              e = std::max(e, d != d ? 1e30 : d);
            }
            err = std::max(err, e / rmax);
            if (t < best) best = t, best_split = split;
          }
          printf(" %s s%d %7.2f%s", v.name, best_split, best, err > 1e-2 ? " WRONG" : "");
        }
        printf("\n");
      }
      cudaFree(w); cudaFree(scale); cudaFree(zp); cudaFree(x); cudaFree(xf); cudaFree(deq); cudaFree(ref); cudaFree(out);
    }
  return 0;
}

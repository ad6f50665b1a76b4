// Whether a decode step's residual add + RMSNorm is worth folding into the GEMV that reads it. At
// batch 1 the norm is one block over 4096 features between two launches, about 4 µs a layer-half
// (63 a step of Llama-3-8B), the same on one GPU and on each of two. Folded, the GEMV's lanes add the
// residual and scale by the norm's weight as they stream x (each warp group sees every feature
// once, so it also sums the squares), the epilogue multiplies its sums by rsqrt(mean + eps), and one
// group writes the new residual: one launch instead of two, the rounding of the normalized row
// gone. Both sides use kernels/gemv.cuh's CUDA-core rows (the folded copy differs only in reading
// x), every launch may overlap the one before (programmatic dependent launch, as Tripy's are), and
// each layer reads its own weight (from memory, as a step does). A diagnostic; run on the GPU
// machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/gnf scripts/gemv_norm_fold_bench.cu && /tmp/gnf
// Prints, per shape, µs a layer for norm + GEMV and for the folded GEMV (the best of each over R and
// split), and the largest difference of the folded outputs from the pair's, relative to the largest.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device_prelude.cuh"
#include "gemv.cuh"
#include "overlap_bench_util.cuh"

constexpr float kEps = 1e-5f;

// The pair's norm, as the fused row reduction computes it: h = bf16(a + b), then
// bf16(h * rsqrt(mean(h^2) + eps) * gamma); one block of 256 threads, 16-byte loads.
__global__ void __launch_bounds__(256) add_rmsnorm(const V16* a, const V16* b, const V16* gamma, V16* h, V16* n, int K) {
  enter_after_previous();
  __shared__ float red[8];
  const int chunks = K / 8;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += 256) {
    const V16 x = a[c], y = b[c];
    const unsigned xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
    for (int i = 0; i < 4; ++i) {
      const float lo = b2f(f2b(GemvBf16::lo(xs[i]) + GemvBf16::lo(ys[i])));
      const float hi = b2f(f2b(GemvBf16::hi(xs[i]) + GemvBf16::hi(ys[i])));
      ss += lo * lo + hi * hi;
    }
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < 8; ++w) total += red[w];
  const float rs = rsqrtf(total / K + kEps);
  for (int c = threadIdx.x; c < chunks; c += 256) {
    const V16 x = a[c], y = b[c], g = gamma[c];
    const unsigned xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w}, gs[4] = {g.x, g.y, g.z, g.w};
    unsigned hs[4], ns[4];
    for (int i = 0; i < 4; ++i) {
      const unsigned short lo = f2b(GemvBf16::lo(xs[i]) + GemvBf16::lo(ys[i]));
      const unsigned short hi = f2b(GemvBf16::hi(xs[i]) + GemvBf16::hi(ys[i]));
      hs[i] = lo | ((unsigned)hi << 16);
      ns[i] = f2b(b2f(lo) * rs * GemvBf16::lo(gs[i])) | ((unsigned)f2b(b2f(hi) * rs * GemvBf16::hi(gs[i])) << 16);
    }
    h[c] = V16{hs[0], hs[1], hs[2], hs[3]};
    n[c] = V16{ns[0], ns[1], ns[2], ns[3]};
  }
}

__global__ void __launch_bounds__(GEMV_BLOCK) gemv_r1(const GemvArgs a) { gemv_rows<GemvBf16, 1, 1>(a); }
__global__ void __launch_bounds__(GEMV_BLOCK) gemv_r2(const GemvArgs a) { gemv_rows<GemvBf16, 1, 2>(a); }
__global__ void __launch_bounds__(GEMV_BLOCK) gemv_r4(const GemvArgs a) { gemv_rows<GemvBf16, 1, 4>(a); }

struct FoldArgs {
  GemvArgs g;                          // x unused: it is a + b, scaled
  const unsigned short *a, *b, *gamma;  // the residual, the update, the norm's weight [K]
  unsigned short* h;                    // the new residual a + b
};

// One chunk of 8 features of the folded x: h = bf16(a + b) (written out where `h`), its squares
// summed into ss, x = h * gamma.
DEVI void folded_x(const FoldArgs& f, i64 c, float (&xf)[8], float& ss, bool write) {
  const V16 x = gemv_cached(f.a + c * 8), y = gemv_cached(f.b + c * 8), g = gemv_cached(f.gamma + c * 8);
  const unsigned xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w}, gs[4] = {g.x, g.y, g.z, g.w};
  unsigned hs[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned short lo = f2b(GemvBf16::lo(xs[i]) + GemvBf16::lo(ys[i]));
    const unsigned short hi = f2b(GemvBf16::hi(xs[i]) + GemvBf16::hi(ys[i]));
    hs[i] = lo | ((unsigned)hi << 16);
    const float l = b2f(lo), u = b2f(hi);
    ss += l * l + u * u;
    xf[2 * i] = l * GemvBf16::lo(gs[i]);
    xf[2 * i + 1] = u * GemvBf16::hi(gs[i]);
  }
  if (write) *(V16*)(f.h + c * 8) = V16{hs[0], hs[1], hs[2], hs[3]};
}

// U chunks of the weight's R rows (loaded) against the folded x; acc[R] sums the squares of h.
template <int R, int U>
DEVI void folded_use(float (&acc)[R + 1], const V16 (&wv)[U][R], const FoldArgs& f, i64 c, i64 step, bool write) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float xf[8];
    folded_x(f, c + u * step, xf, acc[R], write);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = gemv_dot8<GemvBf16>(acc[r], xf, wv[u][r]);
  }
}

// gemv_rows<GemvBf16, 1, R> with x folded (the vector path only: K a multiple of 8, aligned).
template <int R>
__global__ void __launch_bounds__(GEMV_BLOCK) gemv_folded(const FoldArgs f) {
  constexpr int U = R >= 4 ? 1 : 4 / R;
  __shared__ float part[GEMV_BLOCK / 32][R + 1];
  const GemvArgs& a = f.g;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int S = (int)a.split, groups = (GEMV_BLOCK / 32) / S, g = warp / S, ws = warp % S;
  const i64 N = a.N, K = a.K, chunks = K >> 3, step = 32 * S;
  const i64 n0 = ((i64)blockIdx.x * groups + g) * R;
  const unsigned short* w = (const unsigned short*)a.w;
  const unsigned short* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + (n0 + r < N ? n0 + r : N - 1) * K;
  float acc[R + 1];  // the R sums, then the squares of h
#pragma unroll
  for (int r = 0; r <= R; ++r) acc[r] = 0.0f;
  const bool write = blockIdx.x == 0 && g == 0;  // one group writes the new residual
  i64 c = ws * 32 + lane;
  V16 first[U][R];
  const bool ahead = a.early && c + (U - 1) * step < chunks;
  if (ahead) gemv_load<R, U>(first, wr, c, step);
  enter_after_previous();
  if (ahead) {
    folded_use<R, U>(acc, first, f, c, step, write);
    c += U * step;
  }
  for (; c + (U - 1) * step < chunks; c += U * step) {
    V16 wv[U][R];
    gemv_load<R, U>(wv, wr, c, step);
    folded_use<R, U>(acc, wv, f, c, step, write);
  }
  for (; c < chunks; c += step) {
    V16 wv[1][R];
    gemv_load<R, 1>(wv, wr, c, step);
    folded_use<R, 1>(acc, wv, f, c, step, write);
  }
  if (!split_sum_entries<R + 1>(acc, part, S, g, ws)) return;
  const float rs = rsqrtf(__shfl_sync(0xffffffffu, acc[R], R & 31) / K + kEps);
  unsigned short* out = (unsigned short*)a.out;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if ((r & 31) == lane && n0 + r < N) out[n0 + r] = GemvBf16::put(acc[r] * rs);
}

int main() {
  const int layers = 32;
  struct Shape { const char* name; int K, N; };
  const Shape shapes[] = {{"8B qkv (one GPU)", 4096, 6144}, {"8B gate/up (one GPU)", 4096, 28672},
                          {"8B qkv (a rank of two)", 4096, 3072}, {"8B gate/up (a rank of two)", 4096, 14336}};
  const int K = 4096;
  unsigned short *a, *b, *gamma, *h, *n;
  CK(cudaMalloc(&a, K * 2));
  CK(cudaMalloc(&b, K * 2));
  CK(cudaMalloc(&gamma, K * 2));
  CK(cudaMalloc(&h, K * 2));
  CK(cudaMalloc(&n, K * 2));
  fill_bf16_hash<<<16, 256>>>(a, K, 4.0f, 1, 0.0f);
  fill_bf16_hash<<<16, 256>>>(b, K, 1.0f, 2, 0.0f);
  fill_bf16_hash<<<16, 256>>>(gamma, K, 0.5f, 3, 1.0f);
  printf("%-28s %14s %14s %8s %10s\n", "shape (K, N)", "norm + GEMV", "folded GEMV", "saved", "max diff");
  for (const Shape& sh : shapes) {
    const size_t wn = (size_t)sh.N * sh.K;
    std::vector<unsigned short*> w(layers);
    for (auto& p : w) {
      CK(cudaMalloc(&p, wn * 2));
      fill_bf16_hash<<<1024, 256>>>(p, wn, 0.04f, (unsigned)(size_t)p, 0.0f);
    }
    unsigned short *out0, *out1;
    CK(cudaMalloc(&out0, sh.N * 2));
    CK(cudaMalloc(&out1, sh.N * 2));
    float best_pair = 1e30f, best_fold = 1e30f;
    for (int R : {1, 2, 4})
      for (int split : {1, 2, 4, 8}) {
        const int groups = 8 / split, grid = (int)((sh.N + (i64)R * groups - 1) / ((i64)R * groups));
        auto gemv = R == 1 ? gemv_r1 : R == 2 ? gemv_r2 : gemv_r4;
        auto folded = R == 1 ? gemv_folded<1> : R == 2 ? gemv_folded<2> : gemv_folded<4>;
        best_pair = std::min(best_pair, graph_us(layers, [&](int l, cudaStream_t s) {
          const V16 *va = (const V16*)a, *vb = (const V16*)b, *vg = (const V16*)gamma;
          V16 *vh = (V16*)h, *vn = (V16*)n;
          int k = K;
          void* norm_args[] = {&va, &vb, &vg, &vh, &vn, &k};
          launch_overlapping((const void*)add_rmsnorm, 1, 256, norm_args, s);
          GemvArgs ga{(i64)out0, (i64)n, (i64)w[l], 0, 1, sh.N, sh.K, 0, split, 1, 1};
          void* gemv_args[] = {&ga};
          launch_overlapping((const void*)gemv, grid, GEMV_BLOCK, gemv_args, s);
        }));
        best_fold = std::min(best_fold, graph_us(layers, [&](int l, cudaStream_t s) {
          FoldArgs fa{{(i64)out1, 0, (i64)w[l], 0, 1, sh.N, sh.K, 0, split, 1, 1}, a, b, gamma, h};
          void* fold_args[] = {&fa};
          launch_overlapping((const void*)folded, grid, GEMV_BLOCK, fold_args, s);
        }));
      }
    CK(cudaDeviceSynchronize());
    std::vector<unsigned short> o0(sh.N), o1(sh.N);
    CK(cudaMemcpy(o0.data(), out0, sh.N * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o1.data(), out1, sh.N * 2, cudaMemcpyDeviceToHost));
    float diff = 0.0f, top = 0.0f;
    for (int i = 0; i < sh.N; ++i) {
      diff = std::max(diff, std::fabs(bf16_value(o0[i]) - bf16_value(o1[i])));
      top = std::max(top, std::fabs(bf16_value(o0[i])));
    }
    char name[64];
    snprintf(name, sizeof(name), "%s (%d, %d)", sh.name, sh.K, sh.N);
    printf("%-28s %11.2f us %11.2f us %5.2f us %10.2e\n", name, best_pair, best_fold, best_pair - best_fold, diff / top);
    for (auto p : w) CK(cudaFree(p));
    CK(cudaFree(out0));
    CK(cudaFree(out1));
  }
  return 0;
}

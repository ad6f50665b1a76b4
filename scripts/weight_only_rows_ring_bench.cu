// One row of x against Llama-3-8B's weight-only products (int4 in groups of 128 with zero points,
// int8 and float8 per output feature): the CUDA-core rows of kernels/weight_only_dot.cuh (wo_rows,
// each lane holding this piece and the next of its R weight rows in registers) against the same
// arithmetic fed by a cp.async ring in shared memory (each lane copies its own pieces RING ahead
// and reads back only what it copied, so more of the weight is in flight per multiprocessor than
// registers hold), and the read floor of the same bytes. A diagnostic for the next form of the
// decode step's products; run on the GPU machine from the repository root:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/worr scripts/weight_only_rows_ring_bench.cu && /tmp/worr
// Prints, per shape and format, the best time over the splits of each kernel (µs), the GB/s of the
// best, and the largest difference of the ring form's outputs from the rows kernel's.
#include <algorithm>
#include <vector>

#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_bench_util.cuh"

// The rows of wo_rows (MT = 1, the vector path: K and the group whole pieces), the weight through
// a ring of P slots: R weight rows a warp group, `split` warps of a block sharing them, each lane
// taking pieces first, first + 32 split, ...
template <class T, int BITS, int R, int P>
DEVI void wo_rows_ring(const WoArgs& a) {
  typedef typename T::S S;
  constexpr int VALS = BITS == 4 ? 32 : 16, RING = P - 1;
  __shared__ V16 ring[P][R][WO_BLOCK];  // 48 KiB: the most without opt-in
  // The split's partial sums reuse the ring once every lane's copies have landed and been read.
  float (*part)[R] = reinterpret_cast<float (*)[R]>(&ring[0][0][0]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = (int)a.split, g = warp / split, ws = warp % split;
  const i64 N = a.N, K = a.K;
  const i64 n0 = ((i64)blockIdx.x * (WO_BLOCK / 32 / split) + g) * R;
  const S* x = (const S*)a.x;
  const S* sc = (const S*)a.scale;
  const S* zp = (const S*)a.zero;
  const i64 n_first = n0 < N ? n0 : N - 1;
  const signed char* w0 = (const signed char*)a.w + n_first * a.row_bytes;
  const S* s0 = sc + n_first * a.groups;
  const S* z0 = zp ? zp + n_first * a.groups : s0;
  int wo[R], so[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const i64 n = n0 + r < N ? n0 + r : N - 1;  // rows past N read row N - 1 (dropped)
    wo[r] = (int)((n - n_first) * a.row_bytes);
    so[r] = (int)((n - n_first) * a.groups);
  }
  const int pieces = (int)(K / VALS), ppg = (int)(a.group / VALS);
  const int gshift = (ppg & (ppg - 1)) == 0 ? __ffs(ppg) - 1 : -1;
  const int first = ws * 32 + lane, step = 32 * split;
  const int mine = n0 < N && first < pieces ? (pieces - first + step - 1) / step : 0;
  auto copy = [&](int i) {  // piece i of this lane into slot i % P, a group per call, empty or not
    if (i < mine) {
      const i64 off = (i64)(first + i * step) * 16;
#pragma unroll
      for (int r = 0; r < R; ++r) wo_cp16(&ring[i % P][r][threadIdx.x], w0 + wo[r] + off);
    }
    wo_commit();
  };
#pragma unroll
  for (int i = 0; i < RING; ++i) copy(i);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int i = 0; i < mine; ++i) {
    copy(i + RING);
    const int c = first + i * step, grp = gshift >= 0 ? c >> gshift : c / ppg;
    const S* xc = x + (i64)c * VALS;
    float s[R], z[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      s[r] = T::get(s0, so[r] + grp);
      z[r] = zp ? T::get(z0, so[r] + grp) : 0.0f;
    }
    wo_wait<RING>();  // piece i has landed
    V16 cur[R];
#pragma unroll
    for (int r = 0; r < R; ++r) cur[r] = ring[i % P][r][threadIdx.x];
    float p[R], xs = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) p[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < VALS / 8; ++j) {
      float f[8];
      T::load8(xc + j * 8, f);
      if (zp)
#pragma unroll
        for (int e = 0; e < 8; ++e) xs += f[e];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float q[8];
        wo_values8<BITS>(cur[r], j, q);
#pragma unroll
        for (int e = 0; e < 8; ++e) p[r] = fmaf(f[e], q[e], p[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = fmaf(s[r], zp ? fmaf(-z[r], xs, p[r]) : p[r], acc[r]);
  }
  wo_wait<0>();
  if (split > 1) __syncthreads();
  if (!split_sum_entries<R>(acc, part, split, g, ws)) return;
  S* out = (S*)a.out;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if ((r & 31) == lane && n0 + r < N) T::put(out, n0 + r, acc[r]);
}

#define ROWS_KERNELS(B, NAME)                                                                                     \
  extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_rows_##NAME(const WoArgs a) { wo_dot<WoBf16, B, 1, 4>(a); } \
  extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_ring4_##NAME(const WoArgs a) { wo_rows_ring<WoBf16, B, 4, 3>(a); } \
  extern "C" __global__ void __launch_bounds__(WO_BLOCK) k_ring2_##NAME(const WoArgs a) { wo_rows_ring<WoBf16, B, 2, 6>(a); }
ROWS_KERNELS(4, b4)
ROWS_KERNELS(8, b8)
ROWS_KERNELS(WO_E4M3, e4m3)

// Random bytes as float8 values: S.1111.111 (NaN) made S.1111.110 (the largest magnitude, 448).
__global__ void no_e4m3_nan(unsigned* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const unsigned v = p[i], nan = ((v & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;  // bytes whose low 7 bits are all ones
    p[i] = v & ~(nan >> 7);
  }
}

int main() {
  struct S { const char* name; long N, K; } shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  struct F { const char* name; int bits; void (*rows)(WoArgs); void (*ring4)(WoArgs); void (*ring2)(WoArgs); } formats[] = {
      {"int4", 4, k_rows_b4, k_ring4_b4, k_ring2_b4}, {"int8", 8, k_rows_b8, k_ring4_b8, k_ring2_b8},
      {"float8", WO_E4M3, k_rows_e4m3, k_ring4_e4m3, k_ring2_e4m3}};
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  for (const F& f : formats) {
    for (const S& s : shapes) {
      const long N = s.N, K = s.K, row_bytes = f.bits == 4 ? K / 2 : K, group = f.bits == 4 ? 128 : K, groups = K / group;
      const size_t wbytes = (size_t)N * row_bytes;
      const int copies = (int)std::max<size_t>(2, (size_t(512) << 20) / wbytes);
      std::vector<void*> ws(copies);
      for (auto& p : ws) {
        CK(cudaMalloc(&p, wbytes));
        fill_bytes<<<512, 256>>>((unsigned*)p, wbytes / 4, (unsigned)(size_t)p);
        if (f.bits == WO_E4M3) no_e4m3_nan<<<512, 256>>>((unsigned*)p, wbytes / 4);
      }
      unsigned short *x, *sc, *zp, *out, *out2;
      CK(cudaMalloc(&x, K * 2));
      CK(cudaMalloc(&sc, N * groups * 2));
      CK(cudaMalloc(&zp, N * groups * 2));
      CK(cudaMalloc(&out, N * 2));
      CK(cudaMalloc(&out2, N * 2));
      fill_bf16<<<256, 256>>>(x, K, -1.f, 1.f, 7, false);
      fill_bf16<<<256, 256>>>(sc, N * groups, f.bits == WO_E4M3 ? 1e-4f : 0.002f, f.bits == WO_E4M3 ? 1e-3f : 0.02f, 9, false);
      fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
      CK(cudaDeviceSynchronize());
      WoArgs a{};
      a.x = (i64)x; a.scale = (i64)sc; a.zero = f.bits == 4 ? (i64)zp : 0;
      a.rows = 1; a.N = N; a.K = K; a.row_bytes = row_bytes; a.groups = groups; a.group = group; a.vec = 1;
      auto best = [&](void (*fn)(WoArgs), int rows_a_group, unsigned short* o) {
        float t = 1e9f;
        for (int split : {1, 2, 4, 8}) {
          a.split = split;
          a.n_blocks = (N + (8 / split) * rows_a_group - 1) / ((8 / split) * rows_a_group);
          a.out = (i64)o;
          const unsigned grid = (unsigned)a.n_blocks;
          t = std::min(t, time_us([&](int i) { a.w = (i64)ws[i % copies]; fn<<<grid, WO_BLOCK>>>(a); }));
        }
        return t;
      };
      auto diff = [&](void (*fn)(WoArgs), int rows_a_group) {  // against the rows kernel, first weight copy
        a.w = (i64)ws[0]; a.split = 8; a.n_blocks = (N + 3) / 4; a.out = (i64)out;
        f.rows<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a);
        a.n_blocks = (N + rows_a_group - 1) / rows_a_group; a.out = (i64)out2;
        fn<<<(unsigned)a.n_blocks, WO_BLOCK>>>(a);
        std::vector<unsigned short> h1(N), h2(N);
        CK(cudaMemcpy(h1.data(), out, N * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data(), out2, N * 2, cudaMemcpyDeviceToHost));
        double md = 0, mx = 0;
        for (long i = 0; i < N; ++i) {
          md = std::max(md, (double)fabsf(bf(h1[i]) - bf(h2[i])));
          mx = std::max(mx, (double)fabsf(bf(h1[i])));
        }
        return mx > 0 ? md / mx : md;
      };
      const float rows = best(f.rows, 4, out), ring4 = best(f.ring4, 4, out2), ring2 = best(f.ring2, 2, out2);
      float fl = 1e9f;
      for (int blocks : {sms * 2, sms * 4, sms * 8}) fl = std::min(fl, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); }));
      printf("%-7s %-8s (%6ld, %6ld) %6.1f MB | floor %6.2f | rows %6.2f | ring R4 %6.2f (diff %.1e) | ring R2 %6.2f (diff %.1e) | best %5.0f GB/s\n",
             f.name, s.name, N, K, wbytes / 1e6, fl, rows, ring4, diff(f.ring4, 4), ring2, diff(f.ring2, 2),
             wbytes / std::min(rows, std::min(ring4, ring2)) / 1e3);
      for (auto p : ws) cudaFree(p);
      cudaFree(x); cudaFree(sc); cudaFree(zp); cudaFree(out); cudaFree(out2);
    }
  }
}

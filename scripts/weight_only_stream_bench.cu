// The int4 tiles' weight reads without their arithmetic, timed alone against a kernel that reads
// the same bytes in order (the read floor), at Llama-3-8B's shapes with weight copies larger than
// the L2: the row-major pattern of the register-fed and one-row tiles (lane (g, t): 16 bytes of
// rows g and g + 8 a 128-value chunk, at c * 64 + t * 16), and the same bytes laid out so that a
// group of 16 rows' chunk is 1 KiB in a row, each through 1-8 chunks in registers or a per-lane
// cp.async ring of 3-6 slots, at each split of a block's warps (bench/HISTORY.md, 2026-11-28: the
// pattern reaches 1.1x the floor; the tiles' arithmetic is what costs). On the GPU machine:
//   K=core/src/backend/cuda/codegen/kernels
//   nvcc -arch=sm_90a -O3 -std=c++17 -I$K -o /tmp/wos scripts/weight_only_stream_bench.cu && /tmp/wos
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "device_prelude.cuh"
#include "weight_only_dot.cuh"
#include "weight_only_bench_util.cuh"

// Where a lane reads: its warp's first chunk (ws), the chunks a group has, the bytes of its two
// rows' first chunk (pa, pb) and from one chunk to the next (step); false past the last row.
struct Lane {
  int ws, chunks, step;
  const signed char *pa, *pb;
};
template <int MODE>
__device__ bool lane_of(const signed char* w, int N, int K, int split, Lane& l) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g8 = lane >> 2, t4 = lane & 3;
  const int n0 = (blockIdx.x * (8 / split) + warp / split) * 16, rb = K / 2;
  l.ws = warp % split, l.chunks = K / 128;
  if (MODE == 0) l.pa = w + (size_t)(n0 + g8) * rb + t4 * 16, l.pb = l.pa + 8 * rb, l.step = 64;
  else l.pa = w + (size_t)n0 * rb + lane * 16, l.pb = l.pa + 512, l.step = 1024;
  return n0 < N;
}

// MODE 0: the row-major pattern; 1: a group's chunk of 16 rows 1 KiB in a row (lane l: bytes 16 l
// and 512 + 16 l), the group's chunks one after another. D chunks in registers ahead.
template <int D, int MODE>
__global__ void __launch_bounds__(256) wreg(const signed char* w, int N, int K, int split, unsigned* out) {
  Lane l;
  if (!lane_of<MODE>(w, N, K, split, l)) return;
  const int ws = l.ws, chunks = l.chunks, step = l.step;
  const signed char *pa = l.pa, *pb = l.pb;
  unsigned acc = 0;
  V16 qa[D], qb[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const int c = min(ws + d * split, chunks - 1);
    qa[d] = wo_stream(pa + (size_t)c * step); qb[d] = wo_stream(pb + (size_t)c * step);
  }
  for (int c0 = ws; c0 < chunks; c0 += D * split) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int c = c0 + d * split;
      if (c >= chunks) break;
      acc ^= qa[d].x ^ qa[d].y ^ qa[d].z ^ qa[d].w ^ qb[d].x ^ qb[d].y ^ qb[d].z ^ qb[d].w;
      const int cn = c + D * split;
      if (cn < chunks) { qa[d] = wo_stream(pa + (size_t)cn * step); qb[d] = wo_stream(pb + (size_t)cn * step); }
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// The same through a per-lane cp.async ring of P slots (P - 1 chunks ahead).
template <int P, int MODE>
__global__ void __launch_bounds__(256) wcp(const signed char* w, int N, int K, int split, unsigned* out) {
  __shared__ V16 ring[P][2][256];
  Lane l;
  if (!lane_of<MODE>(w, N, K, split, l)) return;
  const int ws = l.ws, chunks = l.chunks, step = l.step;
  const signed char *pa = l.pa, *pb = l.pb;
  const int mine = ws < chunks ? (chunks - ws + split - 1) / split : 0;
  auto copy = [&](int i) {
    if (i < mine) {
      const int c = ws + i * split;
      wo_cp16(&ring[i % P][0][threadIdx.x], pa + (size_t)c * step);
      wo_cp16(&ring[i % P][1][threadIdx.x], pb + (size_t)c * step);
    }
    wo_commit();
  };
#pragma unroll
  for (int i = 0; i < P - 1; ++i) copy(i);
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    copy(i + P - 1);
    wo_wait<P - 1>();
    const V16 a = ring[i % P][0][threadIdx.x], b = ring[i % P][1][threadIdx.x];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

int main() {
  struct S { const char* name; int N, K; } shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  for (auto& s : shapes) {
    const size_t wbytes = (size_t)s.N * s.K / 2;
    const int copies = (int)std::max<size_t>(2, (size_t(512) << 20) / wbytes);
    std::vector<void*> ws(copies);
    for (auto& p : ws) { CK(cudaMalloc(&p, wbytes)); fill_bytes<<<512, 256>>>((unsigned*)p, wbytes / 4, 1); }
    CK(cudaDeviceSynchronize());
    float fl = 1e9;
    for (int blocks : {sms * 2, sms * 4, sms * 8})
      fl = std::min(fl, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)ws[i % copies], wbytes / 16, sink); }));
    printf("%-8s %6.1f MB floor %6.2f us (%4.0f GB/s)\n", s.name, wbytes / 1e6, fl, wbytes / fl / 1e3);
    auto run = [&](const char* nm, auto k) {
      printf("  %-10s", nm);
      for (int split : {1, 2, 4, 8}) {
        const int blocks = (s.N + 16 * (8 / split) - 1) / (16 * (8 / split));
        const float t = time_us([&](int i) { k<<<blocks, 256>>>((const signed char*)ws[i % copies], s.N, s.K, split, sink); });
        printf(" s%d %6.2f", split, t);
      }
      printf("\n");
    };
    run("reg1 row", wreg<1, 0>); run("reg2 row", wreg<2, 0>); run("reg4 row", wreg<4, 0>); run("reg8 row", wreg<8, 0>);
    run("reg1 tile", wreg<1, 1>); run("reg2 tile", wreg<2, 1>); run("reg4 tile", wreg<4, 1>); run("reg8 tile", wreg<8, 1>);
    run("cp3 row", wcp<3, 0>); run("cp5 row", wcp<5, 0>); run("cp6 row", wcp<6, 0>);
    run("cp3 tile", wcp<3, 1>); run("cp5 tile", wcp<5, 1>); run("cp6 tile", wcp<6, 1>);
    for (auto p : ws) cudaFree(p);
  }
}

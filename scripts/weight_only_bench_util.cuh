// What the standalone weight-only diagnostics share (scripts/weight_only_*bench.cu, after
// kernels/device_prelude.cuh and weight_only_dot.cuh): a kernel that only reads a buffer (the read
// floor), deterministic fills, weight copies past the L2, a checked CUDA call and the timer; and
// Llama-3-8B's product shapes with int4 operands for them at M rows of x (PackedRows).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include <cstdio>
#include <cstdlib>
#include <cstring>

template <int U>
__global__ void __launch_bounds__(256) read_floor(const V16* p, size_t n16, unsigned* out) {
  unsigned acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += stride * U) {
    V16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u * stride < n16 ? wo_stream((const signed char*)(p + i + u * stride)) : V16{0u, 0u, 0u, 0u};
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}
__global__ void fill_bytes(unsigned* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15; p[i] = h;
  }
}
__global__ void fill_bf16(unsigned short* p, size_t n, float lo, float hi, unsigned seed, bool integer) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    float f = lo + (hi - lo) * (h & 0xffffff) / 16777216.0f;
    if (integer) f = rintf(f);
    p[i] = (unsigned short)(__float_as_uint(f) >> 16);
  }
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

// Microseconds a call: `launch(i)` issues call i (its weight copy chosen by i), 3 calls to warm up,
// then 40 back to back between two events.
template <class L> float time_us(L launch) {
  static cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (!e0) {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  for (int i = 0; i < 3; ++i) launch(i);
  CK(cudaGetLastError());
  const int reps = 40;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) launch(i);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  return ms * 1000.f / reps;
}
static float bf(unsigned short v) { unsigned u = (unsigned)v << 16; float f; memcpy(&f, &u, 4); return f; }

// Copies of a weight of `bytes` (hashed bytes: any are valid int8 or int4 values), enough of them,
// at least two, to pass the L2 together: calls that take them in turn read their weight from memory.
inline std::vector<void*> weight_copies(size_t bytes) {
  std::vector<void*> ws(std::max<size_t>(2, (size_t(512) << 20) / bytes));
  for (void*& p : ws) {
    CK(cudaMalloc(&p, bytes));
    fill_bytes<<<512, 256>>>((unsigned*)p, bytes / 4, (unsigned)(size_t)p);
  }
  return ws;
}

// Llama-3-8B's products, and each one's operands at M rows of x: bfloat16 x [M, K], a packed
// weight [N, K] (copies past the L2; int4 in groups of 128 with zero points, or int8 with a scale a
// row), the scales and zero points, a reference output and an output [M, N]; `a` holds every
// address but the weight's and the output's.
struct LlamaShape { const char* name; long N, K; };
inline constexpr LlamaShape kLlamaShapes[] = {
    {"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
// The shapes a run takes: all, or the one the environment's ONLY names (a profiler's run).
inline std::vector<LlamaShape> llama_shapes_to_run() {
  const char* only = getenv("ONLY");
  std::vector<LlamaShape> out;
  for (const LlamaShape& s : kLlamaShapes)
    if (!only || strcmp(only, s.name) == 0) out.push_back(s);
  return out;
}
struct PackedRows {
  long N, K, M, row_bytes, groups;
  size_t wbytes;
  std::vector<void*> ws;
  unsigned short *x, *sc, *zp, *ref, *out;
  WoArgs a{};
  PackedRows(long n, long k, long m = 1, int bits = 4)
      : N(n), K(k), M(m), row_bytes(bits == 4 ? k / 2 : k), groups(bits == 4 ? k / 128 : 1),
        wbytes((size_t)n * row_bytes) {
    ws = weight_copies(wbytes);
    CK(cudaMalloc(&x, M * K * 2));
    CK(cudaMalloc(&sc, N * groups * 2));
    CK(cudaMalloc(&zp, N * groups * 2));
    CK(cudaMalloc(&ref, M * N * 2));
    CK(cudaMalloc(&out, M * N * 2));
    fill_bf16<<<256, 256>>>(x, M * K, -1.f, 1.f, 7, false);
    fill_bf16<<<256, 256>>>(sc, N * groups, 0.002f, 0.02f, 9, false);
    fill_bf16<<<256, 256>>>(zp, N * groups, -3.f, 3.f, 11, true);
    CK(cudaDeviceSynchronize());
    a.x = (i64)x, a.scale = (i64)sc, a.zero = bits == 4 ? (i64)zp : 0, a.rows = M, a.N = N, a.K = K;
    a.row_bytes = row_bytes, a.groups = groups, a.group = bits == 4 ? 128 : k, a.vec = 1;
  }
  ~PackedRows() {
    for (auto p : ws) cudaFree(p);
    cudaFree(x), cudaFree(sc), cudaFree(zp), cudaFree(ref), cudaFree(out);
  }
  void* copy(int i) const { return ws[i % ws.size()]; }
  // Whether `out` is off `ref` by more than 1% of ref's largest value.
  bool wrong() const {
    std::vector<unsigned short> h(M * N), r(M * N);
    CK(cudaMemcpy(h.data(), out, M * N * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), ref, M * N * 2, cudaMemcpyDeviceToHost));
    double d = 0, m = 0;
    for (long i = 0; i < M * N; ++i) d = std::max(d, (double)fabsf(bf(h[i]) - bf(r[i]))), m = std::max(m, (double)fabsf(bf(r[i])));
    return d > 1e-2 * m;
  }
  // The fastest read of the weight's copies alone, us.
  float read_floor_us() const {
    static unsigned* sink = [] {
      unsigned* p;
      CK(cudaMalloc(&p, 4));
      return p;
    }();
    float fl = 1e9;
    for (int blocks : {132 * 2, 132 * 4, 132 * 8})
      fl = std::min(fl, time_us([&](int i) { read_floor<4><<<blocks, 256>>>((const V16*)copy(i), wbytes / 16, sink); }));
    return fl;
  }
};

// Each form's registers and shared memory (forms: {name, fn, ...}).
template <class Form, size_t N> void print_forms(const Form (&forms)[N]) {
  for (const Form& f : forms) {
    cudaFuncAttributes at;
    CK(cudaFuncGetAttributes(&at, f.fn));
    printf("%-7s %3d registers, %6zu bytes shared\n", f.name, at.numRegs, at.sharedSizeBytes);
  }
}

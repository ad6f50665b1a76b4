// What the standalone diagnostics that time chains of kernels in CUDA graphs share
// (scripts/gemv_norm_fold_bench.cu, allreduce_norm_fold_bench.cu, l2_prefetch_bench.cu; after
// kernels/device_prelude.cuh): a checked CUDA call, a launch that may overlap the kernel before it
// (programmatic dependent launch, as Tripy's launches are), a layer's time in a replayed graph, a
// deterministic bfloat16 fill and its host-side reading.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

// `kernel` on `grid` blocks of `block` threads, its parameters' addresses in `params`.
inline void launch_overlapping(const void* kernel, int grid, int block, void** params, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelExC(&cfg, kernel, params));
}

// offset + scale * (a hash of i in [-0.5, 0.5)), as bfloat16.
__global__ void fill_bf16_hash(unsigned short* p, size_t n, float scale, unsigned seed, float offset) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = f2b(offset + scale * ((h & 0xffffff) / 16777216.0f - 0.5f));
  }
}

inline float bf16_value(unsigned short v) { unsigned u = (unsigned)v << 16; float f; memcpy(&f, &u, 4); return f; }

// µs a layer: `record(layer)` issues one layer's launches; `layers` of them captured in a graph,
// replayed after a warm-up, 20 times between two events.
template <class L> float graph_us(int layers, L record) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < layers; ++l) record(l, s);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, s));
  const int reps = 20;
  for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(exec, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(s));
  return ms * 1000.f / reps / layers;
}

// What the standalone diagnostics that time chains of kernels in CUDA graphs share
// (scripts/gemv_norm_fold_bench.cu, allreduce_norm_fold_bench.cu; after kernels/device_prelude.cuh):
// a checked CUDA call, a launch that may overlap the kernel before it (programmatic dependent
// launch, as Tripy's launches are), a deterministic bfloat16 fill and its host-side reading.
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

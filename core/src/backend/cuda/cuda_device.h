// The GPUs the backend drives: gpu:N is CUDA device N, each with its primary context (shared with
// PyTorch/CuPy, so their pointers are ours), properties and default stream. A process pinned to one
// GPU (TRIPY_CUDA_DEVICE or LOCAL_RANK set: one process per GPU, as torchrun starts them) drives
// that one alone, as gpu:0. The calling thread's GPU is runtime/gpu_scope.h's current_gpu().
#pragma once

#include <string>

#include "backend/cuda/cuda_api.h"

namespace tripy::rt::cuda {

struct DeviceInfo {
  int index = 0;  // gpu:index
  CUdevice device = 0;
  CUcontext context = nullptr;
  int arch = 0;  // major * 10 + minor, e.g. 90
  int sm_count = 0;
  int max_smem_per_block_optin = 0;
  size_t total_memory = 0;
  std::string name;
};

// The calling thread's GPU, or gpu:`index`; initialised once each. Fails with kUnavailable naming
// the reason when that GPU cannot be used (none, one past the last, another than a pinned
// process's one).
StatusOr<const DeviceInfo*> device();
StatusOr<const DeviceInfo*> device(int index);
// gpu:index's CUDA device number, and the gpu index of a CUDA device number (in a pinned process,
// its one GPU is gpu:0, and another device's number has none: -1).
int cuda_ordinal(int index);
int gpu_index(int ordinal);
// Whether gpu:0 can be used.
bool device_available();

// Makes the calling thread's GPU's context current on it (cheap; every entry point calls it).
Status make_current();

// The stream that programs and copies on the calling thread's GPU use unless told otherwise.
// Created on first use as a blocking stream, so it is ordered with the legacy default stream
// that other libraries use.
CUstream default_stream();
void set_default_stream(CUstream stream);

}  // namespace tripy::rt::cuda

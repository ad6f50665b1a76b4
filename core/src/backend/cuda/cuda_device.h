// The one GPU the backend drives (TRIPY_CUDA_DEVICE or LOCAL_RANK picks it): its primary context
// (shared with PyTorch/CuPy, so their pointers are ours), properties, and the default stream.
#pragma once

#include <string>

#include "backend/cuda/cuda_api.h"

namespace tripy::rt::cuda {

struct DeviceInfo {
  CUdevice device = 0;
  CUcontext context = nullptr;
  int arch = 0;  // major * 10 + minor, e.g. 90
  int sm_count = 0;
  int max_smem_per_block_optin = 0;
  size_t total_memory = 0;
  std::string name;
};

// Initialises once; fails with kUnavailable naming the reason when no GPU can be used.
StatusOr<const DeviceInfo*> device();
bool device_available();

// Makes the context current on the calling thread (cheap; every entry point calls it).
Status make_current();

// The stream that programs and copies use unless told otherwise. Created on first use as a
// blocking stream, so it is ordered with the legacy default stream that other libraries use.
CUstream default_stream();
void set_default_stream(CUstream stream);

}  // namespace tripy::rt::cuda

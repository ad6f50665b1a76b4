// The GPUs the backend drives: gpu:N is CUDA device N, each with its primary context (shared with
// PyTorch/CuPy, so their pointers are ours), properties and default stream. A process pinned to one
// GPU (TRIPY_CUDA_DEVICE or LOCAL_RANK set: one process per GPU, as torchrun starts them) drives
// that one alone, as gpu:0. The calling thread's GPU is runtime/gpu_scope.h's current_gpu().
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_api.h"

namespace tripy::rt::cuda {

// The most GPUs one process drives (gpu:0 .. gpu:kMaxGpus - 1): per-GPU state is a table this long.
inline constexpr int kMaxGpus = 64;

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

// A value made once per GPU, by `make` with that GPU's context current, and kept for the process
// (a library's handle): get() gives the calling thread's GPU's. A mutex rather than
// std::call_once: cuDNN's first cudnnCreate runs a call_once of its own, and one nested in another
// is where libstdc++ copies can disagree (see python/CMakeLists.txt: a hang on the GPU machine).
template <class T>
class PerGpu {
 public:
  template <class Make>
  StatusOr<T> get(Make make) {
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = made_.find(dev->index);
    if (it == made_.end()) {
      TRIPY_RETURN_IF_ERROR(make_current());
      it = made_.emplace(dev->index, make()).first;
    }
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, StatusOr<T>> made_;
};

}  // namespace tripy::rt::cuda

// A caching device allocator: freed blocks go to per-stream free lists by size class and are
// reused, so steady-state runs never call cuMemAlloc; on out-of-memory the cache is released and
// the allocation retried before a clear kResourceExhausted error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "tripy/tensor.h"

namespace tripy::rt::cuda {

// One cache per GPU. Allocates `bytes` (at least 256-byte aligned) on the calling thread's GPU for
// use on `stream`, and gives them back to gpu:`index`'s cache. A block is only reused by later
// allocations on the same stream, so stream order makes reuse safe without events.
StatusOr<CUdeviceptr> device_alloc(size_t bytes, CUstream stream);
void device_free(CUdeviceptr ptr, int index);

// A tensor on the calling thread's GPU whose memory returns to the cache when the last Tensor
// referring to it goes.
StatusOr<Tensor> empty_device(DType dtype, std::vector<int64_t> shape, CUstream stream);

// Returns every cached (unused) block of the calling thread's GPU to the driver.
Status release_cached_blocks();

struct AllocatorStats {
  size_t in_use_bytes = 0, cached_bytes = 0, device_allocs = 0;
};
AllocatorStats allocator_stats();  // every GPU's

}  // namespace tripy::rt::cuda

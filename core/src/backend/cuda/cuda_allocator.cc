// Caching device allocator: size classes, per-stream free lists, release-and-retry on OOM.
#include "backend/cuda/cuda_allocator.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cuda_device.h"

namespace tripy::rt::cuda {
namespace {

// <= 1 MiB: multiples of 512 B; above: multiples of 1/8 of the next power of two (<= 12.5% waste).
size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (1u << 20)) return (bytes + 511) / 512 * 512;
  size_t p = 1;
  while (p < bytes) p <<= 1;
  size_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

struct Block {
  size_t size;
  CUstream stream;
};

class Cache {
 public:
  StatusOr<CUdeviceptr> alloc(size_t bytes, CUstream stream) {
    TRIPY_RETURN_IF_ERROR(make_current());
    size_t cls = size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find({stream, cls});
      if (it != free_.end() && !it->second.empty()) {
        CUdeviceptr p = it->second.back();
        it->second.pop_back();
        cached_ -= cls;
        in_use_ += cls;
        live_[p] = Block{cls, stream};
        return p;
      }
    }
    CUdeviceptr p = 0;
    // Requests beyond the whole GPU fail here: absurd sizes have been seen to upset the driver.
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    CUresult r = cls > dev->total_memory ? CUDA_ERROR_OUT_OF_MEMORY : api().cuMemAlloc(&p, cls);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && cls > dev->total_memory) return out_of_memory(bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      // Cached blocks may be what is missing: give them back and try once more.
      TRIPY_RETURN_IF_ERROR(release_all());
      r = api().cuMemAlloc(&p, cls);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return out_of_memory(bytes);
    TRIPY_RETURN_IF_ERROR(check(r, "cuMemAlloc"));
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = Block{cls, stream};
    in_use_ += cls;
    ++device_allocs_;
    return p;
  }

  void free(CUdeviceptr p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;
    Block b = it->second;
    live_.erase(it);
    in_use_ -= b.size;
    cached_ += b.size;
    free_[{b.stream, b.size}].push_back(p);
  }

  Status release_all() {
    // Pending kernels may still use cached blocks' last contents; wait before freeing.
    TRIPY_CUDA_TRY(cuCtxSynchronize());
    std::lock_guard<std::mutex> lock(mu_);
    Status first;
    for (auto& [key, ptrs] : free_) {
      for (CUdeviceptr p : ptrs) {
        Status st = TRIPY_CUDA(cuMemFree(p));
        if (first.ok() && !st.ok()) first = st;
      }
    }
    free_.clear();
    cached_ = 0;
    return first;
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return AllocatorStats{in_use_, cached_, device_allocs_};
  }

 private:
  Status out_of_memory(size_t bytes) {
    size_t free_b = 0, total_b = 0;
    (void)TRIPY_CUDA(cuMemGetInfo(&free_b, &total_b));
    return Status(StatusCode::kResourceExhausted,
                  "CUDA out of memory allocating " + std::to_string(bytes) + " bytes (" +
                      std::to_string(free_b) + " of " + std::to_string(total_b) +
                      " bytes free on the GPU; " + std::to_string(stats().in_use_bytes) +
                      " bytes held by Tripy tensors)");
  }

  std::mutex mu_;
  std::map<std::pair<CUstream, size_t>, std::vector<CUdeviceptr>> free_;
  std::unordered_map<CUdeviceptr, Block> live_;
  size_t in_use_ = 0, cached_ = 0, device_allocs_ = 0;
};

// One cache per GPU, made on first use. Never destroyed: tensors released by static destructors
// at exit may still return blocks.
std::array<std::atomic<Cache*>, kMaxGpus>& caches() {
  static auto* c = new std::array<std::atomic<Cache*>, kMaxGpus>();
  return *c;
}
Cache& cache(int index) {
  std::atomic<Cache*>& slot = caches()[static_cast<size_t>(index)];
  Cache* c = slot.load();
  if (c == nullptr) {
    Cache* made = new Cache();
    if (slot.compare_exchange_strong(c, made)) return *made;
    delete made;  // another thread made it first
  }
  return *c;
}

}  // namespace

StatusOr<CUdeviceptr> device_alloc(size_t bytes, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  return cache(dev->index).alloc(bytes, stream);
}

void device_free(CUdeviceptr ptr, int index) { cache(index).free(ptr); }

StatusOr<Tensor> empty_device(DType dtype, std::vector<int64_t> shape, CUstream stream) {
  size_t bytes = static_cast<size_t>(numel_of(shape)) * dtype_size(dtype);
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  const int index = dev->index;
  TRIPY_ASSIGN_OR_RETURN(CUdeviceptr p, cache(index).alloc(bytes, stream));
  void* ptr = reinterpret_cast<void*>(p);
  std::shared_ptr<void> keep(ptr, [index](void* q) { device_free(reinterpret_cast<CUdeviceptr>(q), index); });
  return Tensor::borrow(ptr, dtype, std::move(shape), Device{Device::Kind::kGpu, index}, std::move(keep));
}

Status release_cached_blocks() {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  TRIPY_RETURN_IF_ERROR(make_current());
  return cache(dev->index).release_all();
}

AllocatorStats allocator_stats() {
  AllocatorStats all{0, 0, 0};
  for (std::atomic<Cache*>& slot : caches())
    if (Cache* c = slot.load()) {
      const AllocatorStats s = c->stats();
      all.in_use_bytes += s.in_use_bytes;
      all.cached_bytes += s.cached_bytes;
      all.device_allocs += s.device_allocs;
    }
  return all;
}

}  // namespace tripy::rt::cuda

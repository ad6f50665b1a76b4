// Device error records in mapped pinned host memory, and the registry that host synchronisation
// points check (see cuda_error_record.h).
#include "backend/cuda/cuda_error_record.h"

#include <atomic>
#include <mutex>
#include <set>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_nccl.h"
#include "runtime/gpu_scope.h"

namespace tripy::rt::cuda {
namespace {

// Live records; the mutex also serialises take(), so a program's own check and a sync point's
// check never report one error twice.
std::mutex& registry_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::set<ErrorRecord*>& registry() {
  static auto* s = new std::set<ErrorRecord*>();
  return *s;
}

}  // namespace

StatusOr<std::unique_ptr<ErrorRecord>> ErrorRecord::create(Explain explain, CUstream stream) {
  std::unique_ptr<ErrorRecord> r(new ErrorRecord());
  r->explain_ = std::move(explain);
  r->device_index_ = current_gpu();
  void* host = nullptr;
  TRIPY_CUDA_TRY(cuMemHostAlloc(&host, 4 * sizeof(int64_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  r->host_ = static_cast<volatile int64_t*>(host);
  for (int i = 0; i < 4; ++i) r->host_[i] = 0;
  TRIPY_CUDA_TRY(cuMemHostGetDevicePointer(&r->record_dev_, host, 0));
  TRIPY_ASSIGN_OR_RETURN(r->claim_, empty_device(DType::kInt64, {1}, stream));
  TRIPY_CUDA_TRY(cuMemsetD8Async(r->claim(), 0, sizeof(int64_t), stream));
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(r.get());
  return r;
}

ErrorRecord::~ErrorRecord() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(this);
  }
  // Kernels of this program may still be queued: they must finish before the memory goes.
  GpuScope on(device_index_);
  if (host_ && make_current().ok()) {
    (void)TRIPY_CUDA(cuCtxSynchronize());
    (void)TRIPY_CUDA(cuMemFreeHost(const_cast<int64_t*>(host_)));
  }
}

bool ErrorRecord::pending() const {
  std::atomic_thread_fence(std::memory_order_acquire);
  return host_[0] != 0;
}

Status ErrorRecord::take() {
  if (!pending()) return ok_status();
  std::lock_guard<std::mutex> lock(registry_mutex());
  return take_locked();
}

Status ErrorRecord::take_locked() {
  if (!pending()) return ok_status();  // another thread took it
  GpuScope on(device_index_);
  TRIPY_RETURN_IF_ERROR(make_current());
  TRIPY_CUDA_TRY(cuCtxSynchronize());
  std::atomic_thread_fence(std::memory_order_acquire);
  const Fields f{host_[0], host_[1], host_[2], host_[3]};
  for (int i = 0; i < 4; ++i) host_[i] = 0;
  TRIPY_CUDA_TRY(cuMemsetD8Async(claim(), 0, sizeof(int64_t), default_stream()));
  TRIPY_CUDA_TRY(cuStreamSynchronize(default_stream()));
  return explain_(f);
}

Status check_device_errors() {
  std::lock_guard<std::mutex> lock(registry_mutex());  // records cannot go while we read them
  for (ErrorRecord* r : registry())
    if (r->device_index_ == current_gpu()) TRIPY_RETURN_IF_ERROR(r->take_locked());
  return take_watchdog_error();  // a collective the NCCL watchdog aborted (cuda_nccl.h)
}

}  // namespace tripy::rt::cuda

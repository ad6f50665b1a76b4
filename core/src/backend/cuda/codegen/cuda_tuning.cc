#include "backend/cuda/codegen/cuda_tuning.h"

#include <algorithm>

#include "backend/cuda/cuda_allocator.h"

namespace tripy::rt::cuda {

StatusOr<std::vector<CUdeviceptr>> tuning_scratch(DType dtype, const std::vector<int64_t>& elements,
                                                 CUfunction fill_fn, CUstream stream, std::vector<Tensor>& keep) {
  std::vector<CUdeviceptr> ptrs;
  for (int64_t n : elements) {
    TRIPY_ASSIGN_OR_RETURN(Tensor t, empty_device(dtype, {std::max<int64_t>(n, 1)}, stream));
    ptrs.push_back(reinterpret_cast<CUdeviceptr>(t.data()));
    keep.push_back(t);
    int64_t words[3] = {static_cast<int64_t>(ptrs.back()), n, static_cast<int64_t>(ptrs.size())};
    void* params[] = {words};
    TRIPY_CUDA_TRY(cuLaunchKernel(fill_fn, 264, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  }
  return ptrs;
}

CallTimer::~CallTimer() {
  if (start_) (void)TRIPY_CUDA(cuEventDestroy(start_));
  if (stop_) (void)TRIPY_CUDA(cuEventDestroy(stop_));
}

StatusOr<float> CallTimer::time(const std::function<Status()>& call, int reps, CUstream stream) {
  if (!start_) TRIPY_CUDA_TRY(cuEventCreate(&start_, CU_EVENT_DEFAULT));
  if (!stop_) TRIPY_CUDA_TRY(cuEventCreate(&stop_, CU_EVENT_DEFAULT));
  if (spin_) {
    // Long enough for the host to queue every call (cuDNN and cuBLASLt take ~5-30 us each).
    int64_t ns = std::min<int64_t>(20000 + int64_t{30000} * reps, 2000000);
    void* params[] = {&ns};
    TRIPY_CUDA_TRY(cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  }
  TRIPY_CUDA_TRY(cuEventRecord(start_, stream));
  for (int r = 0; r < reps; ++r) TRIPY_RETURN_IF_ERROR(call());
  TRIPY_CUDA_TRY(cuEventRecord(stop_, stream));
  TRIPY_CUDA_TRY(cuEventSynchronize(stop_));
  float ms = 0;
  TRIPY_CUDA_TRY(cuEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace tripy::rt::cuda

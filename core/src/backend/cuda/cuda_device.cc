// Device discovery and the primary contexts, each GPU initialised once per process.
#include "backend/cuda/cuda_device.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "runtime/gpu_scope.h"

namespace tripy::rt::cuda {
namespace {

struct DeviceState {
  std::once_flag once;
  DeviceInfo info;
  Status status;  // why the device is unusable, if it is
  std::atomic<CUstream> stream{nullptr};
  std::once_flag stream_once;
};

int visible_count() {
  int count = 0;
  if (api().cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

// The ordinal a pinned process drives (TRIPY_CUDA_DEVICE, else LOCAL_RANK: one process per GPU
// under torchrun; one past the visible GPUs is 0: a launcher that gives each process one visible
// GPU), or -1 where neither is set.
int pinned_ordinal() {
  for (const char* name : {"TRIPY_CUDA_DEVICE", "LOCAL_RANK"}) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == 0) continue;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    return *end == 0 && v >= 0 && v < visible_count() ? static_cast<int>(v) : 0;
  }
  return -1;
}

Status init_device(int index, DeviceInfo& info) {
  const Api& a = api();
  if (!a.driver_ok) return Status(StatusCode::kUnavailable, "CUDA is unavailable: " + a.why_unavailable);
  const int count = visible_count(), pinned = pinned_ordinal();
  if (count < 1) return Status(StatusCode::kUnavailable, "CUDA sees no GPU");
  if (pinned >= 0 && index != 0)
    return Status(StatusCode::kUnavailable,
                  "gpu:" + std::to_string(index) + " is not available: this process drives one GPU (CUDA device " +
                      std::to_string(pinned) + ", as TRIPY_CUDA_DEVICE or LOCAL_RANK says), which is gpu:0");
  if (index < 0 || index >= count)
    return Status(StatusCode::kUnavailable, "gpu:" + std::to_string(index) + " does not exist: CUDA sees " +
                                                std::to_string(count) + " GPU" + (count == 1 ? "" : "s"));
  info.index = index;
  TRIPY_CUDA_TRY(cuDeviceGet(&info.device, pinned >= 0 ? pinned : index));
  TRIPY_CUDA_TRY(cuDevicePrimaryCtxRetain(&info.context, info.device));
  TRIPY_CUDA_TRY(cuCtxSetCurrent(info.context));
  int major = 0, minor = 0;
  TRIPY_CUDA_TRY(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.device));
  TRIPY_CUDA_TRY(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, info.device));
  info.arch = major * 10 + minor;
  TRIPY_CUDA_TRY(cuDeviceGetAttribute(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, info.device));
  TRIPY_CUDA_TRY(cuDeviceGetAttribute(&info.max_smem_per_block_optin,
                                      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, info.device));
  TRIPY_CUDA_TRY(cuDeviceTotalMem(&info.total_memory, info.device));
  char name[256] = {0};
  TRIPY_CUDA_TRY(cuDeviceGetName(name, sizeof(name) - 1, info.device));
  info.name = name;
  return ok_status();
}

// Never destroyed: tensors and programs released at exit may still ask.
std::array<DeviceState, kMaxGpus>& states() {
  static auto* s = new std::array<DeviceState, kMaxGpus>();
  return *s;
}

StatusOr<DeviceState*> state(int index) {
  if (index < 0 || index >= kMaxGpus)
    return Status(StatusCode::kUnavailable, "gpu:" + std::to_string(index) + " does not exist");
  DeviceState& s = states()[static_cast<size_t>(index)];
  std::call_once(s.once, [&] { s.status = init_device(index, s.info); });
  if (!s.status.ok()) return s.status;
  return &s;
}

}  // namespace

StatusOr<const DeviceInfo*> device(int index) {
  TRIPY_ASSIGN_OR_RETURN(DeviceState * s, state(index));
  return &s->info;
}

StatusOr<const DeviceInfo*> device() { return device(current_gpu()); }

bool device_available() { return device(0).ok(); }

int cuda_ordinal(int index) {
  const int pinned = pinned_ordinal();
  return pinned >= 0 && index == 0 ? pinned : index;
}

int gpu_index(int ordinal) {
  const int pinned = pinned_ordinal();
  return pinned < 0 ? ordinal : ordinal == pinned ? 0 : -1;
}

Status make_current() {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* d, device());
  // Skip the call when already current: cheap either way, but this is on every run's path.
  CUcontext cur = nullptr;
  if (api().cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->context) return ok_status();
  return TRIPY_CUDA(cuCtxSetCurrent(d->context));
}

CUstream default_stream() {
  StatusOr<DeviceState*> s = state(current_gpu());
  if (!s.ok()) return nullptr;
  DeviceState& st = *s.value();
  std::call_once(st.stream_once, [&] {
    if (!make_current().ok()) return;
    CUstream created = nullptr;
    if (TRIPY_CUDA(cuStreamCreate(&created, CU_STREAM_DEFAULT)).ok() && st.stream.load() == nullptr)
      st.stream.store(created);
  });
  return st.stream.load();
}

void set_default_stream(CUstream stream) {
  default_stream();  // create ours first, so a later call cannot overwrite the user's choice
  StatusOr<DeviceState*> s = state(current_gpu());
  if (s.ok()) s.value()->stream.store(stream);
}

}  // namespace tripy::rt::cuda

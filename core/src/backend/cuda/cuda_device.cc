// Device discovery and the primary context, initialised once per process.
#include "backend/cuda/cuda_device.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace tripy::rt::cuda {
namespace {

struct DeviceState {
  DeviceInfo info;
  Status status;  // why the device is unusable, if it is
};

// The GPU this process drives: TRIPY_CUDA_DEVICE, else LOCAL_RANK (one process per GPU under
// torchrun: a sharded executable's rank), else 0; an ordinal past the visible GPUs is 0 (a launcher
// that gives each process one visible GPU).
int device_ordinal() {
  int count = 0;
  if (api().cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) return 0;
  for (const char* name : {"TRIPY_CUDA_DEVICE", "LOCAL_RANK"}) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == 0) continue;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (*end == 0 && v >= 0 && v < count) return static_cast<int>(v);
    return 0;
  }
  return 0;
}

Status init_device(DeviceInfo& info) {
  const Api& a = api();
  if (!a.driver_ok) return Status(StatusCode::kUnavailable, "CUDA is unavailable: " + a.why_unavailable);
  TRIPY_CUDA_TRY(cuDeviceGet(&info.device, device_ordinal()));
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

DeviceState& state() {
  static DeviceState* s = [] {
    auto* st = new DeviceState();
    st->status = init_device(st->info);
    return st;
  }();
  return *s;
}

std::atomic<CUstream> g_stream{nullptr};
std::once_flag g_stream_once;

}  // namespace

StatusOr<const DeviceInfo*> device() {
  DeviceState& s = state();
  if (!s.status.ok()) return s.status;
  return &s.info;
}

bool device_available() { return state().status.ok(); }

Status make_current() {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* d, device());
  // Skip the call when already current: cheap either way, but this is on every run's path.
  CUcontext cur = nullptr;
  if (api().cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->context) return ok_status();
  return TRIPY_CUDA(cuCtxSetCurrent(d->context));
}

CUstream default_stream() {
  std::call_once(g_stream_once, [] {
    if (!make_current().ok()) return;
    CUstream s = nullptr;
    if (TRIPY_CUDA(cuStreamCreate(&s, CU_STREAM_DEFAULT)).ok() && g_stream.load() == nullptr) {
      g_stream.store(s);
    }
  });
  return g_stream.load();
}

void set_default_stream(CUstream stream) {
  default_stream();  // create ours first, so a later call cannot overwrite the user's choice
  g_stream.store(stream);
}

}  // namespace tripy::rt::cuda

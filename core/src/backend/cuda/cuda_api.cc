// Loads libcuda, NVRTC and cuBLASLt with dlopen and fills the one table of entry points.
#include "backend/cuda/cuda_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace tripy::rt::cuda {
namespace {

// Candidate paths, most specific first: $TRIPY_CUDA_HOME, /usr/local/cuda, the loader's path.
void* open_library(const char* soname) {
  std::vector<std::string> paths;
  if (const char* home = std::getenv("TRIPY_CUDA_HOME")) {
    paths.push_back(std::string(home) + "/lib64/" + soname);
    paths.push_back(std::string(home) + "/lib/" + soname);
  }
  paths.push_back(std::string("/usr/local/cuda/lib64/") + soname);
  paths.push_back(soname);
  for (const std::string& p : paths) {
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  return nullptr;
}

template <typename Fn>
bool load_symbol(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

// The table's synchronising entry points count each wait, then call the driver's.
std::atomic<int64_t> g_host_waits{0};
decltype(&::cuStreamSynchronize) g_stream_sync = nullptr;
decltype(&::cuEventSynchronize) g_event_sync = nullptr;
decltype(&::cuCtxSynchronize) g_ctx_sync = nullptr;
CUresult counted_stream_sync(CUstream s) {
  ++g_host_waits;
  return g_stream_sync(s);
}
CUresult counted_event_sync(CUevent e) {
  ++g_host_waits;
  return g_event_sync(e);
}
CUresult counted_ctx_sync() {
  ++g_host_waits;
  return g_ctx_sync();
}
void count_waits(Api& a) {
  g_stream_sync = a.cuStreamSynchronize;
  g_event_sync = a.cuEventSynchronize;
  g_ctx_sync = a.cuCtxSynchronize;
  a.cuStreamSynchronize = counted_stream_sync;
  a.cuEventSynchronize = counted_event_sync;
  a.cuCtxSynchronize = counted_ctx_sync;
}

void load_driver(Api& a) {
  void* lib = open_library("libcuda.so.1");
  if (!lib) {
    a.why_unavailable = "libcuda.so.1 (the NVIDIA driver) could not be loaded";
    return;
  }
  // cuGetProcAddress picks the entry point version matching the headers we compiled against.
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  GetProc get_proc = nullptr;
  if (!load_symbol(lib, "cuGetProcAddress_v2", get_proc)) {
    a.why_unavailable = "the NVIDIA driver is too old (no cuGetProcAddress_v2; CUDA 12+ needed)";
    return;
  }
  bool ok = true;
  std::string missing;
  // The version whose entry point matches cuda.h's declaration. CUDA 13 added
  // cuCtxSynchronize_v2(CUcontext) without renaming the plain name in the header, so asking at
  // CUDA_VERSION returns a function with another signature: ask for the one we declare.
  auto entry_version = [](const char* name) {
    return std::string(name) == "cuCtxSynchronize" ? 12000 : CUDA_VERSION;
  };
#define TRIPY_CUDA_LOAD_DRIVER(name)                                                           \
  {                                                                                            \
    void* p = nullptr;                                                                         \
    CUdriverProcAddressQueryResult q{};                                                        \
    if (get_proc(#name, &p, entry_version(#name), CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || \
        p == nullptr) {                                                                        \
      ok = false;                                                                              \
      missing = #name;                                                                         \
    }                                                                                          \
    a.name = reinterpret_cast<decltype(a.name)>(p);                                            \
  }
  TRIPY_CUDA_DRIVER_FUNCS(TRIPY_CUDA_LOAD_DRIVER)
#undef TRIPY_CUDA_LOAD_DRIVER
  if (!ok) {
    a.why_unavailable = "the NVIDIA driver lacks " + missing;
    return;
  }
  CUresult r = a.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    a.cuGetErrorString(r, &s);
    a.why_unavailable = std::string("cuInit failed: ") + (s ? s : "unknown error");
    return;
  }
  int count = 0;
  if (a.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    a.why_unavailable = "no CUDA device is present";
    return;
  }
  count_waits(a);
  a.driver_ok = true;
}

void load_nvrtc(Api& a) {
  void* lib = open_library("libnvrtc.so.13");
  if (!lib) return;
  bool ok = true;
#define TRIPY_CUDA_LOAD_PLAIN(name) ok = load_symbol(lib, #name, a.name) && ok;
  TRIPY_NVRTC_FUNCS(TRIPY_CUDA_LOAD_PLAIN)
  a.nvrtc_ok = ok;
}

void load_cublaslt(Api& a) {
  void* lib = open_library("libcublasLt.so.13");
  if (!lib) return;
  bool ok = true;
  TRIPY_CUBLASLT_FUNCS(TRIPY_CUDA_LOAD_PLAIN)
  a.cublaslt_ok = ok;
}

// cuDNN 9 only (the legacy API's signatures are those of the headers we compile against).
void load_cudnn(Api& a) {
  void* lib = open_library("libcudnn.so.9");
  if (!lib) return;
  bool ok = true;
  TRIPY_CUDNN_FUNCS(TRIPY_CUDA_LOAD_PLAIN)
#undef TRIPY_CUDA_LOAD_PLAIN
  a.cudnn_ok = ok && a.cudnnGetVersion() / 10000 == 9;
}

Api& table() {
  // Never destroyed: kernels may still be freed by static destructors at exit.
  static Api* instance = [] {
    auto* a = new Api();
    load_driver(*a);
    // NVRTC works without a GPU: code generation can be checked on any machine.
    load_nvrtc(*a);
    return a;
  }();
  return *instance;
}

}  // namespace

const Api& api() { return table(); }

namespace {

// Fills only one library's entries of the table, once per instantiation; readers of those entries
// come after a call that returned true (the static's initialisation happens before its return).
template <void (*Load)(Api&), bool Api::*Ok>
bool loaded_once() {
  static const bool ok = [] {
    Api& a = table();
    if (a.driver_ok) Load(a);
    return a.*Ok;
  }();
  return ok;
}

}  // namespace

bool cublaslt_loaded() { return loaded_once<load_cublaslt, &Api::cublaslt_ok>(); }
bool cudnn_loaded() { return loaded_once<load_cudnn, &Api::cudnn_ok>(); }

int64_t host_waits() { return g_host_waits.load(); }

Status check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return ok_status();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api().cuGetErrorName) api().cuGetErrorName(r, &name);
  if (api().cuGetErrorString) api().cuGetErrorString(r, &text);
  std::string msg = std::string("CUDA call ") + call + " failed: " + (name ? name : "error") +
                    " (" + (text ? text : "no description") + ")";
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return Status(StatusCode::kResourceExhausted, msg);
  return Status(StatusCode::kInternal, msg);
}

Status check(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return ok_status();
  const char* text = api().nvrtcGetErrorString ? api().nvrtcGetErrorString(r) : "unknown";
  std::string msg = std::string("NVRTC call ") + call + " failed: " + text;
  if (r == NVRTC_ERROR_OUT_OF_MEMORY) return Status(StatusCode::kResourceExhausted, msg);
  return Status(StatusCode::kInternal, msg);
}

Status check(cublasStatus_t r, const char* call) {
  if (r == CUBLAS_STATUS_SUCCESS) return ok_status();
  const char* text = api().cublasLtGetStatusString ? api().cublasLtGetStatusString(r) : "unknown";
  std::string msg = std::string("cuBLASLt call ") + call + " failed: " + text;
  if (r == CUBLAS_STATUS_ALLOC_FAILED) return Status(StatusCode::kResourceExhausted, msg);
  return Status(StatusCode::kInternal, msg);
}

Status check(cudnnStatus_t r, const char* call) {
  if (r == CUDNN_STATUS_SUCCESS) return ok_status();
  const char* text = api().cudnnGetErrorString ? api().cudnnGetErrorString(r) : "unknown";
  std::string msg = std::string("cuDNN call ") + call + " failed: " + text;
  if (r == CUDNN_STATUS_ALLOC_FAILED) return Status(StatusCode::kResourceExhausted, msg);
  return Status(StatusCode::kInternal, msg);
}

int debug_level() {
  const char* v = std::getenv("TRIPY_DEBUG");
  return v ? std::atoi(v) : 0;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tripy::rt::cuda

// Which backend serves a device kind. The runtime asks here and nowhere else, so a build without a
// backend (or a machine without its device) degrades to a clear "unavailable" error upstream.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

// The CUDA backend is compiled only where CUDA headers exist (core/CMakeLists.txt); its header is
// the sign that its sources are present in this tree.
#if TRIPY_WITH_CUDA && __has_include("backend/cuda/cuda_backend.h")
#include "backend/cuda/cuda_backend.h"
#define TRIPY_HAS_CUDA_BACKEND 1
#endif

namespace tripy::rt {

Backend* backend_for(Device::Kind kind) {
  Backend* backend = nullptr;
  switch (kind) {
    case Device::Kind::kCpu: backend = cpu_backend(); break;
    case Device::Kind::kGpu:
#ifdef TRIPY_HAS_CUDA_BACKEND
      backend = cuda_backend();
#endif
      break;
  }
  return backend != nullptr && backend->available() ? backend : nullptr;
}

}  // namespace tripy::rt

// The CUDA backend's compile-time half (code generation, NVRTC, tactic timing), registered with
// the runtime's builder registry (runtime/backend.h) from programs that link the compiler side.
#pragma once

#include "runtime/backend.h"

namespace tripy::rt {

// Always non-null in builds with CUDA headers; building needs a GPU (tuning) and NVRTC.
Builder* cuda_builder();

}  // namespace tripy::rt

// kPooling on the GPU: one fixed NVRTC module (max/average pooling per dtype, one thread per output
// element) compiled once per program, like the convolution module.
#pragma once

#include <string>

#include "backend/cuda/cuda_launch.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// Its module and function names: codegen/cuda_sources.h.
// The launch for kernel `k` at run-time sizes (no launch when the output is empty).
std::vector<Launch> plan_pool_launch(const Program& p, const Kernel& k, CUfunction fn,
                                     const std::vector<int64_t>& slots, int sm_count);

}  // namespace tripy::rt::cuda

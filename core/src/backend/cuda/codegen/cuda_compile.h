// Generated CUDA C++ -> device code with NVRTC: each distinct source compiled once, distinct
// sources in parallel, results cached on disk keyed by hash(source, arch, NVRTC version).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_artifacts.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

// A stable 128-bit hash as 32 hex digits (FNV-1a twice, different seeds): file names, dedupe.
std::string hash_hex(const std::string& text);

// Compiles every source (they should already be distinct) for sm_<arch>, on up to one thread per
// core (16 at most), `spare_cores` fewer when the caller keeps them busy. `names` label errors.
StatusOr<std::vector<CompiledModule>> compile_modules(const std::vector<std::string>& sources,
                                                      const std::vector<std::string>& names,
                                                      int arch, int spare_cores = 0);

// Where compiled kernels are cached: $TRIPY_CACHE_DIR, else ~/.cache/tripy/kernels; "" when
// caching is off (TRIPY_CACHE_DIR=off) or no directory can be made.
std::string kernel_cache_dir();

// Whether NVRTC could be loaded (it needs no GPU, so code generation is testable anywhere).
// (debug_level(), TRIPY_DEBUG, is the runtime's: cuda_api.h.)
bool nvrtc_available();

}  // namespace tripy::rt::cuda

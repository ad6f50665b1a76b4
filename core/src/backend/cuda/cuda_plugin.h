// kPlugin on the GPU: the module source a plugin's CUDA C++ becomes, and its launch. The kernel
// takes one by-value PluginArgs (the prelude below defines it): per input and for the output its
// address, rank and shape, then the number of inputs and n, the output's element count. It runs
// with ceil(n / block) blocks of `block` threads (one thread per output element; a grid-stride
// loop works too). Plugin fields that are numbers, bools or lists of numbers are macros:
// TRIPY_FIELD_<name> (a list: {a, b, ...} and TRIPY_FIELD_<name>_COUNT).
#pragma once

#include <string>

#include "backend/cuda/cuda_launch.h"

namespace tripy::rt::cuda {

// Words of PluginArgs: kPluginTensorWords per tensor (data, rank, shape[8]) for 8 inputs and the
// output, then num_inputs and n.
inline constexpr int kPluginTensorWords = 2 + static_cast<int>(kMaxPluginRank);
inline constexpr int kPluginOutputWord = static_cast<int>(kMaxPluginInputs) * kPluginTensorWords;
inline constexpr int kPluginWords = kPluginOutputWord + kPluginTensorWords + 2;

// plugin_module_source (the module's text) is the compiler side's: codegen/cuda_sources.h.
// The launch of kernel `k` for the buffer shapes of one input-shape signature (none when the
// output is empty).
StatusOr<std::vector<Launch>> plan_plugin(const Program& p, const Kernel& k, CUfunction fn,
                                          const std::vector<std::vector<int64_t>>& shapes);

}  // namespace tripy::rt::cuda

// Plugin kernels on the GPU: the launch (see cuda_plugin.h for the calling convention users write
// to; the module's source: codegen/cuda_plugin_source.cc).
#include "backend/cuda/cuda_plugin.h"

#include <algorithm>

namespace tripy::rt::cuda {

StatusOr<std::vector<Launch>> plan_plugin(const Program& p, const Kernel& k, CUfunction fn,
                                          const std::vector<std::vector<int64_t>>& shapes) {
  if (!fn) return kernel_failure(p, k, "no CUDA function for this plugin");
  if (k.inputs.size() > kMaxPluginInputs || k.outputs.size() != 1) return kernel_failure(p, k, "bad plugin arity");
  Launch l;
  l.fn = fn;
  l.words.assign(kPluginWords, 0);
  auto describe = [&](int32_t buffer, int base) {
    const std::vector<int64_t>& shape = shapes[static_cast<size_t>(buffer)];
    l.ptrs.push_back({base, buffer, 0});
    l.words[base + 1] = static_cast<int64_t>(shape.size());
    for (size_t d = 0; d < shape.size() && d < kMaxPluginRank; ++d) l.words[base + 2 + d] = shape[d];
  };
  for (size_t i = 0; i < k.inputs.size(); ++i) describe(k.inputs[i], static_cast<int>(i) * kPluginTensorWords);
  describe(k.outputs[0], kPluginOutputWord);
  int64_t n = 1;
  for (int64_t d : shapes[static_cast<size_t>(k.outputs[0])]) n *= d;
  l.words[kPluginWords - 2] = static_cast<int64_t>(k.inputs.size());
  l.words[kPluginWords - 1] = n;
  if (n == 0) return std::vector<Launch>{};
  const int64_t block = k.plugin.block;
  l.block_x = static_cast<unsigned>(block);
  l.grid = static_cast<unsigned>(std::min<int64_t>((n + block - 1) / block, 0x7fffffff));
  return std::vector<Launch>{std::move(l)};
}

}  // namespace tripy::rt::cuda

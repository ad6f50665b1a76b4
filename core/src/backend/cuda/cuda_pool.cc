// kPooling's launch: one thread per output element over a grid-stride loop (the module's source:
// codegen/kernels/pool.cuh).
#include "backend/cuda/cuda_pool.h"

namespace tripy::rt::cuda {

std::vector<Launch> plan_pool_launch(const Program& p, const Kernel& k, CUfunction fn,
                                     const std::vector<int64_t>& slots, int sm_count) {
  const PoolingAttrs& a = k.pooling;
  // Sizes channels-first, whatever the buffers' layout.
  const std::vector<int64_t> x = to_channels_first(a.layout, p.buffer_shape(k.inputs[0], slots));
  const std::vector<int64_t> out = to_channels_first(a.layout, p.buffer_shape(k.outputs[0], slots));
  const int64_t n = numel_of(out);
  if (n == 0) return {};
  const int nd = static_cast<int>(a.spatial());
  Launch l;
  l.fn = fn;
  l.words.assign(25, 0);
  l.words[2] = out[0] * out[1];
  for (int j = 0; j < 3; ++j) {  // right-aligned: missing leading dims are 1 (padding 0)
    const int i = j - (3 - nd);
    l.words[3 + j] = i >= 0 ? x[i + 2] : 1;
    l.words[6 + j] = i >= 0 ? out[i + 2] : 1;
    l.words[9 + j] = i >= 0 ? a.window[i] : 1;
    l.words[12 + j] = i >= 0 ? a.stride[i] : 1;
    l.words[15 + j] = i >= 0 ? a.pad_before[i] : 0;
    l.words[18 + j] = i >= 0 ? a.pad_after[i] : 0;
  }
  l.words[21] = a.kind == PoolingAttrs::Kind::kMax;
  l.words[22] = a.count_include_pad;
  l.words[23] = out[1];
  l.words[24] = a.layout == Layout::kChannelsLast;
  l.ptrs = {{0, k.outputs[0], 0}, {1, k.inputs[0], 0}};
  l.grid = grid_for(n, 256, sm_count);
  return {l};
}

}  // namespace tripy::rt::cuda

// Memory planning: places temporaries in one arena so that buffers whose lifetimes (kernel index
// ranges) overlap never share bytes, reusing space greedily (largest first, best-fit gap).
#pragma once

#include <cstdint>
#include <vector>

namespace tripy::compiler {

inline constexpr int64_t kArenaAlignment = 256;

struct BufferLife {
  int64_t bytes = 0;
  int32_t first = 0, last = 0;  // kernels that write it first and read it last (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // parallel to the buffers, each a multiple of kArenaAlignment
  int64_t arena_bytes = 0;
};

MemoryPlan plan_memory(const std::vector<BufferLife>& buffers);

}  // namespace tripy::compiler

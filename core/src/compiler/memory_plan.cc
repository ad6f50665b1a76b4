// Greedy arena planning: the largest buffers are placed first, each into the smallest gap left
// by already placed buffers that are live at the same time (or past the end).
#include "compiler/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tripy::compiler {
namespace {

int64_t align_up(int64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool overlaps(const BufferLife& a, const BufferLife& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferLife>& buffers) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = align_up(std::max<int64_t>(buffers[i].bytes, 1));
    // Byte ranges taken by live-at-the-same-time buffers, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed) {
      if (overlaps(buffers[i], buffers[j])) {
        taken.emplace_back(plan.offsets[j], plan.offsets[j] + align_up(std::max<int64_t>(buffers[j].bytes, 1)));
      }
    }
    std::sort(taken.begin(), taken.end());
    int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max(), cursor = 0;
    for (const auto& [begin, end] : taken) {
      int64_t gap = begin - cursor;
      if (gap >= size && gap < best_gap) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best >= 0 ? best : cursor;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace tripy::compiler

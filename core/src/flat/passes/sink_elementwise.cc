// Scheduling for fusion: an elementwise op whose one reader is elementwise, with a GEMM (or another
// op fusion keeps apart) between them, moves down to just before that reader. Fusion sweeps the
// graph in order, so SwiGLU's silu(x @ W1) * (x @ W3) would otherwise be two kernels.
#include <algorithm>
#include <utility>

#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {

std::optional<Graph> sink_elementwise(const Graph& graph) {
  const size_t n = graph.ops.size();
  const std::vector<int32_t> uses = graph.use_counts();
  std::vector<bool> is_output(graph.values.size(), false);
  for (ValueId v : graph.outputs) is_output[v] = true;
  std::vector<int32_t> reader(graph.values.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (ValueId v : graph.ops[i].operands) reader[v] = static_cast<int32_t>(i);
  // kernels_before[i]: ops before op i that fusion cannot put in an elementwise kernel (a GEMM, a
  // convolution, an attention...). Only such an op between an op and its reader keeps them apart.
  std::vector<int32_t> kernels_before(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const OpKind k = graph.ops[i].kind;
    const bool inline_op = k == OpKind::kElementwise || k == OpKind::kBroadcast || k == OpKind::kIota ||
                           k == OpKind::kConstant || k == OpKind::kParameter;
    kernels_before[i + 1] = kernels_before[i] + (inline_op ? 0 : 1);
  }
  // moved[i]: op i goes to just before its one reader (of which it is then an operand).
  std::vector<bool> moved(n, false);
  bool changed = false;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = graph.ops[i];
    const int32_t u = reader[op.result];
    if (op.kind != OpKind::kElementwise || uses[op.result] != 1 || is_output[op.result] || u < 0 ||
        graph.ops[static_cast<size_t>(u)].kind != OpKind::kElementwise || kernels_before[u] == kernels_before[i + 1])
      continue;
    moved[i] = true;
    changed = true;
  }
  if (!changed) return std::nullopt;
  // The ops moved to just before op i, in their original order: the moved ones among its operands.
  auto moved_before = [&](int32_t i) {
    std::vector<int32_t> ops;
    for (ValueId v : graph.ops[static_cast<size_t>(i)].operands)
      if (const int32_t d = graph.values[v].def; d >= 0 && moved[static_cast<size_t>(d)]) ops.push_back(d);
    std::sort(ops.begin(), ops.end());
    return ops;
  };
  // Each op after the ops moved before it (which may have had ops moved before them too); with a
  // stack, not recursion, so that long chains cannot overflow the call stack. A moved op is
  // emitted with its reader.
  std::vector<std::pair<int32_t, size_t>> stack;  // (op, how many of the ops moved before it are emitted)
  return rewrite_ops(graph, [&](size_t root, GraphRewrite& rw) {
    if (moved[root]) return true;
    stack.push_back({static_cast<int32_t>(root), 0});
    while (!stack.empty()) {
      const int32_t i = stack.back().first;
      const std::vector<int32_t> pre = moved_before(i);
      if (stack.back().second < pre.size()) {
        stack.push_back({pre[stack.back().second++], 0});
        continue;
      }
      stack.pop_back();
      rw.copy(graph.ops[static_cast<size_t>(i)]);
    }
    return true;
  });
}

}  // namespace tripy::flat

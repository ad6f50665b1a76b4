// Dead code elimination: keeps what the outputs depend on, and every parameter (the signature).
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {

Graph dce(const Graph& graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (ValueId v : graph.outputs) live[v] = true;
  std::vector<bool> keep(graph.ops.size(), false);
  for (size_t i = graph.ops.size(); i-- > 0;) {
    const Op& op = graph.ops[i];
    if (!live[op.result] && op.kind != OpKind::kParameter) continue;
    keep[i] = true;
    for (ValueId v : op.operands) live[v] = true;
  }
  return rebuild(graph, keep, std::vector<ValueId>(graph.values.size(), -1));
}

}  // namespace tripy::flat

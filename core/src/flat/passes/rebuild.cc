// Graph rebuilding shared by the passes: a rewrite's start and end, and dropping ops, redirecting
// uses and renumbering values densely.
#include "flat/passes/passes.h"

namespace tripy::flat {

Graph empty_like(const Graph& graph) {
  Graph out;
  out.symbols = graph.symbols;
  out.assertions = graph.assertions;
  out.input_names = graph.input_names;
  return out;
}

void finish_like(Graph& out, const Graph& graph, const std::vector<ValueId>& map) {
  for (ValueId v : graph.inputs) out.inputs.push_back(map[v]);
  for (ValueId v : graph.outputs) out.outputs.push_back(map[v]);
}

Graph rebuild(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replace) {
  Graph out = empty_like(graph);
  std::vector<ValueId> map(graph.values.size(), -1);
  auto resolve = [&](ValueId v) {
    // Replacement chains are short and acyclic (each points at an earlier or equal value).
    for (size_t guard = 0; guard < graph.values.size() && replace[v] >= 0 && replace[v] != v; ++guard) v = replace[v];
    return map[v];
  };
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (!keep[i]) continue;
    Op op = graph.ops[i];
    for (ValueId& v : op.operands) v = resolve(v);
    const Value& val = graph.values[op.result];
    map[op.result] = out.add(std::move(op), val.dtype, val.shape);
  }
  for (ValueId v : graph.inputs) out.inputs.push_back(map[v]);
  for (ValueId v : graph.outputs) out.outputs.push_back(resolve(v));
  return out;
}

}  // namespace tripy::flat

// Graph rebuilding shared by the passes: the rewrite loop's state (the new graph and the value
// map), and dropping ops, redirecting uses and renumbering values densely.
#include "flat/passes/rebuild.h"

namespace tripy::flat {

OriginRef with_reason(const OriginRef& origin, const std::string& reason) {
  auto o = std::make_shared<Origin>(origin ? *origin : Origin{});
  o->reason = reason;
  return o;
}

Graph empty_like(const Graph& graph) {
  Graph out;
  out.symbols = graph.symbols;
  out.assertions = graph.assertions;
  out.input_names = graph.input_names;
  return out;
}

GraphRewrite::GraphRewrite(const Graph& source)
    : source_(source), out_(empty_like(source)), map_(source.values.size(), -1) {}

ValueId GraphRewrite::copy(const Op& src) {
  Op op = src;
  for (ValueId& v : op.operands) v = map_[v];
  const Value& val = source_.values[src.result];
  return map_[src.result] = out_.add(std::move(op), val.dtype, val.shape);
}

Graph GraphRewrite::finish() && {
  for (ValueId v : source_.inputs) out_.inputs.push_back(map_[v]);
  for (ValueId v : source_.outputs) out_.outputs.push_back(map_[v]);
  return std::move(out_);
}

Graph rebuild(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replace) {
  auto last = [&](ValueId v) {
    // Replacement chains are short and acyclic (each points at an earlier or equal value).
    for (size_t guard = 0; guard < graph.values.size() && replace[v] >= 0 && replace[v] != v; ++guard) v = replace[v];
    return v;
  };
  return rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const ValueId r = graph.ops[i].result;
    if (keep[i]) rw.copy(graph.ops[i]);
    // A replaced value's readers (and the outputs) read its replacement, an earlier value whose
    // op has been emitted or dropped already. (Parameters are never replaced: the inputs keep theirs.)
    if (const ValueId to = last(r); to != r) rw.set(r, rw[to]);
    return true;
  });
}

}  // namespace tripy::flat

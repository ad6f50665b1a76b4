// Graph rebuilding shared by the passes: a rewrite copies each op it does not match, with its
// operands renumbered, and emits a replacement for each op it matches. rewrite_ops is that loop,
// written once; a pass supplies only what it emits for the ops it matched.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flat/ir.h"

namespace tripy::flat {

// `origin` (or an empty one) with `reason`: why a pass inserted the op that carries it.
OriginRef with_reason(const OriginRef& origin, const std::string& reason);

// A graph with `graph`'s symbols, assertions and input names and no ops.
Graph empty_like(const Graph& graph);

// A rewrite in progress: the new graph, and for each value of the source graph its value there.
class GraphRewrite {
 public:
  explicit GraphRewrite(const Graph& source);

  const Graph& source() const { return source_; }
  // The new graph so far (read only: ops are appended through add and copy).
  const Graph& out() const { return out_; }
  // The value that stands for source value `v` in the new graph; -1 until one is set.
  ValueId operator[](ValueId v) const { return map_[v]; }
  // Source value `v` is `now` in the new graph.
  void set(ValueId v, ValueId now) { map_[v] = now; }
  // Appends `op`, whose operands are already values of the new graph.
  ValueId add(Op op, DType dtype, Shape shape) { return out_.add(std::move(op), dtype, std::move(shape)); }
  // Appends a copy of source op `src` with its operands mapped; its result stands for src's.
  ValueId copy(const Op& src);
  // The new graph, with the source's inputs and outputs mapped.
  Graph finish() &&;

 private:
  const Graph& source_;
  Graph out_;
  std::vector<ValueId> map_;
};

// Rebuilds `graph` op by op, in order. emit(i, rw) returns true when it has emitted op i's
// replacement (and set its result's value) or dropped the op, false to have op i copied.
template <class Emit>
Graph rewrite_ops(const Graph& graph, Emit&& emit) {
  GraphRewrite rw(graph);
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (!emit(i, rw)) rw.copy(graph.ops[i]);
  return std::move(rw).finish();
}

// rewrite_ops for a pass that may find nothing to rewrite: nullopt when emit returned false for
// every op.
template <class Emit>
std::optional<Graph> rewrite_some_ops(const Graph& graph, Emit&& emit) {
  bool changed = false;
  Graph out = rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const bool rewritten = emit(i, rw);
    changed = changed || rewritten;
    return rewritten;
  });
  if (!changed) return std::nullopt;
  return out;
}

// Rebuilds `graph` keeping the ops for which keep[op] is true and mapping operands through
// `replace` (value -> value, -1 for none), renumbering values densely in op order.
Graph rebuild(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replace);

}  // namespace tripy::flat

// A keepdim reduction is a reduce and a reshape that inserts unit dims; elementwise ops on that
// reshape (RMSNorm's `+ eps` and rsqrt) then run over the unit-dim shape, and fusion, which keeps
// a reduction's row values in the reducing kernel only when they reach the rows through a
// broadcast, starts a new kernel for them. Here each such op moves above the reshape:
//
//   ew(reshape(x), splat)  ->  reshape(ew(x, splat'))     when the reshape only inserts unit dims
//
// so the chain stays on the reduced values, and simplify folds the last reshape into the
// broadcast that reads it (one kernel for the whole norm).
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

bool is_unit(const Dim& d) { return d.is_static() && d.static_value() == 1; }

// Whether `to` is `from` with unit dims inserted (the same elements, in the same order).
bool inserts_unit_dims(const Shape& from, const Shape& to) {
  size_t i = 0;
  for (const Dim& d : to) {
    if (i < from.size() && from[i].same_as(d)) {
      ++i;
    } else if (!is_unit(d)) {
      return false;
    }
  }
  return i == from.size();
}

// Emits `src` above the reshape of its operands when it can; false leaves it to be copied.
bool sink(GraphRewrite& rw, const Op& src, const Value& val) {
  const Graph& out = rw.out();
  const Shape* inner = nullptr;
  for (ValueId v : src.operands) {
    const Op& d = out.def(rw[v]);
    if (d.kind != OpKind::kReshape) continue;
    const Shape& from = out.values[d.operands[0]].shape;
    if (!inserts_unit_dims(from, out.values[d.result].shape) || (inner && !same_shape(*inner, from))) return false;
    inner = &from;
  }
  if (!inner || same_shape(*inner, val.shape)) return false;
  const Shape shape = *inner;  // out grows below: no references into it
  Op op = src;
  for (ValueId& v : op.operands) {
    const ValueId now = rw[v];
    const Op& d = out.def(now);
    if (d.kind == OpKind::kReshape) {
      v = d.operands[0];
      continue;
    }
    // Otherwise a splat: a broadcast of a one-element rank-0 constant, broadcast again here.
    if (d.kind != OpKind::kBroadcast || !d.dims.empty() || !out.values[d.operands[0]].shape.empty()) return false;
    Op b = d;
    v = rw.add(std::move(b), out.values[now].dtype, shape);
  }
  const ValueId y = rw.add(std::move(op), val.dtype, shape);
  Op reshape;
  reshape.kind = OpKind::kReshape;
  reshape.operands = {y};
  reshape.origin = src.origin;
  rw.set(src.result, rw.add(std::move(reshape), val.dtype, val.shape));
  return true;
}

}  // namespace

std::optional<Graph> sink_unit_reshapes(const Graph& graph) {
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    return src.kind == OpKind::kElementwise && sink(rw, src, graph.values[src.result]);
  });
  if (!out) return out;
  return dce(*out);
}

}  // namespace tripy::flat

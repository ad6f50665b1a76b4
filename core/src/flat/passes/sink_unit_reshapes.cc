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

class Sinker {
 public:
  explicit Sinker(const Graph& g) : g_(g), out_(empty_like(g)), map_(g.values.size(), -1) {}

  std::optional<Graph> run() {
    for (const Op& src : g_.ops) {
      const Value& val = g_.values[src.result];
      if (src.kind == OpKind::kElementwise && sink(src, val)) continue;
      Op op = src;
      for (ValueId& v : op.operands) v = map_[v];
      map_[src.result] = out_.add(std::move(op), val.dtype, val.shape);
    }
    if (!changed_) return std::nullopt;
    finish_like(out_, g_, map_);
    return dce(out_);
  }

 private:
  // Rewrites `src` above the reshape of its operands when it can; false leaves it to the caller.
  bool sink(const Op& src, const Value& val) {
    const Shape* inner = nullptr;
    for (ValueId v : src.operands) {
      const Op& d = out_.def(map_[v]);
      if (d.kind != OpKind::kReshape) continue;
      const Shape& from = out_.values[d.operands[0]].shape;
      if (!inserts_unit_dims(from, out_.values[d.result].shape) || (inner && !same_shape(*inner, from))) return false;
      inner = &from;
    }
    if (!inner || same_shape(*inner, val.shape)) return false;
    const Shape shape = *inner;  // out_ grows below: no references into it
    Op op = src;
    for (ValueId& v : op.operands) {
      const ValueId now = map_[v];
      const Op& d = out_.def(now);
      if (d.kind == OpKind::kReshape) {
        v = d.operands[0];
        continue;
      }
      // Otherwise a splat: a broadcast of a one-element rank-0 constant, broadcast again here.
      if (d.kind != OpKind::kBroadcast || !d.dims.empty() || !out_.values[d.operands[0]].shape.empty()) return false;
      Op b = d;
      v = out_.add(std::move(b), out_.values[now].dtype, shape);
    }
    const ValueId y = out_.add(std::move(op), val.dtype, shape);
    Op reshape;
    reshape.kind = OpKind::kReshape;
    reshape.operands = {y};
    reshape.origin = src.origin;
    map_[src.result] = out_.add(std::move(reshape), val.dtype, val.shape);
    changed_ = true;
    return true;
  }

  const Graph& g_;
  Graph out_;
  std::vector<ValueId> map_;
  bool changed_ = false;
};

}  // namespace

std::optional<Graph> sink_unit_reshapes(const Graph& graph) { return Sinker(graph).run(); }

}  // namespace tripy::flat

// Algebraic simplification: removes ops that change nothing (x*1, x+0, same-dtype converts,
// same-shape reshapes, identity transposes and broadcasts, full slices, empty reductions) and
// composes chains (transpose∘transpose, reshape∘reshape, broadcast∘broadcast, unit-step
// slice∘slice). First, every symbolic size is simplified under the symbols' bounds (min(s, 1024) is s
// when s <= 1024), so that values of one size have one shape and the ops above, CSE and fusion see
// them as equal.
#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

// The value every element of `v` has, when `v` is a constant splat (or a broadcast of one).
bool splat_of(const Graph& g, ValueId v, double want) {
  const Op* op = &g.def(v);
  while (op->kind == OpKind::kBroadcast) op = &g.def(op->operands[0]);
  return op->kind == OpKind::kConstant && op->constant.defined() && op->constant.numel() <= 64 &&
         all_elements_equal(op->constant, want);
}

bool is_identity(const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

class Simplifier {
 public:
  explicit Simplifier(const Graph& g) : g_(g), replace_(g.values.size(), -1) { simplify_dims(); }

  Graph run() {
    for (Op& op : g_.ops) {
      for (ValueId& v : op.operands) v = resolve(v);
      ValueId same = simplify(op);
      if (same >= 0) replace_[op.result] = same;
    }
    return dce(rebuild(g_, std::vector<bool>(g_.ops.size(), true), replace_));
  }

 private:
  ValueId resolve(ValueId v) const {
    while (replace_[v] >= 0) v = replace_[v];
    return v;
  }

  // A value equal to op's result (same dtype and shape), or -1; may rewrite `op` in place.
  ValueId simplify(Op& op) {
    const Value& r = g_.values[op.result];
    auto same_type = [&](ValueId v) {
      return g_.values[v].dtype == r.dtype && same_shape(g_.values[v].shape, r.shape);
    };
    switch (op.kind) {
      case OpKind::kElementwise: {
        if (op.fn == EwOp::kConvert) return same_type(op.operands[0]) ? op.operands[0] : -1;
        if (op.operands.size() != 2) return -1;
        ValueId a = op.operands[0], b = op.operands[1];
        switch (op.fn) {
          case EwOp::kMul:
            if (splat_of(g_, b, 1) && same_type(a)) return a;
            if (splat_of(g_, a, 1) && same_type(b)) return b;
            return -1;
          case EwOp::kAdd:
            if (splat_of(g_, b, 0) && same_type(a)) return a;
            if (splat_of(g_, a, 0) && same_type(b)) return b;
            return -1;
          case EwOp::kSub: return splat_of(g_, b, 0) && same_type(a) ? a : -1;
          case EwOp::kDiv: return splat_of(g_, b, 1) && same_type(a) ? a : -1;
          default: return -1;
        }
      }
      case OpKind::kReshape: {
        const Op& in = g_.def(op.operands[0]);
        if (in.kind == OpKind::kReshape) op.operands[0] = in.operands[0];
        return same_type(op.operands[0]) ? op.operands[0] : -1;
      }
      case OpKind::kTranspose: {
        const Op& in = g_.def(op.operands[0]);
        if (in.kind == OpKind::kTranspose) {
          // result dim i = inner dim op.dims[i] = source dim in.dims[op.dims[i]]
          std::vector<int64_t> composed;
          for (int64_t d : op.dims) composed.push_back(in.dims[d]);
          op.dims = composed;
          op.operands[0] = in.operands[0];
        }
        return is_identity(op.dims) && same_type(op.operands[0]) ? op.operands[0] : -1;
      }
      case OpKind::kBroadcast: {
        const Op& in = g_.def(op.operands[0]);
        if (in.kind == OpKind::kReshape) unit_dims_into_broadcast(op, in);
        if (in.kind == OpKind::kBroadcast) {
          std::vector<int64_t> composed;
          for (int64_t d : in.dims) composed.push_back(op.dims[d]);
          op.dims = composed;
          op.operands[0] = in.operands[0];
        }
        return is_identity(op.dims) && same_type(op.operands[0]) ? op.operands[0] : -1;
      }
      case OpKind::kReduce: return op.dims.empty() && same_type(op.operands[0]) ? op.operands[0] : -1;
      case OpKind::kSlice: {
        compose_unit_step_slices(op);
        const Shape& in = g_.values[op.operands[0]].shape;
        for (size_t i = 0; i < in.size(); ++i) {
          bool full = op.starts[i].is_static() && op.starts[i].static_value() == 0 && op.steps[i].is_static() &&
                      op.steps[i].static_value() == 1 && op.limits[i].same_as(in[i]);
          if (!full) return -1;
        }
        return same_type(op.operands[0]) ? op.operands[0] : -1;
      }
      default: return -1;
    }
  }

  void simplify_dims() {
    const SymbolTable& t = g_.symbols;
    if (t.symbols.empty()) return;
    for (Value& v : g_.values) v.shape = simplified(v.shape, t);
    for (Op& op : g_.ops) {
      op.starts = simplified(op.starts, t);
      op.limits = simplified(op.limits, t);
      op.steps = simplified(op.steps, t);
    }
    // Run-time checks that the bounds now prove are dropped.
    std::vector<ShapeAssertion> kept;
    for (ShapeAssertion& a : g_.assertions) {
      a.a = a.a.simplified(t);
      a.b = a.b.simplified(t);
      if (!a.a.same_as(a.b)) kept.push_back(std::move(a));
    }
    g_.assertions = std::move(kept);
  }

  // slice(slice(x)) with unit steps is one slice of x (a q/k/v head split of one projection's
  // slice then reads the projection in place instead of a copy of the outer slice).
  void compose_unit_step_slices(Op& op) {
    const Op& in = g_.def(op.operands[0]);
    if (in.kind != OpKind::kSlice) return;
    auto unit = [](const std::vector<Dim>& steps) {
      for (const Dim& d : steps)
        if (!d.is_static() || d.static_value() != 1) return false;
      return true;
    };
    if (!unit(op.steps) || !unit(in.steps)) return;
    for (size_t d = 0; d < op.starts.size(); ++d) {
      op.limits[d] = in.starts[d] + op.limits[d];
      op.starts[d] = in.starts[d] + op.starts[d];
    }
    op.operands[0] = in.operands[0];
  }

  // broadcast(reshape(x)) where the reshape only inserts unit dims (keepdim reductions) reads x
  // directly: the unit dims were only there to be broadcast.
  void unit_dims_into_broadcast(Op& op, const Op& reshape) {
    const Shape& from = g_.values[reshape.operands[0]].shape;
    const Shape& to = g_.values[reshape.result].shape;
    std::vector<int64_t> dims;
    size_t i = 0;
    for (size_t j = 0; j < to.size(); ++j) {
      if (i < from.size() && from[i].same_as(to[j])) {
        dims.push_back(op.dims[j]);
        ++i;
      } else if (!(to[j].is_static() && to[j].static_value() == 1)) {
        return;
      }
    }
    if (i != from.size()) return;
    op.dims = dims;
    op.operands[0] = reshape.operands[0];
  }

  Graph g_;
  std::vector<ValueId> replace_;
};

}  // namespace

Graph simplify(const Graph& graph) { return Simplifier(graph).run(); }

}  // namespace tripy::flat

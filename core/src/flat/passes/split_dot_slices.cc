// Splits a dot whose result plus a bias is read only through slices of its last axis into one dot
// per slice, over the matching columns of a constant right operand and bias.
// GEGLU's split(x @ W + b) then costs two GEMMs whose epilogues take the bias (and the GELU of the
// gate half) instead of one GEMM and two strided copies of its output.
#include <algorithm>

#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

constexpr size_t kMaxSlices = 4;

bool is_static(const Dim& d, int64_t v) { return d.is_static() && d.static_value() == v; }

struct Column {
  int32_t slice_op;
  int64_t start, limit;
};

struct Split {
  ValueId lhs, rhs, bias = -1;  // bias: the 1-D constant broadcast along the last axis
  int32_t dot_op, add_op = -1;
  std::vector<Column> columns;
};

class Splitter {
 public:
  explicit Splitter(const Graph& g) : g_(g), uses_(g.use_counts()), users_(g.values.size()) {
    for (size_t i = 0; i < g.ops.size(); ++i)
      for (ValueId v : g.ops[i].operands) users_[v].push_back(static_cast<int32_t>(i));
  }

  bool find() {
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      Split s;
      if (g_.ops[i].kind == OpKind::kDot && match(static_cast<int32_t>(i), &s)) splits_.push_back(s);
    }
    return !splits_.empty();
  }

  Graph rewrite() const {
    std::vector<int32_t> split_of_slice(g_.ops.size(), -1);
    std::vector<bool> drop(g_.ops.size(), false);
    for (size_t s = 0; s < splits_.size(); ++s) {
      drop[splits_[s].dot_op] = true;
      if (splits_[s].add_op >= 0) drop[splits_[s].add_op] = true;
      for (const Column& c : splits_[s].columns) split_of_slice[c.slice_op] = static_cast<int32_t>(s);
    }
    return rewrite_ops(g_, [&](size_t i, GraphRewrite& rw) {
      if (drop[i]) return true;
      if (split_of_slice[i] < 0) return false;
      const Op& src = g_.ops[i];
      rw.set(src.result, emit_column(rw, splits_[split_of_slice[i]], src, g_.values[src.result]));
      return true;
    });
  }

 private:
  bool is_constant(ValueId v) const { return g_.def(v).kind == OpKind::kConstant; }
  // transpose(W) of a constant, swapping the last two dims: a Linear's x @ W.T, which the dot
  // reads in place.
  bool is_transposed_constant(ValueId v) const {
    const Op& t = g_.def(v);
    return swaps_last_two_dims(t) && is_constant(t.operands[0]);
  }

  bool match(int32_t dot_op, Split* s) const {
    const Op& dot = g_.ops[dot_op];
    s->dot_op = dot_op;
    s->lhs = dot.operands[0];
    s->rhs = dot.operands[1];
    if (!is_constant(s->rhs) && !is_transposed_constant(s->rhs)) return false;
    ValueId r = dot.result;
    const int64_t rank = static_cast<int64_t>(g_.values[r].shape.size());
    if (users_[r].size() == 1 && uses_[r] == 1) {  // dot + broadcast(bias[N]) in either order
      const Op& add = g_.ops[users_[r][0]];
      if (add.kind == OpKind::kElementwise && add.fn == EwOp::kAdd && add.operands[0] != add.operands[1]) {
        const Op& b = g_.def(add.operands[0] == r ? add.operands[1] : add.operands[0]);
        // One value per column: a one-element bias stretched over the columns has none to slice.
        if (b.kind == OpKind::kBroadcast && b.dims.size() == 1 && b.dims[0] == rank - 1 && is_constant(b.operands[0]) &&
            g_.values[b.operands[0]].shape.size() == 1 &&
            g_.values[b.operands[0]].shape[0].same_as(g_.values[r].shape.back())) {
          s->bias = b.operands[0];
          s->add_op = users_[r][0];
          r = add.result;
        }
      }
    }
    // Without a bias the epilogues gain nothing that the slices' readers (which read the one
    // product in place) lack, and splitting would copy the weight (an LLM's gate/up stack: GBs).
    if (s->bias < 0) return false;
    const Shape& shape = g_.values[r].shape;
    // One row per sequence (a decode step's matrix-vector product) reads its input and launches
    // once; one product per slice would pay both again and save no copy worth having.
    if (rank >= 2 && is_static(shape[static_cast<size_t>(rank - 2)], 1)) return false;
    if (users_[r].empty() || uses_[r] != static_cast<int32_t>(users_[r].size())) return false;  // an output
    // A few wide GEMMs beat one GEMM and copies; dozens of thin ones (per-head splits) would not.
    if (users_[r].size() > kMaxSlices) return false;
    for (int32_t u : users_[r]) {
      const Op& sl = g_.ops[u];
      if (sl.kind != OpKind::kSlice) return false;
      for (int64_t d = 0; d < rank; ++d) {
        if (!is_static(sl.steps[d], 1)) return false;
        if (d + 1 < rank && !(is_static(sl.starts[d], 0) && sl.limits[d].same_as(shape[d]))) return false;
      }
      const Dim &lo = sl.starts[rank - 1], &hi = sl.limits[rank - 1];
      if (!lo.is_static() || !hi.is_static() || lo.static_value() < 0 || hi.static_value() <= lo.static_value())
        return false;
      // The new dot's shape must be the slice's, so later ops keep their operand shapes.
      const Shape& got = g_.values[sl.result].shape;
      for (int64_t d = 0; d + 1 < rank; ++d)
        if (!got[d].same_as(shape[d])) return false;
      s->columns.push_back({u, lo.static_value(), hi.static_value()});
    }
    return true;
  }

  // Entries [start, limit) of `axis` of `v` (constant folding evaluates it).
  static ValueId slice_axis(GraphRewrite& rw, ValueId v, size_t axis, const Column& c, const OriginRef& origin) {
    const Value& val = rw.out().values[v];
    Op op;
    op.kind = OpKind::kSlice;
    op.operands = {v};
    op.origin = origin;
    Shape shape = val.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      bool at = d == axis;
      op.starts.push_back(at ? Dim(c.start) : Dim(int64_t{0}));
      op.limits.push_back(at ? Dim(c.limit) : shape[d]);
      op.steps.push_back(Dim(int64_t{1}));
    }
    shape[axis] = Dim(c.limit - c.start);
    return rw.add(std::move(op), val.dtype, shape);
  }
  static ValueId slice_last(GraphRewrite& rw, ValueId v, const Column& c, const OriginRef& origin) {
    return slice_axis(rw, v, rw.out().values[v].shape.size() - 1, c, origin);
  }

  // Columns of the right operand: of the constant, or, for transpose(W), W's rows transposed (the
  // slice of W folds; the transpose stays a flag of the new dot).
  ValueId rhs_columns(GraphRewrite& rw, const Split& s, const Column& c, const OriginRef& origin) const {
    const Op& t = g_.def(s.rhs);
    if (t.kind != OpKind::kTranspose) return slice_last(rw, rw[s.rhs], c, origin);
    const ValueId w = rw[t.operands[0]];
    const ValueId rows = slice_axis(rw, w, rw.out().values[w].shape.size() - 2, c, origin);
    Shape shape = rw.out().values[rows].shape;
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    Op op = t;
    op.operands = {rows};
    return rw.add(std::move(op), rw.out().values[rows].dtype, shape);
  }

  ValueId emit_column(GraphRewrite& rw, const Split& s, const Op& slice, const Value& val) const {
    const Column& c = *std::find_if(s.columns.begin(), s.columns.end(),
                                    [&](const Column& k) { return k.slice_op == g_.values[slice.result].def; });
    const Op& dot_src = g_.ops[s.dot_op];
    Op dot = dot_src;
    dot.operands = {rw[s.lhs], rhs_columns(rw, s, c, dot_src.origin)};
    ValueId y = rw.add(std::move(dot), val.dtype, val.shape);
    if (s.bias < 0) return y;
    const Op& add_src = g_.ops[s.add_op];
    Op bc;
    bc.kind = OpKind::kBroadcast;
    bc.operands = {slice_last(rw, rw[s.bias], c, add_src.origin)};
    bc.dims = {static_cast<int64_t>(val.shape.size()) - 1};
    bc.origin = add_src.origin;
    ValueId b = rw.add(std::move(bc), val.dtype, val.shape);
    Op add = add_src;
    add.operands = {y, b};
    return rw.add(std::move(add), val.dtype, val.shape);
  }

  const Graph& g_;
  std::vector<int32_t> uses_;
  std::vector<std::vector<int32_t>> users_;
  std::vector<Split> splits_;
};

}  // namespace

std::optional<Graph> split_dot_slices(const Graph& graph) {
  Splitter s(graph);
  if (!s.find()) return std::nullopt;
  return s.rewrite();
}

}  // namespace tripy::flat

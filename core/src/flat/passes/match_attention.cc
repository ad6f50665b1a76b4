// Attention written by hand, as nanoGPT does (q @ k^T * scale, masked with -inf or an additive
// mask, softmax over the last dim, @ v), becomes the attention primitive. Matched on FlatIR after
// lowering, op by op, and only when every value in between has no reader outside the pattern, so
// the rewrite computes exactly what the ops did (in float32 throughout, as softmax already did):
//
//   s  = dot(q, transpose(k, [.., 3, 2]))         q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv)
//   y  = s * c | c * s | s / c | s                c a constant splat: scale c, 1 / c or 1
//   x  = select(m, y, -inf) | select(m, -inf, y) | y + a | y     m bool, a additive (broadcasts);
//        y may be read through a same-rank broadcast
//   xf = convert(x, f32) when x is narrow
//   p  = div(e, broadcast(reduce_sum(e))) with e = exp(xf - broadcast(reduce_max(xf)))
//   out = dot(convert(p, x's dtype) | p, v)
#include <cmath>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"

namespace tripy::flat {
namespace {

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), uses_(g.use_counts()), is_output_(g.values.size(), false) {
    for (ValueId v : g.outputs) is_output_[v] = true;
  }

  // New ops to insert before `before` (operands: old value ids, or ids >= values.size() for
  // earlier inserted ops), and the value that replaces the final dot's result.
  struct Rewrite {
    int32_t before = -1;
    std::vector<Op> ops;
    std::vector<std::pair<DType, Shape>> types;
    ValueId result = -1;
  };

  bool match(int32_t index, Rewrite& rw) {
    const Op& out = g_.ops[static_cast<size_t>(index)];
    if (out.kind != OpKind::kDot || rank(out.result) != 4) return false;
    ValueId p = out.operands[0];
    const ValueId v = out.operands[1];
    const DType io = g_.values[p].dtype;
    if (is(p, OpKind::kElementwise, EwOp::kConvert)) p = inner(p);
    const Op* div = def_if(p, OpKind::kElementwise, EwOp::kDiv);
    if (!div) return false;
    const ValueId e = div->operands[0];
    const ValueId sum = unbroadcast_row(div->operands[1]);
    if (sum < 0 || !is_reduce_last(sum, EwOp::kReduceSum) || inner(sum) != e || !only_uses(e, 2)) return false;
    const Op* ex = def_if(e, OpKind::kElementwise, EwOp::kExp);
    const Op* sub = ex ? def_if(ex->operands[0], OpKind::kElementwise, EwOp::kSub) : nullptr;
    if (!sub) return false;
    ValueId x = sub->operands[0];
    const ValueId mx = unbroadcast_row(sub->operands[1]);
    if (mx < 0 || !is_reduce_last(mx, EwOp::kReduceMax) || inner(mx) != x || !only_uses(x, 2)) return false;
    if (g_.values[x].dtype == DType::kFloat32 && io != DType::kFloat32) {
      if (!is(x, OpKind::kElementwise, EwOp::kConvert) || g_.values[inner(x)].dtype != io || !only_uses(x, 2)) return false;
      x = inner(x);
      if (!only_uses(x, 1)) return false;
    } else if (g_.values[x].dtype != io) {
      return false;
    }
    for (ValueId w : {p, div->result, sub->result, e, sum, mx, ex->result})
      if (is_output_[w]) return false;
    if (!only_uses(out.operands[0], 1) || !only_uses(p, 1) || !only_uses(sub->result, 1)) return false;

    // The mask.
    rt::AttentionAttrs attrs;
    ValueId y = x, mask = -1;
    bool negate = false;
    const Op& xd = g_.def(x);
    if (xd.kind == OpKind::kElementwise && xd.fn == EwOp::kSelect) {
      if (splat(xd.operands[2], -INFINITY)) {
        y = xd.operands[1];
      } else if (splat(xd.operands[1], -INFINITY)) {
        y = xd.operands[2];
        negate = true;
      } else {
        return false;
      }
      mask = xd.operands[0];
      attrs.mask = rt::MaskKind::kBool;
    } else if (xd.kind == OpKind::kElementwise && xd.fn == EwOp::kAdd) {
      // The additive mask is the operand that is not the scaled scores' chain.
      const bool first = is_scores(xd.operands[0]), second = is_scores(xd.operands[1]);
      if (first == second) return false;
      y = xd.operands[first ? 0 : 1];
      mask = xd.operands[first ? 1 : 0];
      attrs.mask = rt::MaskKind::kAdditive;
    }
    if (y != x && !only_uses(y, 1)) return false;
    // A same-rank broadcast of the scores (sizes the compiler could not prove equal, checked at
    // run time) reads them unchanged.
    if (y != x && g_.def(y).kind == OpKind::kBroadcast && g_.def(y).dims == std::vector<int64_t>{0, 1, 2, 3} &&
        rank(g_.def(y).operands[0]) == 4) {
      y = g_.def(y).operands[0];
      if (!only_uses(y, 1)) return false;
    }

    // The scale.
    ValueId s = y;
    attrs.scale = 1.0;
    const Op& yd = g_.def(y);
    double c = 0;
    if (yd.kind == OpKind::kElementwise && (yd.fn == EwOp::kMul || yd.fn == EwOp::kDiv)) {
      const bool left = yd.fn == EwOp::kMul && splat_value(yd.operands[0], &c);
      if (!left && !splat_value(yd.operands[1], &c)) return false;
      s = yd.operands[left ? 1 : 0];
      attrs.scale = yd.fn == EwOp::kMul ? c : 1.0 / c;
      if (!std::isfinite(attrs.scale) || !only_uses(s, 1)) return false;
    }
    const Op* dot = def_if(s, OpKind::kDot, EwOp::kAdd);
    if (!dot || rank(dot->operands[0]) != 4 || rank(dot->operands[1]) != 4) return false;
    // k^T: a transpose whose last two dims swap k's; simplification may have merged it with the
    // head split's transpose (dims [0, 2, 3, 1]), so k itself is that transpose without the swap.
    const Op& kt = g_.def(dot->operands[1]);
    if (kt.kind != OpKind::kTranspose || kt.dims.size() != 4) return false;
    const ValueId q = dot->operands[0];
    const std::vector<int64_t> k_perm = {kt.dims[0], kt.dims[1], kt.dims[3], kt.dims[2]};
    Shape sk = g_.values[kt.result].shape;
    std::swap(sk[2], sk[3]);
    // No batch broadcasting between the products: the attention's heads are the dots' batch.
    const Shape &sq = g_.values[q].shape, &sv = g_.values[v].shape;
    for (int d = 0; d < 2; ++d)
      if (!sq[d].same_as(sk[d]) || !sq[d].same_as(sv[d])) return false;
    if (!sk[2].same_as(sv[2])) return false;

    // nanoGPT's mask, a constant lower triangle sliced to [:T, :T], is the causal rule itself:
    // the kernel then skips hidden key tiles instead of reading a mask.
    if (attrs.mask == rt::MaskKind::kBool && is_causal_keep(mask, negate)) {
      attrs.mask = rt::MaskKind::kNone;
      attrs.causal = true;
      mask = -1;
    }

    rw = Rewrite{};
    rw.before = index;
    ValueId k = kt.operands[0];
    if (k_perm != std::vector<int64_t>{0, 1, 2, 3}) {  // fold_attention_layouts reads it in place
      Op t;
      t.kind = OpKind::kTranspose;
      t.operands = {k};
      t.dims = k_perm;
      k = add_op(rw, t, g_.values[k].dtype, sk);
    }
    std::vector<ValueId> operands = {q, k, v};
    if (mask >= 0) {
      ValueId m = mask;
      // A broadcast mask keeps its own dims: reshape it to rank 4 with 1s where it broadcast.
      const Op& md = g_.def(m);
      Shape m4 = g_.values[m].shape;
      if (md.kind == OpKind::kBroadcast) {
        m = md.operands[0];
        m4.assign(4, Dim(1));
        for (size_t i = 0; i < md.dims.size(); ++i) m4[static_cast<size_t>(md.dims[i])] = g_.values[m].shape[i];
      }
      if (negate) m = add_op(rw, elementwise(EwOp::kNot, {m}), DType::kBool, g_.values[m].shape);
      if (!same_shape(value_shape(rw, m), m4)) {
        Op r;
        r.kind = OpKind::kReshape;
        r.operands = {m};
        m = add_op(rw, r, value_dtype(rw, m), m4);
      }
      operands.push_back(m);
    }
    Op att;
    att.kind = OpKind::kAttention;
    att.operands = operands;
    att.attention = attrs;
    att.origin = out.origin;
    rw.result = add_op(rw, att, io, g_.values[out.result].shape);
    return true;
  }

 private:
  int rank(ValueId v) const { return static_cast<int>(g_.values[v].shape.size()); }
  bool is(ValueId v, OpKind kind, EwOp fn) const {
    const Op& d = g_.def(v);
    return d.kind == kind && (kind != OpKind::kElementwise || d.fn == fn);
  }
  const Op* def_if(ValueId v, OpKind kind, EwOp fn) const { return is(v, kind, fn) ? &g_.def(v) : nullptr; }
  ValueId inner(ValueId v) const { return g_.def(v).operands.empty() ? -1 : g_.def(v).operands[0]; }
  bool only_uses(ValueId v, int n) const { return uses_[v] == n && !is_output_[v]; }
  // broadcast(r, dims = [0, 1, 2]) of a rank-3 row value back over the last dim: r, else -1.
  ValueId unbroadcast_row(ValueId v) const {
    const Op& b = g_.def(v);
    if (b.kind != OpKind::kBroadcast || b.dims != std::vector<int64_t>{0, 1, 2} || !only_uses(v, 1)) return -1;
    return only_uses(b.operands[0], 1) ? b.operands[0] : -1;
  }
  bool is_reduce_last(ValueId v, EwOp fn) const {
    const Op& r = g_.def(v);
    return r.kind == OpKind::kReduce && r.fn == fn && r.dims == std::vector<int64_t>{3};
  }
  bool splat_value(ValueId v, double* out) const {
    const Op* op = &g_.def(v);
    while (op->kind == OpKind::kBroadcast) op = &g_.def(op->operands[0]);
    if (op->kind != OpKind::kConstant || !op->constant.defined() || op->constant.numel() != 1) return false;
    *out = read_element(op->constant, 0);
    return true;
  }
  bool splat(ValueId v, double want) const {
    double x;
    return splat_value(v, &x) && x == want;
  }
  // Whether keeping scores where `cond` (negated when `negate`) is exactly "key <= query": cond
  // compares with 0 a constant whose last two dims are a 0/1 lower triangle, read from its
  // top-left corner (a slice starting at 0 with step 1), its other dims all 1.
  bool is_causal_keep(ValueId cond, bool negate) const {
    const Op* c = &g_.def(cond);
    if (c->kind == OpKind::kBroadcast) {
      const size_t n = c->dims.size();
      if (n < 2 || c->dims[n - 2] != 2 || c->dims[n - 1] != 3) return false;
      c = &g_.def(c->operands[0]);
    }
    // A comparison constant folding already evaluated: the bool constant is the condition.
    if (c->kind == OpKind::kConstant && c->constant.defined() && c->constant.dtype() == DType::kBool)
      return is_lower_triangle(c->constant, negate);
    // keep = (x != 0): eq(x, 0) under a negation, or ne(x, 0).
    if (c->kind != OpKind::kElementwise || (c->fn != EwOp::kEq && c->fn != EwOp::kNe) || (c->fn == EwOp::kEq) != negate)
      return false;
    ValueId x = c->operands[0];
    if (!splat(c->operands[1], 0.0)) {
      if (!splat(x, 0.0)) return false;
      x = c->operands[1];
    }
    const Op* s = &g_.def(x);
    if (s->kind == OpKind::kSlice) {
      for (size_t d = 0; d < s->starts.size(); ++d) {
        const bool zero = s->starts[d].is_static() && s->starts[d].static_value() == 0;
        const bool one = s->steps[d].is_static() && s->steps[d].static_value() == 1;
        if (!zero || !one) return false;
      }
      s = &g_.def(s->operands[0]);
    }
    return s->kind == OpKind::kConstant && s->constant.defined() && is_lower_triangle(s->constant, false);
  }
  // Whether `t` (its dims but the last two all 1) is nonzero exactly on and below the diagonal, or,
  // when `inverted`, exactly above it.
  static bool is_lower_triangle(const Tensor& t, bool inverted) {
    const std::vector<int64_t>& shape = t.shape();
    if (shape.size() < 2) return false;
    for (size_t d = 0; d + 2 < shape.size(); ++d)
      if (shape[d] != 1) return false;
    const int64_t rows = shape[shape.size() - 2], cols = shape.back();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if ((read_element(t, i * cols + j) != 0) != ((j <= i) != inverted)) return false;
    return true;
  }
  // Whether `v` is the (scaled) product q @ k^T, for telling scores from an additive mask.
  bool is_scores(ValueId v) const {
    const Op& d = g_.def(v);
    if (d.kind == OpKind::kDot) return true;
    double c;
    return d.kind == OpKind::kElementwise && (d.fn == EwOp::kMul || d.fn == EwOp::kDiv) &&
           (g_.def(d.operands[0]).kind == OpKind::kDot ||
            (g_.def(d.operands[1]).kind == OpKind::kDot && splat_value(d.operands[0], &c)));
  }
  static Op elementwise(EwOp fn, std::vector<ValueId> operands) {
    Op op;
    op.kind = OpKind::kElementwise;
    op.fn = fn;
    op.operands = std::move(operands);
    return op;
  }
  ValueId add_op(Rewrite& rw, Op op, DType dtype, Shape shape) const {
    rw.ops.push_back(std::move(op));
    rw.types.emplace_back(dtype, std::move(shape));
    return static_cast<ValueId>(g_.values.size() + rw.ops.size() - 1);
  }
  const Shape& value_shape(const Rewrite& rw, ValueId v) const {
    return v < static_cast<ValueId>(g_.values.size()) ? g_.values[v].shape : rw.types[v - g_.values.size()].second;
  }
  DType value_dtype(const Rewrite& rw, ValueId v) const {
    return v < static_cast<ValueId>(g_.values.size()) ? g_.values[v].dtype : rw.types[v - g_.values.size()].first;
  }

  const Graph& g_;
  std::vector<int32_t> uses_;
  std::vector<bool> is_output_;
};

}  // namespace

std::optional<Graph> match_attention(const Graph& graph) {
  Matcher m(graph);
  std::vector<Matcher::Rewrite> rewrites;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    Matcher::Rewrite rw;
    if (m.match(static_cast<int32_t>(i), rw)) rewrites.push_back(std::move(rw));
  }
  if (rewrites.empty()) return std::nullopt;
  // Rebuild with each rewrite's ops in place of its final dot; the rest of the pattern is dead
  // (every value in it had readers only inside it) and DCE drops it.
  Graph out = empty_like(graph);
  std::vector<ValueId> map(graph.values.size(), -1);
  size_t next = 0;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (next < rewrites.size() && rewrites[next].before == static_cast<int32_t>(i)) {
      const Matcher::Rewrite& rw = rewrites[next++];
      std::vector<ValueId> added;
      auto resolve = [&](ValueId v) {
        return v < static_cast<ValueId>(graph.values.size()) ? map[v] : added[v - graph.values.size()];
      };
      for (size_t j = 0; j < rw.ops.size(); ++j) {
        Op op = rw.ops[j];
        for (ValueId& v : op.operands) v = resolve(v);
        if (!op.origin) op.origin = graph.ops[i].origin;
        added.push_back(out.add(std::move(op), rw.types[j].first, rw.types[j].second));
      }
      map[graph.ops[i].result] = resolve(rw.result);
      continue;
    }
    Op op = graph.ops[i];
    for (ValueId& v : op.operands) v = map[v];
    const Value& val = graph.values[op.result];
    map[op.result] = out.add(std::move(op), val.dtype, val.shape);
  }
  finish_like(out, graph, map);
  return dce(out);
}

}  // namespace tripy::flat

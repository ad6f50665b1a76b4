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
//
// Then every attention's bool mask that is a KV cache's visibility rule, key s visible to query l
// iff s <= l + pos (examples/gpt2.py: `iota(dim=1) <= iota(dim=0) + pos`), becomes the causal
// offset form: the kernel reads pos when it runs and visits only the keys a query sees, so a decode
// step's cost follows the rows written instead of the cache's length (rt::MaskKind::kCausalOffset).
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

// New ops to insert before op `before` (operands: old value ids, or ids >= values.size() for
// earlier inserted ops), and the value that replaces op `before`'s result.
struct Rewrite {
  int32_t before = -1;
  std::vector<Op> ops;
  std::vector<std::pair<DType, Shape>> types;
  ValueId result = -1;
};

ValueId add_op(const Graph& g, Rewrite& rw, Op op, DType dtype, Shape shape) {
  rw.ops.push_back(std::move(op));
  rw.types.emplace_back(dtype, std::move(shape));
  return static_cast<ValueId>(g.values.size() + rw.ops.size() - 1);
}

bool is_one(const Dim& d) { return d.is_static() && d.static_value() == 1; }

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), uses_(g.use_counts()), is_output_(g.values.size(), false) {
    for (ValueId v : g.outputs) is_output_[v] = true;
  }

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
    const std::optional<double> value = flat::splat_value(g_, v);
    if (value) *out = *value;
    return value.has_value();
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
      // The triangle must span the scores' query and key dims: its first row stretched over the
      // queries (one key for every query) or its first column over the keys (every key) is not
      // the causal rule.
      const Shape& from = g_.values[c->operands[0]].shape;
      const Shape& to = g_.values[c->result].shape;
      if (!from[n - 2].same_as(to[2]) || !from[n - 1].same_as(to[3])) return false;
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
  // when `inverted`, exactly above it. Each constant is read once per pass: every layer of a model
  // slices the same mask, whole (1024 x 1024 for GPT-2) when the slice's length is dynamic.
  bool is_lower_triangle(const Tensor& mask, bool inverted) const {
    auto key = std::make_tuple(mask.data(), mask.dtype(), mask.shape(), inverted);
    auto it = triangles_.find(key);
    if (it != triangles_.end()) return it->second;
    StatusOr<Tensor> host = copy_to(mask, Device{});  // a mask the user's tensor holds on the GPU
    const bool triangle = host.ok() && flat::is_lower_triangle(host.value(), inverted);
    triangles_.emplace(std::move(key), triangle);
    return triangle;
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
    return flat::add_op(g_, rw, std::move(op), dtype, std::move(shape));
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
  // is_lower_triangle's answers by constant (its memory, dtype and shape; the graph holds them).
  mutable std::map<std::tuple<const void*, DType, std::vector<int64_t>, bool>, bool> triangles_;
};

// A bool mask that keeps key s for query l iff s <= l + o, with o a one-element value the graph
// computes (the position) plus a constant, becomes the causal offset o (rt::MaskKind::kCausalOffset;
// o == 0 with no value: plain causal). The mask is followed from the attention's operand through
// reshapes, broadcasts and transposes to le(a, b), ge(b, a), not(gt(a, b)) or not(lt(b, a)) in
// int32 or int64, where a must be the key index itself (an iota over the keys, or a constant equal
// to one) and b the sum (add, sub, neg) of the query index, one-element values and constants. The
// kernel takes l + o in o's dtype as the mask did, so a sum that wraps hides every key there too.
class OffsetMatcher {
 public:
  explicit OffsetMatcher(const Graph& g) : g_(g) {}

  bool match(int32_t index, Rewrite& rw) const {
    const Op& att = g_.ops[static_cast<size_t>(index)];
    const rt::AttentionAttrs& a = att.attention;
    if (att.kind != OpKind::kAttention || a.mask != rt::MaskKind::kBool || a.causal) return false;
    if (a.perms[rt::AttentionAttrs::kMask] != rt::AttentionAttrs::Perm{0, 1, 2, 3} ||
        a.heads[rt::AttentionAttrs::kMask] != rt::AttentionAttrs::HeadWindow{})
      return false;
    auto logical = [&](int x, int dim) {
      const Shape& s = g_.values[att.operands[static_cast<size_t>(x)]].shape;
      return s[static_cast<size_t>(a.perms[static_cast<size_t>(x)][static_cast<size_t>(dim)])];
    };
    const Dim L = logical(rt::AttentionAttrs::kQ, 2), S = logical(rt::AttentionAttrs::kK, 2);
    // The mask's dims are the scores' (B, H, L, S) or 1; its query and key dims must be L and S
    // for certain, for its iotas to count queries and keys.
    const ValueId m = att.operands[3];
    const Shape& ms = g_.values[m].shape;
    if ((!is_one(ms[2]) && !ms[2].same_as(L)) || !ms[3].same_as(S)) return false;
    Axes axes(4);
    for (int i = 0; i < 4; ++i) axes[static_cast<size_t>(i)] = is_one(ms[static_cast<size_t>(i)]) ? -1 : i;

    // Down to the comparison.
    ValueId v = m;
    bool negate = false;
    for (;;) {
      const Op& d = g_.def(v);
      Axes inner;
      if (view(d, axes, inner)) {
        v = d.operands[0];
        axes = std::move(inner);
      } else if (d.kind == OpKind::kElementwise && d.fn == EwOp::kNot && g_.values[d.operands[0]].dtype == DType::kBool) {
        v = d.operands[0];
        negate = !negate;
      } else {
        break;
      }
    }
    const Op& cmp = g_.def(v);
    if (cmp.kind != OpKind::kElementwise || cmp.operands.size() != 2) return false;
    // keys = a <= b = queries.
    ValueId keys, queries;
    if ((cmp.fn == EwOp::kLe && !negate) || (cmp.fn == EwOp::kGt && negate)) {
      keys = cmp.operands[0], queries = cmp.operands[1];
    } else if ((cmp.fn == EwOp::kGe && !negate) || (cmp.fn == EwOp::kLt && negate)) {
      keys = cmp.operands[1], queries = cmp.operands[0];
    } else {
      return false;
    }
    const DType t = g_.values[keys].dtype;
    if (t != DType::kInt32 && t != DType::kInt64) return false;
    Linear lk, lq;
    if (!linear(keys, axes, t, true, 1, lk) || !linear(queries, axes, t, true, 1, lq)) return false;
    if (lk.axis != std::array<int64_t, 4>{0, 0, 0, 1} || lk.constant != 0 || !lk.values().empty()) return false;
    // One query row (L == 1) is row 0 whether or not b counts rows.
    if (lq.axis[0] != 0 || lq.axis[1] != 0 || lq.axis[3] != 0 || !(lq.axis[2] == 1 || (lq.axis[2] == 0 && is_one(L))))
      return false;
    const std::vector<std::pair<ValueId, int64_t>> vals = lq.values();
    if (vals.size() > 1 || (vals.size() == 1 && vals[0].second != 1)) return false;

    rw = Rewrite{};
    rw.before = index;
    Op out = att;
    out.operands.resize(3);
    out.attention.mask = rt::MaskKind::kNone;
    const uint64_t c = t == DType::kInt32 ? static_cast<uint64_t>(static_cast<uint32_t>(lq.constant)) : lq.constant;
    if (vals.empty() && c == 0) {
      out.attention.causal = true;  // s <= l: the causal rule itself
    } else {
      const Shape one4(4, Dim(1));
      ValueId o = -1;
      if (!vals.empty()) {
        o = vals[0].first;
        if (!same_shape(g_.values[o].shape, one4)) {
          Op r;
          r.kind = OpKind::kReshape;
          r.operands = {o};
          o = add_op(g_, rw, r, g_.values[o].dtype, one4);
        }
        if (g_.values[vals[0].first].dtype != t) o = add_op(g_, rw, unary(EwOp::kConvert, o), t, one4);
      }
      if (c != 0 || o < 0) {
        Op k;
        k.kind = OpKind::kConstant;
        k.constant = Tensor::empty_host(t, {1, 1, 1, 1});
        if (t == DType::kInt32) {
          const uint32_t c32 = static_cast<uint32_t>(c);
          std::memcpy(k.constant.data(), &c32, sizeof c32);
        } else {
          std::memcpy(k.constant.data(), &c, sizeof c);
        }
        const ValueId kv = add_op(g_, rw, k, t, one4);
        if (o < 0) {
          o = kv;
        } else {
          Op sum = unary(EwOp::kAdd, o);
          sum.operands.push_back(kv);
          o = add_op(g_, rw, sum, t, one4);
        }
      }
      out.operands.push_back(o);
      out.attention.mask = rt::MaskKind::kCausalOffset;
    }
    rw.result = add_op(g_, rw, out, g_.values[att.result].dtype, g_.values[att.result].shape);
    return true;
  }

 private:
  // For each dim of a value, the scores' axis (0 batch, 1 head, 2 query, 3 key) its index runs
  // along, or -1 where the dim is 1.
  using Axes = std::vector<int>;

  // A value as sum over axes of axis[i] * index_i, plus `constant` (modulo 2**64: the dtype's
  // wrapping sum), plus the one-element values with their coefficients.
  struct Linear {
    std::array<int64_t, 4> axis{};
    uint64_t constant = 0;
    std::map<ValueId, int64_t> terms;
    std::vector<std::pair<ValueId, int64_t>> values() const {
      std::vector<std::pair<ValueId, int64_t>> out;
      for (const auto& [v, c] : terms)
        if (c != 0) out.emplace_back(v, c);
      return out;
    }
  };

  static Op unary(EwOp fn, ValueId x) {
    Op op;
    op.kind = OpKind::kElementwise;
    op.fn = fn;
    op.operands = {x};
    return op;
  }

  // Whether `d` is a view (reshape, broadcast, transpose) under which the axes of its result
  // `axes` give its operand's, `inner`: each operand dim that is not 1 is one result dim.
  bool view(const Op& d, const Axes& axes, Axes& inner) const {
    if (d.kind != OpKind::kReshape && d.kind != OpKind::kBroadcast && d.kind != OpKind::kTranspose) return false;
    const Shape& xs = g_.values[d.operands[0]].shape;
    const Shape& rs = g_.values[d.result].shape;
    inner.assign(xs.size(), -1);
    if (d.kind == OpKind::kTranspose) {  // result dim j is operand dim dims[j]
      for (size_t j = 0; j < d.dims.size(); ++j) inner[static_cast<size_t>(d.dims[j])] = axes[j];
      return true;
    }
    if (d.kind == OpKind::kBroadcast) {
      for (size_t i = 0; i < xs.size(); ++i) {
        if (is_one(xs[i])) continue;
        const size_t r = static_cast<size_t>(d.dims[i]);
        if (!xs[i].same_as(rs[r])) return false;  // a size only checked at run time
        inner[i] = axes[r];
      }
      return true;
    }
    // A reshape that only adds or drops dims of 1: the other dims pair up in order.
    size_t r = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (is_one(xs[i])) continue;
      while (r < rs.size() && is_one(rs[r])) ++r;
      if (r == rs.size() || !xs[i].same_as(rs[r])) return false;
      inner[i] = axes[r++];
    }
    while (r < rs.size() && is_one(rs[r])) ++r;
    return r == rs.size();
  }

  // Adds sign * v to `out`; v has dtype t. `sums`: whether adds may appear (not under a
  // widening convert, where the narrow dtype would have wrapped where t does not).
  bool linear(ValueId v, const Axes& axes, DType t, bool sums, int64_t sign, Linear& out) const {
    const Value& val = g_.values[v];
    if (val.dtype != t) return false;
    const Op& d = g_.def(v);
    if (d.kind == OpKind::kConstant) return constant(d.constant, axes, sign, out);
    if (d.kind == OpKind::kIota) {
      const int ax = axes[static_cast<size_t>(d.dims.at(0))];
      if (ax >= 0) out.axis[static_cast<size_t>(ax)] += sign;
      return true;
    }
    bool single = true;
    for (const Dim& dim : val.shape) single = single && is_one(dim);
    if (single) {  // a value computed at run time (the position), whatever computes it
      out.terms[v] += sign;
      return true;
    }
    Axes inner;
    if (view(d, axes, inner)) return linear(d.operands[0], inner, t, sums, sign, out);
    if (d.kind != OpKind::kElementwise) return false;
    switch (d.fn) {
      case EwOp::kAdd:
      case EwOp::kSub:
        return sums && linear(d.operands[0], axes, t, sums, sign, out) &&
               linear(d.operands[1], axes, t, sums, d.fn == EwOp::kSub ? -sign : sign, out);
      case EwOp::kNeg: return sums && linear(d.operands[0], axes, t, sums, -sign, out);
      case EwOp::kConvert: {  // int32 -> int64 keeps every value
        const DType from = g_.values[d.operands[0]].dtype;
        if (from != DType::kInt32 || t != DType::kInt64) return false;
        Linear narrow;  // one term: no sums below, so the narrow constant is an int32 value
        if (!linear(d.operands[0], axes, from, false, 1, narrow)) return false;
        for (int i = 0; i < 4; ++i) out.axis[static_cast<size_t>(i)] += sign * narrow.axis[static_cast<size_t>(i)];
        const int64_t wide = static_cast<int32_t>(static_cast<uint32_t>(narrow.constant));
        out.constant += static_cast<uint64_t>(sign) * static_cast<uint64_t>(wide);
        for (const auto& [x, k] : narrow.terms) out.terms[x] += sign * k;  // converted by the rewrite
        return true;
      }
      default: return false;
    }
  }

  // A constant: one value, or an iota along one of its dims (as constant folding may leave one).
  static bool constant(const Tensor& c, const Axes& axes, int64_t sign, Linear& out) {
    if (!c.defined() || (c.dtype() != DType::kInt32 && c.dtype() != DType::kInt64)) return false;
    const std::vector<int64_t>& shape = c.shape();
    const int64_t n = c.numel();
    if (n == 0 || n > (int64_t{1} << 20)) return false;
    auto at = [&](int64_t i) -> int64_t {
      if (c.dtype() == DType::kInt32) return static_cast<const int32_t*>(c.data())[i];
      return static_cast<const int64_t*>(c.data())[i];
    };
    bool splat = true;
    for (int64_t i = 1; i < n && splat; ++i) splat = at(i) == at(0);
    if (splat) {
      out.constant += static_cast<uint64_t>(sign) * static_cast<uint64_t>(at(0));
      return true;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (axes[d] < 0) continue;
      int64_t inner = 1;
      for (size_t e = d + 1; e < shape.size(); ++e) inner *= shape[e];
      bool iota = true;
      for (int64_t i = 0; i < n && iota; ++i) iota = at(i) == (i / inner) % shape[d];
      if (iota) {
        out.axis[static_cast<size_t>(axes[d])] += sign;
        return true;
      }
    }
    return false;
  }

  const Graph& g_;
};

// Rebuilds `graph` with each rewrite's ops in place of its op `before` (in order of `before`);
// what only the replaced ops read is dead and DCE drops it.
Graph apply_rewrites(const Graph& graph, const std::vector<Rewrite>& rewrites) {
  size_t next = 0;
  return dce(rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    if (next == rewrites.size() || rewrites[next].before != static_cast<int32_t>(i)) return false;
    const Rewrite& r = rewrites[next++];
    std::vector<ValueId> added;
    auto resolve = [&](ValueId v) {
      return v < static_cast<ValueId>(graph.values.size()) ? rw[v] : added[v - graph.values.size()];
    };
    for (size_t j = 0; j < r.ops.size(); ++j) {
      Op op = r.ops[j];
      for (ValueId& v : op.operands) v = resolve(v);
      if (!op.origin) op.origin = graph.ops[i].origin;
      added.push_back(rw.add(std::move(op), r.types[j].first, r.types[j].second));
    }
    rw.set(graph.ops[i].result, resolve(r.result));
    return true;
  }));
}

template <class M>
std::optional<Graph> rewrite_all(const Graph& graph) {
  M m(graph);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    Rewrite rw;
    if (m.match(static_cast<int32_t>(i), rw)) rewrites.push_back(std::move(rw));
  }
  if (rewrites.empty()) return std::nullopt;
  return apply_rewrites(graph, rewrites);
}

}  // namespace

std::optional<Graph> match_attention(const Graph& graph) {
  // Hand-written attention first, so that its masks are seen by the second step too.
  std::optional<Graph> written = rewrite_all<Matcher>(graph);
  std::optional<Graph> offsets = rewrite_all<OffsetMatcher>(written ? *written : graph);
  return offsets ? offsets : written;
}

}  // namespace tripy::flat

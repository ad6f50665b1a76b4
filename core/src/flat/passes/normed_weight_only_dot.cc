// An RMSNorm before a weight-only product is computed by the product itself: where a weight-only
// product's x is tp.RMSNorm's result over x's last dim (its lowering, trace/ops_norm.cc, as the
// passes before this one leave it),
//
//   weight_only_dot(rmsnorm(h, gamma, eps), w, scale...)  ->  weight_only_dot(h, w, scale..., gamma) {norm}
//
// and the kernel normalizes each row of h as it reads it (rt::WeightOnlyDotAttrs::norm), so that
// the row kernel that wrote the normalized x, a launch of its own before a Llama layer's qkv and
// gate/up products and the output head, is gone. Only where the backend's rule allows and h and
// the product share a dtype (gamma that one or float32). The match
// checks every op of the lowering, its guards for rows whose squares overflow or underflow
// included: a product of anything else keeps its x.
#include <cmath>

#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

constexpr DType kStats = DType::kFloat32;

// An RMSNorm over the last dim, found by RmsNormMatch::of: y = h * rsqrt(mean(h^2) + eps) * gamma.
struct RmsNorm {
  ValueId h = -1, gamma = -1;
  double eps = 0.0;
};

// One match: of() fills the members as it goes (x's row dims, x, K, eps).
class RmsNormMatch {
 public:
  explicit RmsNormMatch(const Graph& g) : g_(g) {}

  // The RMSNorm whose (narrowed) result is `n`, or nullopt.
  std::optional<RmsNorm> of(ValueId n) {
    ValueId y = n;
    if (const Op* c = ew(n, EwOp::kConvert)) y = c->operands[0];
    const Value& yv = g_.values[y];
    if (yv.dtype != kStats || yv.shape.empty() || !yv.shape.back().is_static()) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(yv.shape.size()), K = yv.shape.back().static_value();
    for (int64_t d = 0; d + 1 < rank; ++d) rows_dims_.push_back(d);
    RmsNorm out;
    ValueId scaled = -1, factor = -1, pre = -1;
    // y = normed * broadcast(gamma); normed = scaled * broadcast(factor); scaled = x * broadcast(pre).
    if (!product_with(y, [&](ValueId b) { return gamma_of(b, rank, K, &out.gamma); }, &scaled) ||
        !product_with(scaled, [&](ValueId b) { return row_value(b, &factor); }, &scaled) ||
        !product_with(scaled, [&](ValueId b) { return row_value(b, &pre); }, &x_))
      return std::nullopt;
    const Value& xv = g_.values[x_];
    if (xv.dtype != kStats || xv.shape.size() != yv.shape.size()) return std::nullopt;
    K_ = K;
    if (!guarded(pre, factor, &out.eps)) return std::nullopt;
    out.h = x_;
    if (const Op* c = ew(x_, EwOp::kConvert)) out.h = c->operands[0];
    return out;
  }

 private:
  const Op* ew(ValueId v, EwOp fn) const {
    const Op& d = g_.def(v);
    return d.kind == OpKind::kElementwise && d.fn == fn ? &d : nullptr;
  }
  bool splat(ValueId v, double want) const { return splat_value(g_, v) == want; }
  // v = a * b with match(b) for one order of the operands; the other operand in `rest`.
  template <class Match>
  bool product_with(ValueId v, Match&& match, ValueId* rest) const {
    const Op* m = ew(v, EwOp::kMul);
    if (!m || m->operands.size() != 2) return false;
    for (int side = 0; side < 2; ++side)
      if (match(m->operands[side])) {
        *rest = m->operands[1 - side];
        return true;
      }
    return false;
  }
  // b = broadcast(gamma [K] widened to float32) over the rows.
  bool gamma_of(ValueId b, int64_t rank, int64_t K, ValueId* gamma) const {
    const Op& bc = g_.def(b);
    if (bc.kind != OpKind::kBroadcast || bc.dims != std::vector<int64_t>{rank - 1}) return false;
    ValueId w = bc.operands[0];
    if (const Op* c = ew(w, EwOp::kConvert)) w = c->operands[0];
    const Shape& ws = g_.values[w].shape;
    if (ws.size() != 1 || !ws[0].is_static() || ws[0].static_value() != K) return false;
    *gamma = w;
    return true;
  }
  // b = broadcast(r) of a row value r (one per row: the last dim reduced) over the last dim.
  bool row_value(ValueId b, ValueId* r) const {
    const Op& bc = g_.def(b);
    if (bc.kind != OpKind::kBroadcast || bc.dims != rows_dims_) return false;
    *r = bc.operands[0];
    return true;
  }
  // v = mean over the last dim of (x * 2^e)^2 (e = 0: of x^2).
  bool mean_square(ValueId v, int e) const {
    const Op* div = ew(v, EwOp::kDiv);
    if (!div || !splat(div->operands[1], static_cast<double>(K_))) return false;
    const Op& sum = g_.def(div->operands[0]);
    if (sum.kind != OpKind::kReduce || sum.fn != EwOp::kReduceSum || sum.dims != std::vector<int64_t>{
                                                                                      static_cast<int64_t>(rows_dims_.size())})
      return false;
    const Op* sq = ew(sum.operands[0], EwOp::kMul);
    if (!sq || sq->operands[0] != sq->operands[1]) return false;
    if (e == 0) return sq->operands[0] == x_;
    ValueId t;
    return product_with(sq->operands[0], [&](ValueId c) { return splat(c, std::ldexp(1.0, e)); }, &t) && t == x_;
  }
  // v = rsqrt(square + eps'), or rsqrt(square) where eps' is 0 (simplify drops the add); eps' read.
  bool root_of(ValueId v, ValueId* square, double* eps) const {
    const Op* r = ew(v, EwOp::kRsqrt);
    if (!r) return false;
    *eps = 0.0;
    if (const Op* add = ew(r->operands[0], EwOp::kAdd))
      for (int side = 0; side < 2; ++side)
        if (const std::optional<double> e = splat_value(g_, add->operands[1 - side])) {
          *eps = *e;
          *square = add->operands[side];
          return true;
        }
    *square = r->operands[0];
    return true;
  }
  // One guard of lower_rmsnorm: where `cond(plain)` holds, pre = 2^(e/2) and factor =
  // rsqrt(mean((x 2^e)^2) + eps 2^(2e)) 2^(e/2); else the inner pre and factor.
  bool guard(ValueId pre, ValueId factor, EwOp cmp, double bound, int e, ValueId* plain, ValueId* inner_pre,
             ValueId* inner_factor) const {
    const Op* sp = ew(pre, EwOp::kSelect);
    const Op* sf = ew(factor, EwOp::kSelect);
    if (!sp || !sf || sp->operands[0] != sf->operands[0]) return false;
    const Op* c = ew(sp->operands[0], cmp);
    if (!c || !splat(c->operands[1], bound) || !splat(sp->operands[1], std::ldexp(1.0, e / 2))) return false;
    *plain = c->operands[0], *inner_pre = sp->operands[2], *inner_factor = sf->operands[2];
    ValueId root, square;
    double scaled_eps;
    return product_with(sf->operands[1], [&](ValueId s) { return splat(s, std::ldexp(1.0, e / 2)); }, &root) &&
           root_of(root, &square, &scaled_eps) && mean_square(square, e) &&
           scaled_eps == static_cast<double>(static_cast<float>(std::ldexp(eps_, 2 * e)));
  }
  // pre and factor as lower_rmsnorm makes them: the overflow guard (e = -96), inside the
  // underflow guard (e = 100) where eps is below 2^-100; eps read from the plain root.
  bool guarded(ValueId pre, ValueId factor, double* eps) {
    const Op* sp = ew(pre, EwOp::kSelect);
    const Op* sf = ew(factor, EwOp::kSelect);
    if (!sp || !sf) return false;
    const bool under = ew(sf->operands[2], EwOp::kSelect) != nullptr;
    const ValueId p = under ? sp->operands[2] : pre, f = under ? sf->operands[2] : factor;
    // The overflow guard's other value is the plain root, rsqrt(mean(x^2) + eps).
    ValueId plain, cond_of, p_in, f_in;
    if (!ew(f, EwOp::kSelect) || !root_of(g_.def(f).operands[2], &plain, &eps_) || !mean_square(plain, 0)) return false;
    if (!guard(p, f, EwOp::kGe, HUGE_VAL, -96, &cond_of, &p_in, &f_in) || cond_of != plain || !splat(p_in, 1.0))
      return false;
    if (under != (eps_ < std::ldexp(1.0, -100))) return false;
    if (under && (!guard(pre, factor, EwOp::kLt, std::ldexp(1.0, -126), 100, &cond_of, &p_in, &f_in) ||
                  cond_of != plain || p_in != p || f_in != f))
      return false;
    *eps = eps_;
    return true;
  }

  const Graph& g_;
  std::vector<int64_t> rows_dims_;
  ValueId x_ = -1;
  int64_t K_ = 0;
  double eps_ = 0.0;
};

}  // namespace

rt::WeightOnlyFold weight_only_fold_case(const Graph& graph, const Op& op) {
  const rt::WeightOnlyDotAttrs& a = op.kernel.weight_only_dot;
  const Value& x = graph.values[op.operands[0]];
  rt::WeightOnlyFold c;
  c.dtype = x.dtype;
  c.rows = most_rows(graph, op.operands[0]);
  c.K = !x.shape.empty() && x.shape.back().is_static() ? rt::weight_only_k(a, x.shape.back().static_value()) : -1;
  c.group = a.group_size;
  c.bits = op.operands.size() > 1 && graph.values[op.operands[1]].dtype == DType::kFloat8E4M3 ? 9 : static_cast<int>(a.bits);
  c.norm = a.norm, c.gated = a.gated, c.residual = a.residual, c.gate_output = a.gate_output;
  return c;
}

std::optional<Graph> normed_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies) {
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    if (src.kind != OpKind::kKernel || src.kernel.kind != rt::KernelKind::kWeightOnlyDot ||
        src.kernel.weight_only_dot.gated || src.kernel.weight_only_dot.norm || src.operands.empty())
      return false;
    const ValueId x = src.operands[0];
    rt::WeightOnlyFold normed = weight_only_fold_case(graph, src);
    normed.norm = true;
    if (applies && !applies(normed)) return false;
    const std::optional<RmsNorm> norm = RmsNormMatch(graph).of(x);
    const DType t = graph.values[x].dtype;
    // gamma float32 where constant folding widened it.
    const DType gt = norm ? graph.values[norm->gamma].dtype : t;
    if (!norm || graph.values[norm->h].dtype != t || (gt != t && gt != DType::kFloat32)) return false;
    Op op = src;
    op.operands[0] = norm->h;
    rt::WeightOnlyDotAttrs& a = op.kernel.weight_only_dot;
    op.operands.insert(op.operands.begin() + static_cast<std::ptrdiff_t>(rt::weight_only_gamma_input(a)), norm->gamma);
    a.norm = true;
    a.norm_eps = norm->eps;
    rw.copy(op);
    return true;
  });
  if (!out) return out;
  return dce(*out);
}

}  // namespace tripy::flat

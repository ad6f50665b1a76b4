// scaled_dot_product_attention as one op: q (..., Hq, L, D), k (..., Hkv, S, D), v (..., Hkv, S, Dv)
// and an optional bool or additive mask broadcastable to (..., Hq, L, S). Its checks name the
// user's line; it lowers to one FlatIR attention over rank-4 views (batch dims flattened), which
// backends run as one kernel that never holds L x S scores in memory.
#include <cmath>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

constexpr const char* kName = "scaled_dot_product_attention";
const char* const kInputNames[] = {"query", "key", "value", "attn_mask"};

bool is_one(const Dim& d) { return d.is_static() && d.static_value() == 1; }
bool differ(const Dim& a, const Dim& b) { return a.is_static() && b.is_static() && a.static_value() != b.static_value(); }

// An error that also shows where the inputs it is about were created.
Status input_error(const InferCtx& ctx, const std::string& message, std::initializer_list<int> inputs) {
  Status st = ctx.error(std::string(kName) + ": " + message);
  for (int i : inputs)
    st.note(std::string(kInputNames[i]) + " (" + ctx.in()[i]->describe() + ") was created here:", ctx.in()[i]->source);
  return st;
}

// The mask's dims right-aligned against the scores' shape (..., Hq, L, S), leading 1s added.
Shape aligned_mask_shape(const Shape& mask, size_t rank) {
  Shape out(rank - mask.size(), Dim(1));
  out.insert(out.end(), mask.begin(), mask.end());
  return out;
}

Status infer_attention(InferCtx& ctx) {
  const Node& q = *ctx.in()[0];
  const Shape &sq = ctx.shape(0), &sk = ctx.shape(1), &sv = ctx.shape(2);
  const size_t r = sq.size();
  for (int i = 0; i < 3; ++i) {
    if (ctx.shape(i).size() < 2)
      return input_error(ctx, std::string(kInputNames[i]) + " must have rank >= 2 (..., seq, dim), but has shape " +
                                  shape_str(ctx.shape(i)) + ".", {i});
  }
  if (sk.size() != r || sv.size() != r)
    return input_error(ctx, "query, key and value must have one rank, but have shapes " + shape_str(sq) + ", " +
                                shape_str(sk) + " and " + shape_str(sv) + ".", {0, 1, 2});
  for (int i : {1, 2}) {
    if (ctx.in()[i]->dtype != q.dtype)
      return input_error(ctx, "query, key and value must share a dtype, but " + std::string(kInputNames[i]) + " is " +
                                  std::string(dtype_name(ctx.in()[i]->dtype)) + " and query is " + std::string(dtype_name(q.dtype)) +
                                  ". Use tp.cast to convert one of them.", {0, i});
  }
  // Batch dims (all but the last three) must agree; the head dim may differ when Hkv divides Hq.
  const size_t batch = r >= 3 ? r - 3 : 0;
  for (size_t d = 0; d < batch; ++d) {
    if (differ(sq[d], sk[d]) || differ(sq[d], sv[d]))
      return input_error(ctx, "query, key and value must have equal batch dims, but have shapes " + shape_str(sq) +
                                  ", " + shape_str(sk) + " and " + shape_str(sv) + ".", {0, 1, 2});
  }
  if (differ(sk.back(), sq.back()))
    return input_error(ctx, "query and key must have one head size (last dim), but have shapes " + shape_str(sq) +
                                " and " + shape_str(sk) + ".", {0, 1});
  if (differ(sk[r - 2], sv[r - 2]))
    return input_error(ctx, "key and value must have one sequence length (dim -2), but have shapes " + shape_str(sk) +
                                " and " + shape_str(sv) + ".", {1, 2});
  if (r >= 3) {
    const Dim &hq = sq[r - 3], &hk = sk[r - 3], &hv = sv[r - 3];
    if (differ(hk, hv))
      return input_error(ctx, "key and value must have one number of heads (dim -3), but have shapes " +
                                  shape_str(sk) + " and " + shape_str(sv) + ".", {1, 2});
    if (hq.is_static() && hk.is_static() &&
        (hk.static_value() == 0 ? hq.static_value() != 0 : hq.static_value() % hk.static_value() != 0))
      return input_error(ctx, "the key/value heads (" + std::to_string(hk.static_value()) +
                                  ") must divide the query heads (" + std::to_string(hq.static_value()) +
                                  ") for grouped-query attention; shapes " + shape_str(sq) + " and " + shape_str(sk) +
                                  ".", {0, 1});
  }
  if (ctx.in().size() == 4) {
    const Node& m = *ctx.in()[3];
    if (m.dtype != DType::kBool && m.dtype != q.dtype)
      return input_error(ctx, "attn_mask must be bool (True keeps a score) or of the query's dtype " +
                                  std::string(dtype_name(q.dtype)) + " (added to the scores), but is " +
                                  std::string(dtype_name(m.dtype)) + ".", {3});
    Shape scores(sq.begin(), sq.end() - 1);
    scores.push_back(sk[r - 2]);
    if (m.shape.size() > r || m.shape.empty())
      return input_error(ctx, "attn_mask of shape " + shape_str(m.shape) + " does not broadcast to the scores' shape " +
                                  shape_str(scores) + ".", {3});
    const Shape am = aligned_mask_shape(m.shape, r);
    for (size_t d = 0; d < r; ++d) {
      if (!is_one(am[d]) && differ(am[d], scores[d]))
        return input_error(ctx, "attn_mask of shape " + shape_str(m.shape) +
                                    " does not broadcast to the scores' shape " + shape_str(scores) + ".", {0, 1, 3});
    }
  }
  if (ctx.node.attrs.scale <= 0 || !std::isfinite(ctx.node.attrs.scale))
    return ctx.error(std::string(kName) + ": the scale must be a positive finite number.");
  Shape out = sq;
  out.back() = sv.back();
  ctx.node.shape = std::move(out);
  ctx.node.dtype = q.dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_attention(LowerCtx& c) {
  const Shape sq = c.value(c.in(0)).shape, sk = c.value(c.in(1)).shape, sv = c.value(c.in(2)).shape;
  const size_t r = sq.size(), nb = r >= 3 ? r - 3 : 0;
  const Shape lead(sq.begin(), sq.begin() + static_cast<std::ptrdiff_t>(nb));
  const std::string why = std::string("Incompatible sizes at run time for ") + kName + ": ";
  for (size_t d = 0; d < nb; ++d) {
    c.check_equal(sk[d], sq[d], why + "key and query batch dims differ.");
    c.check_equal(sv[d], sq[d], why + "value and query batch dims differ.");
  }
  const Dim B = num_elements(lead);
  const Dim hq = r >= 3 ? sq[r - 3] : Dim(1), hkv = r >= 3 ? sk[r - 3] : Dim(1);
  if (r >= 3) {
    c.check_equal(sv[r - 3], hkv, why + "key and value have different numbers of heads.");
    if (!hq.same_as(hkv) && !(hq.is_static() && hkv.is_static()))
      c.check_equal(Dim::make(DimOp::kFloorDiv, hq, hkv) * hkv, hq, why + "the key/value heads must divide the query heads.");
  }
  c.check_equal(sk[r - 1], sq[r - 1], why + "query and key have different head sizes.");
  c.check_equal(sv[r - 2], sk[r - 2], why + "key and value have different sequence lengths.");
  const Dim L = sq[r - 2], S = sk[r - 2], D = sq[r - 1], Dv = sv[r - 1];

  flat::Op op;
  op.kind = flat::OpKind::kAttention;
  op.attention.causal = c.node().attrs.causal;
  op.attention.scale = c.node().attrs.scale;
  op.operands = {c.reshape(c.in(0), {B, hq, L, D}, "view query as (batch, heads, L, D)"),
                 c.reshape(c.in(1), {B, hkv, S, D}, "view key as (batch, heads, S, D)"),
                 c.reshape(c.in(2), {B, hkv, S, Dv}, "view value as (batch, heads, S, Dv)")};
  if (c.node().inputs.size() == 4) {
    const flat::ValueId m = c.in(3);
    op.attention.mask = c.value(m).dtype == DType::kBool ? rt::MaskKind::kBool : rt::MaskKind::kAdditive;
    Shape scores(sq.begin(), sq.end() - 1);
    scores.push_back(S);
    const Shape am = aligned_mask_shape(c.value(m).shape, r);
    for (size_t d = 0; d < r; ++d)
      if (!is_one(am[d])) c.check_equal(am[d], scores[d], why + "attn_mask does not broadcast to the scores.");
    flat::ValueId mv = c.reshape(m, am);
    // Batch dims of the mask flatten with the queries' only when they are all 1 or all equal.
    bool all_one = true, all_same = true;
    for (size_t d = 0; d < nb; ++d) {
      all_one = all_one && is_one(am[d]);
      all_same = all_same && !is_one(am[d]);
    }
    Dim bm = Dim(1);
    if (nb > 0 && !all_one) {
      if (!all_same) {
        Shape full = lead;
        full.insert(full.end(), am.end() - 3, am.end());
        mv = c.broadcast_to(mv, full, "broadcast attn_mask over the batch dims of " + std::string(kName));
      }
      bm = B;
    }
    auto tail = [&](int from_end) { return r >= static_cast<size_t>(from_end) ? am[r - from_end] : Dim(1); };
    op.operands.push_back(c.reshape(mv, {bm, tail(3), tail(2), tail(1)}, "view attn_mask as (batch, heads, L, S)"));
  }
  flat::ValueId out = c.emit(std::move(op), c.node().dtype, {B, hq, L, Dv});
  return c.reshape(out, c.node().shape);
}

}  // namespace

void register_attention_ops() {
  // Inputs: query, key, value (one float dtype, checked by the rule), attn_mask (bool or that dtype).
  register_op({kName, kName, 3, 4, {kFloats, kFloats, kFloats, kFloats | kBool}, false, infer_attention,
               lower_attention, attr::causal | attr::scale, attr::scale});
}

}  // namespace tripy::trace

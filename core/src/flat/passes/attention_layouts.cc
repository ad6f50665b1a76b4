// Views instead of copies for attention: transposes feeding an attention's q, k, v or mask, and a
// transpose that is the only reader of its result, become the operand layouts (perms) of the
// attention itself, so a head split `reshape(B, T, H, D)` + `transpose(1, 2)` and the merge back
// run no copy kernel (the reshapes are free aliases already). k and v repeated along the heads
// (grouped-query attention written out) are read unrepeated. A head split of a slice of the last
// axis (nanoGPT's `q, k, v = qkv.split(C, 2)`) becomes a head window of the unsliced projection,
// so q, k and v stay one GEMM's output and nothing copies them out of it; so does a slice of the
// heads dim itself (an LLM's q, k and v as heads of one (B, T, heads, D) projection).
#include <algorithm>

#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

using Perm = rt::AttentionAttrs::Perm;

// True for a transpose of a rank-4 value (the only kind an attention operand can see).
bool is_transpose4(const Op& op) { return op.kind == OpKind::kTranspose && op.dims.size() == 4; }

bool is_const(const Dim& d, int64_t v) { return d.is_static() && d.static_value() == v; }

// r = reshape(s, (B, T, H, D)) of s = slice(x, [0, 0, a], [B, T, a + H * D]) with x (B, T, N):
// r is heads [a / D, a / D + H) of reshape(x, (B, T, N / D, D)). Returns that window's start, or
// -1 when the pattern does not hold (static H, D, N and a, D dividing a and N, unit steps).
int64_t head_window_start(const Graph& g, const Op& r) {
  if (r.kind != OpKind::kReshape || g.values[r.result].shape.size() != 4) return -1;
  const Op& s = g.def(r.operands[0]);
  if (s.kind != OpKind::kSlice) return -1;
  const Shape& rs = g.values[r.result].shape;
  const Shape& ss = g.values[s.result].shape;
  const Shape& xs = g.values[s.operands[0]].shape;
  if (ss.size() != 3 || xs.size() != 3 || !rs[2].is_static() || !rs[3].is_static() || !xs[2].is_static()) return -1;
  const int64_t H = rs[2].static_value(), D = rs[3].static_value(), N = xs[2].static_value();
  if (D <= 0 || N % D != 0 || !rs[0].same_as(xs[0]) || !rs[1].same_as(xs[1])) return -1;
  for (size_t d = 0; d < 3; ++d)
    if (!is_const(s.steps[d], 1)) return -1;
  for (size_t d = 0; d < 2; ++d)
    if (!is_const(s.starts[d], 0) || !s.limits[d].same_as(xs[d])) return -1;
  if (!s.starts[2].is_static() || !s.limits[2].is_static()) return -1;
  const int64_t a = s.starts[2].static_value();
  if (a % D != 0 || s.limits[2].static_value() != a + H * D || a + H * D > N) return -1;
  return a / D;
}

// s = slice(x) of a rank-4 x along dim 2 only (static bounds, unit steps): heads
// [start, start + count) of x. Returns count, or 0 when s is not such a slice.
int64_t sliced_heads(const Graph& g, const Op& s) {
  if (s.kind != OpKind::kSlice || s.starts.size() != 4) return 0;
  const Shape& xs = g.values[s.operands[0]].shape;
  for (size_t d = 0; d < 4; ++d) {
    if (!is_const(s.steps[d], 1)) return 0;
    if (d != 2 && (!is_const(s.starts[d], 0) || !s.limits[d].same_as(xs[d]))) return 0;
  }
  if (!s.starts[2].is_static() || !s.limits[2].is_static()) return 0;
  return std::max<int64_t>(0, s.limits[2].static_value() - s.starts[2].static_value());
}

// k or v repeated along the heads, as grouped-query attention is often written (Llama's repeat_kv,
// tp.repeat): y = reshape(broadcast(x to (B, Hkv, G, S, D)), (B, Hkv * G, S, D)), head h of y being
// head h / G of x (B, Hkv, S, D); the broadcast reads x directly (dims 0, 1, 3, 4) or through a
// reshape to (B, Hkv, 1, S, D). Returns x and the ops between it and y (each read only by the
// next, so they go with the repeat), or x = -1.
struct HeadRepeat {
  ValueId x = -1;
  std::vector<int32_t> ops;
};
HeadRepeat head_repeat(const Graph& g, const std::vector<int32_t>& uses, const std::vector<bool>& is_output, ValueId y) {
  const int32_t outer = g.values[y].def;
  if (outer < 0 || g.ops[outer].kind != OpKind::kReshape) return {};
  const ValueId b = g.ops[outer].operands[0];
  const int32_t bcast = g.values[b].def;
  if (bcast < 0 || g.ops[bcast].kind != OpKind::kBroadcast) return {};
  HeadRepeat r{g.ops[bcast].operands[0], {outer, bcast}};
  const std::vector<int64_t> direct = {0, 1, 3, 4}, through = {0, 1, 2, 3, 4};
  if (g.ops[bcast].dims == through) {  // through a reshape to (B, Hkv, 1, S, D)
    const int32_t inner = g.values[r.x].def;
    if (inner < 0 || g.ops[inner].kind != OpKind::kReshape || !is_const(g.values[r.x].shape[2], 1)) return {};
    r.ops.push_back(inner);
    r.x = g.ops[inner].operands[0];
  } else if (g.ops[bcast].dims != direct) {
    return {};
  }
  const Shape &ys = g.values[y].shape, &bs = g.values[b].shape, &xs = g.values[r.x].shape;
  if (ys.size() != 4 || bs.size() != 5 || xs.size() != 4) return {};
  // x (B, Hkv, S, D) -> b (B, Hkv, G, S, D) -> y (B, Hkv * G, S, D).
  for (size_t i = 0; i < 4; ++i)
    if (!bs[direct[i]].same_as(xs[i]) || (i != 1 && !ys[i].same_as(xs[i]))) return {};
  if (!bs[1].is_static() || !bs[2].is_static() || !ys[1].is_static() ||
      ys[1].static_value() != bs[1].static_value() * bs[2].static_value())
    return {};
  for (int32_t op : r.ops)
    if (uses[g.ops[op].result] != 1 || is_output[g.ops[op].result]) return {};
  return r;
}

}  // namespace

std::optional<Graph> fold_attention_layouts(const Graph& graph) {
  Graph g = graph;
  const std::vector<int32_t> uses = g.use_counts();
  std::vector<int32_t> user(g.values.size(), -1);  // the op reading a value (the last one seen)
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (ValueId v : g.ops[i].operands) user[v] = static_cast<int32_t>(i);
  std::vector<bool> is_output(g.values.size(), false);
  for (ValueId v : g.outputs) is_output[v] = true;
  std::vector<bool> keep(g.ops.size(), true);
  std::vector<ValueId> replace(g.values.size(), -1);
  bool changed = false;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    Op& op = g.ops[i];
    if (op.kind != OpKind::kAttention) continue;
    // k and v repeated alike along the heads are read unrepeated: the attention's own grouped-query
    // indexing does what the repeat did, with no copy of either.
    if (const HeadRepeat rk = head_repeat(g, uses, is_output, op.operands[1]),
        rv = head_repeat(g, uses, is_output, op.operands[2]);
        rk.x >= 0 && rv.x >= 0 && g.values[rk.x].shape[1].same_as(g.values[rv.x].shape[1])) {
      op.operands[1] = rk.x;
      op.operands[2] = rv.x;
      for (const HeadRepeat* r : {&rk, &rv})
        for (int32_t d : r->ops) keep[static_cast<size_t>(d)] = false;
      changed = true;
    }
    // Operands: logical dim j = operand dim perm[j] = source dim t[perm[j]] through y = transpose(x, t).
    for (size_t x = 0; x < op.operands.size(); ++x) {
      Perm& perm = op.attention.perms[x];
      std::vector<int32_t> chain;  // the transposes walked through
      while (is_transpose4(g.def(op.operands[x]))) {
        const Op& t = g.def(op.operands[x]);
        for (int8_t& d : perm) d = static_cast<int8_t>(t.dims[static_cast<size_t>(d)]);
        chain.push_back(g.values[op.operands[x]].def);
        op.operands[x] = t.operands[0];
        changed = true;
      }
      // The head split of a slice: only when the attention alone reads every value in between,
      // since the reshape is rewritten in place, and when the heads are buffer dim 2.
      const int32_t r = g.values[op.operands[x]].def;
      rt::AttentionAttrs::HeadWindow& w = op.attention.heads[x];
      if (r < 0 || w != rt::AttentionAttrs::HeadWindow{} || perm[1] != 2 || perm[3] != 3) continue;
      bool private_chain = uses[op.operands[x]] == 1 && !is_output[op.operands[x]];
      for (int32_t t : chain)
        private_chain = private_chain && uses[g.ops[t].result] == 1 && !is_output[g.ops[t].result];
      Op& reshape = g.ops[static_cast<size_t>(r)];
      if (const int64_t count = private_chain ? sliced_heads(g, reshape) : 0; count > 0) {
        // A slice of the heads dim (q, k or v as heads of one rank-4 value) reads that value.
        w = {reshape.starts[2].static_value(), count};
        op.operands[x] = reshape.operands[0];
        for (int32_t t : chain) keep[static_cast<size_t>(t)] = false;
        continue;
      }
      const int64_t start = private_chain ? head_window_start(g, reshape) : -1;
      if (start < 0) continue;
      const ValueId src = g.def(reshape.operands[0]).operands[0];
      Shape& shape = g.values[reshape.result].shape;
      w = {start, shape[2].static_value()};
      shape[2] = Dim(g.values[src].shape[2].static_value() / shape[3].static_value());
      reshape.operands[0] = src;
      for (int32_t t : chain) keep[static_cast<size_t>(t)] = false;  // now stale; nothing reads them
    }
    // The result: when one transpose alone reads it, write in that transpose's layout instead:
    // y dim j = result dim t[j], so logical dim i (result dim perm[i]) is y dim inverse(t)[perm[i]].
    const ValueId r = op.result;
    if (uses[r] != 1 || is_output[r] || user[r] < 0) continue;
    const Op& t = g.ops[static_cast<size_t>(user[r])];
    if (!is_transpose4(t)) continue;
    int8_t inverse[4];
    for (int j = 0; j < 4; ++j) inverse[t.dims[static_cast<size_t>(j)]] = static_cast<int8_t>(j);
    Perm& out = op.attention.perms[rt::AttentionAttrs::kOut];
    for (int8_t& d : out) d = inverse[d];
    g.values[r].shape = g.values[t.result].shape;
    keep[static_cast<size_t>(user[r])] = false;
    replace[t.result] = r;
    changed = true;
  }
  if (!changed) return std::nullopt;
  return rebuild(g, keep, replace);
}

}  // namespace tripy::flat

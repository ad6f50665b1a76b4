// Views instead of copies for attention: transposes feeding an attention's q, k, v or mask, and a
// transpose that is the only reader of its result, become the operand layouts (perms) of the
// attention itself, so a head split `reshape(B, T, H, D)` + `transpose(1, 2)` and the merge back
// run no copy kernel (the reshapes are free aliases already).
#include "flat/passes/passes.h"

namespace tripy::flat {
namespace {

using Perm = rt::AttentionAttrs::Perm;

// True for a transpose of a rank-4 value (the only kind an attention operand can see).
bool is_transpose4(const Op& op) { return op.kind == OpKind::kTranspose && op.dims.size() == 4; }

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
    // Operands: logical dim j = operand dim perm[j] = source dim t[perm[j]] through y = transpose(x, t).
    for (size_t x = 0; x < op.operands.size(); ++x) {
      Perm& perm = op.attention.perms[x];
      while (is_transpose4(g.def(op.operands[x]))) {
        const Op& t = g.def(op.operands[x]);
        for (int8_t& d : perm) d = static_cast<int8_t>(t.dims[static_cast<size_t>(d)]);
        op.operands[x] = t.operands[0];
        changed = true;
      }
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

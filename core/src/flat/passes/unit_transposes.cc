// A transpose that moves only dims of size 1 keeps every element where it was: it becomes a
// reshape, which launches nothing. A decode step's head split of one token, (B, 1, H, D) ->
// (B, H, 1, D) on its way into a KV cache written along its sequence dim (GPT-2's layout), was a
// copy kernel for each of k and v in every layer.
//
// Run after the attention passes: an attention's transposed operands are its layouts already,
// and a transpose that swaps the last two dims (a dot's operand, read as a flag) stays as it is.
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

// Whether transpose `op` keeps the order of its operand's dims of sizes other than a static 1.
bool moves_only_unit_dims(const Graph& g, const Op& op) {
  const Shape& in = g.values[op.operands[0]].shape;
  int64_t last = -1;
  for (int64_t d : op.dims) {
    if (d < 0 || static_cast<size_t>(d) >= in.size()) return false;
    if (in[static_cast<size_t>(d)].is_static() && in[static_cast<size_t>(d)].static_value() == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

}  // namespace

std::optional<Graph> unit_transposes_to_reshapes(const Graph& graph) {
  return rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    if (src.kind != OpKind::kTranspose || src.operands.size() != 1 || swaps_last_two_dims(src) ||
        !moves_only_unit_dims(graph, src))
      return false;
    Op op = src;
    op.kind = OpKind::kReshape;
    op.dims.clear();
    rw.copy(op);
    return true;
  });
}

}  // namespace tripy::flat

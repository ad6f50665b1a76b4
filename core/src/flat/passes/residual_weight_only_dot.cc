// A residual connection after a weight-only product is added by the product itself: where a
// weight-only product's result is read once, by an add of a value of its shape,
//
//   add(weight_only_dot(x, w, scale...), r)  ->  weight_only_dot(x, w, scale..., r) {residual}
//
// so that the kernel that added them (in a Llama layer, the add a residual's RMSNorm starts with)
// is left to the norm, which normed_weight_only_dot folds into the next product. Only where the
// backend's rule allows.
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {

std::optional<Graph> residual_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies) {
  const std::vector<int32_t> uses = graph.use_counts();
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& add = graph.ops[i];
    if (add.kind != OpKind::kElementwise || add.fn != EwOp::kAdd || add.operands.size() != 2) return false;
    for (int side = 0; side < 2; ++side) {
      const ValueId product = add.operands[side], r = add.operands[1 - side];
      const Op& src = graph.def(product);
      if (src.kind != OpKind::kKernel || src.kernel.kind != rt::KernelKind::kWeightOnlyDot ||
          src.kernel.weight_only_dot.residual || uses[product] != 1 || r == product)
        continue;
      rt::WeightOnlyFold added = weight_only_fold_case(graph, src);
      added.residual = true;
      if (applies && !applies(added)) continue;
      Op op = src;
      op.operands.push_back(r);
      op.kernel.weight_only_dot.residual = true;
      rw.set(add.result, rw.copy(op));
      return true;
    }
    return false;
  });
  if (!out) return out;
  return dce(*out);
}

}  // namespace tripy::flat

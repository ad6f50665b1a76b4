// Moves reduced dims last (a transpose before the reduction), so every reduction is a row
// reduction that a fused kernel can compute.
#include "flat/passes/passes.h"

namespace tripy::flat {

Graph canonicalize_reductions(const Graph& graph) {
  Graph out = empty_like(graph);
  std::vector<ValueId> map(graph.values.size(), -1);
  for (const Op& src : graph.ops) {
    Op op = src;
    for (ValueId& v : op.operands) v = map[v];
    const Value& val = graph.values[src.result];
    if (op.kind == OpKind::kReduce) {
      const Shape& in = out.values[op.operands[0]].shape;
      const int64_t rank = static_cast<int64_t>(in.size());
      const int64_t n = static_cast<int64_t>(op.dims.size());
      bool trailing = true;
      for (int64_t j = 0; j < n; ++j) trailing = trailing && op.dims[j] == rank - n + j;
      if (!trailing) {
        std::vector<int64_t> perm;
        std::vector<bool> reduced(rank, false);
        for (int64_t d : op.dims) reduced[d] = true;
        for (int64_t d = 0; d < rank; ++d) {
          if (!reduced[d]) perm.push_back(d);
        }
        for (int64_t d : op.dims) perm.push_back(d);
        Op t;
        t.kind = OpKind::kTranspose;
        t.operands = {op.operands[0]};
        t.dims = perm;
        if (src.origin) {
          auto o = std::make_shared<Origin>(*src.origin);
          o->reason = "move the reduced dims of " + (o->trace_op.empty() ? std::string("a reduction") : o->trace_op) +
                      " last";
          t.origin = o;
        }
        Shape tshape;
        for (int64_t d : perm) tshape.push_back(in[d]);
        DType dt = out.values[op.operands[0]].dtype;
        op.operands = {out.add(std::move(t), dt, tshape)};
        for (int64_t j = 0; j < n; ++j) op.dims[j] = rank - n + j;
      }
    }
    map[src.result] = out.add(std::move(op), val.dtype, val.shape);
  }
  finish_like(out, graph, map);
  return out;
}

}  // namespace tripy::flat

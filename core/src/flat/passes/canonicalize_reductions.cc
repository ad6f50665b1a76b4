// Moves reduced dims last (a transpose before the reduction), so every reduction is a row
// reduction that a fused kernel can compute.
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {

Graph canonicalize_reductions(const Graph& graph) {
  return rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    if (src.kind != OpKind::kReduce) return false;
    const ValueId x = rw[src.operands[0]];
    const Shape& in = rw.out().values[x].shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    const int64_t n = static_cast<int64_t>(src.dims.size());
    bool trailing = true;
    for (int64_t j = 0; j < n; ++j) trailing = trailing && src.dims[j] == rank - n + j;
    if (trailing) return false;
    std::vector<int64_t> perm;
    std::vector<bool> reduced(rank, false);
    for (int64_t d : src.dims) reduced[d] = true;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) perm.push_back(d);
    }
    for (int64_t d : src.dims) perm.push_back(d);
    Op t;
    t.kind = OpKind::kTranspose;
    t.operands = {x};
    t.dims = perm;
    if (src.origin) {
      auto o = std::make_shared<Origin>(*src.origin);
      o->reason = "move the reduced dims of " + (o->trace_op.empty() ? std::string("a reduction") : o->trace_op) +
                  " last";
      t.origin = o;
    }
    Shape tshape;
    for (int64_t d : perm) tshape.push_back(in[d]);
    const DType dt = rw.out().values[x].dtype;
    Op op = src;
    op.operands = {rw.add(std::move(t), dt, tshape)};
    for (int64_t j = 0; j < n; ++j) op.dims[j] = rank - n + j;
    const Value& val = graph.values[src.result];
    rw.set(src.result, rw.add(std::move(op), val.dtype, val.shape));
    return true;
  });
}

}  // namespace tripy::flat

// The two sides of a SwiGLU around weight-only products (a Llama MLP: y = gate_up(x), then
// down(SiLU(y[..., :K]) * y[..., K:])), so that the elementwise kernel between them, a launch of
// its own in every layer of a decode step, is gone. Each only where the backend's rule allows.
//
// gated_weight_only_dot: the down projection reads the gate and up halves itself,
//
//   weight_only_dot(mul(silu(slice(y, ..:K)), slice(y, K:2K)), w, scale...)
//     ->  weight_only_dot(y, w, scale...) {gated}
//
// and the kernel forms x as it reads it (rt::WeightOnlyDotAttrs::gated).
//
// gate_weight_only_output: the gate_up product writes that x itself,
//
//   mul(silu(slice(y, ..:H)), slice(y, H:2H)) with y = weight_only_dot(x, w, scale...)
//     ->  weight_only_dot(x, w, scale...) {gate_output}
//
// where nothing else reads y, its halves or the SiLU (rt::WeightOnlyDotAttrs::gate_output).
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

// Whether `s` is slice(y, [..., lo:hi]) of the last dim with every other dim whole, steps of 1;
// its operand y in `y`.
bool last_dim_slice(const Graph& g, const Op& s, int64_t lo, int64_t hi, ValueId* y) {
  if (s.kind != OpKind::kSlice || s.operands.size() != 1) return false;
  const Shape& in = g.values[s.operands[0]].shape;
  const size_t rank = in.size();
  if (rank == 0 || s.starts.size() != rank || s.limits.size() != rank || s.steps.size() != rank) return false;
  for (size_t d = 0; d < rank; ++d) {
    if (!s.steps[d].is_static() || s.steps[d].static_value() != 1) return false;
    const bool last = d + 1 == rank;
    if (!s.starts[d].is_static() || s.starts[d].static_value() != (last ? lo : 0)) return false;
    if (last ? !(s.limits[d].is_static() && s.limits[d].static_value() == hi) : !s.limits[d].same_as(in[d]))
      return false;
  }
  *y = s.operands[0];
  return true;
}

// The [..., 2K] value y whose halves make x = silu(y[..., :K]) * y[..., K:], or -1. With `uses`,
// only where y, its halves and the SiLU are read by x's op alone.
ValueId gate_source(const Graph& g, ValueId x, const std::vector<int32_t>* uses = nullptr) {
  const Shape& xs = g.values[x].shape;
  if (xs.empty() || !xs.back().is_static()) return -1;
  const int64_t K = xs.back().static_value();
  const Op& mul = g.def(x);
  if (mul.kind != OpKind::kElementwise || mul.fn != EwOp::kMul || mul.operands.size() != 2) return -1;
  for (int side = 0; side < 2; ++side) {
    const ValueId s = mul.operands[side], u = mul.operands[1 - side];
    const Op& silu = g.def(s);
    if (silu.kind != OpKind::kElementwise || silu.fn != EwOp::kSilu || silu.operands.size() != 1) continue;
    ValueId gate = -1, up = -1;
    if (!last_dim_slice(g, g.def(silu.operands[0]), 0, K, &gate) ||
        !last_dim_slice(g, g.def(u), K, 2 * K, &up) || gate != up)
      continue;
    const Value& y = g.values[gate];
    if (y.dtype != g.values[x].dtype || !y.shape.back().is_static() || y.shape.back().static_value() != 2 * K) continue;
    if (uses && ((*uses)[gate] != 2 || (*uses)[silu.operands[0]] != 1 || (*uses)[u] != 1 || (*uses)[s] != 1)) continue;
    return gate;
  }
  return -1;
}

}  // namespace

std::optional<Graph> gated_weight_only_dot(const Graph& graph, const WeightOnlyFoldRule& applies) {
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    if (src.kind != OpKind::kKernel || src.kernel.kind != rt::KernelKind::kWeightOnlyDot ||
        src.kernel.weight_only_dot.gated || src.operands.empty())
      return false;
    const ValueId x = src.operands[0];
    rt::WeightOnlyFold gate = weight_only_fold_case(graph, src);
    gate.gated = true;
    if (applies && !applies(gate)) return false;
    const ValueId y = gate_source(graph, x);
    if (y < 0) return false;
    Op op = src;
    op.operands[0] = y;  // a source value, mapped by copy with the others
    op.kernel.weight_only_dot.gated = true;
    rw.copy(op);
    return true;
  });
  if (!out) return out;
  return dce(*out);
}

std::optional<Graph> gate_weight_only_output(const Graph& graph, const WeightOnlyFoldRule& applies) {
  const std::vector<int32_t> uses = graph.use_counts();
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& mul = graph.ops[i];
    if (mul.kind != OpKind::kElementwise || mul.fn != EwOp::kMul) return false;
    const ValueId y = gate_source(graph, mul.result, &uses);
    if (y < 0) return false;
    const Op& src = graph.def(y);
    if (src.kind != OpKind::kKernel || src.kernel.kind != rt::KernelKind::kWeightOnlyDot ||
        src.kernel.weight_only_dot.gate_output || src.kernel.weight_only_dot.residual)
      return false;
    rt::WeightOnlyFold gate = weight_only_fold_case(graph, src);
    gate.gate_output = true;
    if (applies && !applies(gate)) return false;
    Op op = src;
    op.kernel.weight_only_dot.gate_output = true;
    const Value& z = graph.values[mul.result];
    for (ValueId& v : op.operands) v = rw[v];
    rw.set(mul.result, rw.add(std::move(op), z.dtype, z.shape));
    return true;
  });
  if (!out) return out;
  return dce(*out);
}

}  // namespace tripy::flat

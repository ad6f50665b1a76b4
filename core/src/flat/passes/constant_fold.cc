// Constant folding: an op whose operands are all constants is run once at compile time by the
// evaluator the compiler hands in (a one-op Program on the CPU backend, so folding and running
// share every kernel) and replaced by its result. Broadcasts (splats) and iotas stay symbolic: they cost nothing inside fused kernels, while a
// folded ones((4096, 4096)) would be 64 MiB of weights.
#include <algorithm>

#include "flat/passes/passes.h"

namespace tripy::flat {
namespace {

constexpr int64_t kMaxGrowth = 64 * 1024;  // elements a fold may add beyond its inputs

// The constant behind `v`: itself, or a broadcast of a constant (splats stay unfolded, but
// what consumes them may fold: sum(ones((4, 8)), 1) is a 4-element constant).
const Op* constant_behind(const Graph& g, ValueId v) {
  const Op* op = &g.def(v);
  while (op->kind == OpKind::kBroadcast) op = &g.def(op->operands[0]);
  return op->kind == OpKind::kConstant ? op : nullptr;
}

// Whether every use of `v` is an elementwise op or a reduction, through broadcasts: what fused
// kernels read (and convert) as they load.
bool only_fused_users(const Graph& g, const std::vector<std::vector<int32_t>>& users, ValueId v) {
  for (int32_t u : users[v]) {
    const Op& op = g.ops[u];
    if (op.kind == OpKind::kBroadcast ? !only_fused_users(g, users, op.result)
                                      : op.kind != OpKind::kElementwise && op.kind != OpKind::kReduce)
      return false;
  }
  return std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end();
}

// A transpose of the last two dims whose one use is a dot: GEMMs read it in place as a transposed
// operand (x @ W.T of a Linear), so folding it would only copy the weight at compile time and keep
// both layouts alive.
bool is_dot_operand_transpose(const Graph& g, const std::vector<std::vector<int32_t>>& users, const Op& op) {
  if (!swaps_last_two_dims(op) || users[op.result].size() != 1) return false;
  if (g.ops[users[op.result][0]].kind != OpKind::kDot) return false;
  return std::find(g.outputs.begin(), g.outputs.end(), op.result) == g.outputs.end();
}

bool worth_folding(const Graph& g, const std::vector<std::vector<int32_t>>& users, const Op& op) {
  if (op.kind == OpKind::kParameter || op.kind == OpKind::kConstant || op.operands.empty()) return false;
  // A plugin may have no CPU implementation (GPU only), and its cost is unknown: it runs when called.
  // Kernel ops are opaque too (a collective or a sampler must run where and when it is called).
  if (op.kind == OpKind::kPlugin || op.kind == OpKind::kKernel) return false;
  const Value& r = g.values[op.result];
  if (!is_static(r.shape)) return false;
  // Dead ops (a rewrite left them behind) are DCE's, not worth a compile-time evaluation.
  if (users[op.result].empty() && std::find(g.outputs.begin(), g.outputs.end(), op.result) == g.outputs.end())
    return false;
  int64_t in_elements = 0;
  for (ValueId v : op.operands) {
    const Op* c = constant_behind(g, v);
    if (c == nullptr || !is_static(g.values[v].shape)) return false;
    in_elements += c->constant.numel();
  }
  // A broadcast is free in the kernels that read it (and a dot takes a broadcast bias as its
  // epilogue); folding it would only make weights.
  if (op.kind == OpKind::kBroadcast || is_dot_operand_transpose(g, users, op)) return false;
  // Widening large weights (LayerNorm's, to float32) would only add bytes for fused kernels to read.
  if (op.kind == OpKind::kElementwise && op.fn == EwOp::kConvert && in_elements > kMaxGrowth / 64 &&
      dtype_size(r.dtype) > dtype_size(g.values[op.operands[0]].dtype) && only_fused_users(g, users, op.result))
    return false;
  return num_elements(r.shape).static_value() <= in_elements + kMaxGrowth;
}

// Copies the (broadcast) constant `v` into `mini` and returns its value there.
ValueId copy_constant(const Graph& g, ValueId v, Graph& mini) {
  const Op& def = g.def(v);
  Op c;
  c.kind = def.kind;
  c.dims = def.dims;
  if (def.kind == OpKind::kConstant) {
    c.constant = def.constant;
  } else {
    c.operands = {copy_constant(g, def.operands[0], mini)};
  }
  return mini.add(std::move(c), g.values[v].dtype, g.values[v].shape);
}

// Runs `op` over its constant operands: a graph of the op and copies of its operands. A reshape
// of a constant is a view of its bytes (dense, row-major): no evaluation, no copy, and a constant
// on a device stays there (a quantized model's scales, reshaped for each product's groups).
StatusOr<Tensor> evaluate(const Graph& g, const Op& op, const ConstantEvaluator& evaluator) {
  if (op.kind == OpKind::kReshape) {
    const Op& c = g.def(op.operands[0]);
    const std::vector<int64_t> shape = static_dims(g.values[op.result].shape);
    if (c.kind == OpKind::kConstant && c.constant.defined() && numel_of(shape) == c.constant.numel())
      return Tensor::borrow(c.constant.data(), c.constant.dtype(), shape, c.constant.device(), c.constant.owner());
  }
  Graph mini;
  Op copy = op;
  copy.operands.clear();
  for (ValueId v : op.operands) copy.operands.push_back(copy_constant(g, v, mini));
  const Value& r = g.values[op.result];
  mini.outputs.push_back(mini.add(std::move(copy), r.dtype, r.shape));
  return evaluator(mini);
}

}  // namespace

StatusOr<Graph> constant_fold(const Graph& graph, const ConstantEvaluator& evaluator) {
  Graph g = graph;
  bool changed = false;
  std::vector<std::vector<int32_t>> users(g.values.size());
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (ValueId v : g.ops[i].operands) users[v].push_back(static_cast<int32_t>(i));
  for (Op& op : g.ops) {
    if (!worth_folding(g, users, op)) continue;
    auto folded = evaluate(g, op, evaluator);
    if (!folded.ok()) {
      Status st = folded.status();
      return st.note("while folding constants for " + std::string(op_kind_name(op.kind)),
                     op.origin ? op.origin->where : nullptr);
    }
    Op c;
    c.kind = OpKind::kConstant;
    c.constant = std::move(folded.value());
    c.result = op.result;
    c.origin = op.origin;
    op = std::move(c);
    changed = true;
  }
  return changed ? dce(g) : g;
}

}  // namespace tripy::flat

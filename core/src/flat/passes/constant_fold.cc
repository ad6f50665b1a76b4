// Constant folding: an op whose operands are all constants is run once at compile time on the
// CPU backend (through a one-op Program, so folding and running share every kernel) and replaced
// by its result. Splats and iotas stay symbolic: they cost nothing inside fused kernels, while a
// folded ones((4096, 4096)) would be 64 MiB of weights.
#include "backend/backend.h"
#include "compiler/build_program.h"
#include "flat/passes/passes.h"

namespace tripy::flat {
namespace {

constexpr int64_t kMaxGrowth = 64 * 1024;  // elements a fold may add beyond its inputs

bool worth_folding(const Graph& g, const Op& op) {
  if (op.kind == OpKind::kParameter || op.kind == OpKind::kConstant || op.operands.empty()) return false;
  const Value& r = g.values[op.result];
  if (!is_static(r.shape)) return false;
  int64_t in_elements = 0;
  for (ValueId v : op.operands) {
    const Op& def = g.def(v);
    if (def.kind != OpKind::kConstant) return false;
    in_elements += def.constant.numel();
  }
  if (op.kind == OpKind::kBroadcast && g.def(op.operands[0]).constant.numel() == 1) return false;
  return num_elements(r.shape).static_value() <= in_elements + kMaxGrowth;
}

// Runs `op` over its constant operands.
StatusOr<Tensor> evaluate(const Graph& g, const Op& op) {
  Graph mini;
  Op copy = op;
  copy.operands.clear();
  for (ValueId v : op.operands) {
    const Op& def = g.def(v);
    Op c;
    c.kind = OpKind::kConstant;
    c.constant = def.constant;
    copy.operands.push_back(mini.add(std::move(c), g.values[v].dtype, g.values[v].shape));
  }
  const Value& r = g.values[op.result];
  mini.outputs.push_back(mini.add(std::move(copy), r.dtype, r.shape));
  TRIPY_ASSIGN_OR_RETURN(rt::Program program, compiler::build_program(mini));
  rt::Backend* cpu = rt::backend_for(Device::Kind::kCpu);
  if (!cpu) return Status(StatusCode::kUnavailable, "constant folding needs the CPU backend");
  auto shared = std::make_shared<const rt::Program>(std::move(program));
  TRIPY_ASSIGN_OR_RETURN(rt::Artifacts artifacts, cpu->build(*shared, rt::BuildOptions{}));
  TRIPY_ASSIGN_OR_RETURN(std::unique_ptr<rt::LoadedProgram> loaded, cpu->load(shared, artifacts));
  std::vector<int64_t> slots;
  shared->eval_shapes({}, slots);
  TRIPY_ASSIGN_OR_RETURN(std::vector<Tensor> out, loaded->run({}, slots));
  if (out.size() != 1) return internal_error("constant folding: expected one result");
  return out[0];
}

}  // namespace

StatusOr<Graph> constant_fold(const Graph& graph) {
  Graph g = graph;
  bool changed = false;
  for (Op& op : g.ops) {
    if (!worth_folding(g, op)) continue;
    auto folded = evaluate(g, op);
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

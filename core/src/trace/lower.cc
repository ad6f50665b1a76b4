// Lowering of a Trace subgraph into one FlatIR graph, and the Trace text printer.
#include "trace/lower.h"

#include <unordered_map>

#include "flat/constant_data.h"
#include "trace/op_def.h"
#include "tripy/executable.h"

namespace tripy::trace {
namespace {

// A constant's tensor in the compiler: a large one stays in the device memory that holds it (the
// executable shares it: no host round trip, no second copy of a model's weights); small ones, which
// the passes read as scalars, masks and scales, come to the host.
StatusOr<Tensor> constant_tensor(const Tensor& t) {
  if (flat::on_host(t) || t.nbytes() >= flat::kDeviceConstantMinBytes) return t;
  return copy_to(t, Device{});
}

}  // namespace

// Iterative, so long eager chains cannot overflow the stack.
std::vector<Node*> topo_order(const std::vector<NodeRef>& outputs) {
  std::vector<Node*> order;
  std::unordered_map<Node*, bool> done;  // false: on the stack, true: emitted
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& out : outputs) {
    if (done.count(out.get())) continue;
    stack.push_back({out.get(), 0});
    done[out.get()] = false;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      bool leaf = n->evaluated() || n->input_index >= 0;
      if (!leaf && next < n->inputs.size()) {
        Node* child = n->inputs[next++].get();
        if (!done.count(child)) {
          done[child] = false;
          stack.push_back({child, 0});
        }
        continue;
      }
      done[n] = true;
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

StatusOr<Lowered> lower_to_flat(const std::vector<NodeRef>& outputs, LowerMode mode,
                                const std::vector<NodeRef>& compile_inputs) {
  Lowered result;
  flat::Graph& g = result.graph;
  std::unordered_map<const Node*, flat::ValueId> values;
  if (mode == LowerMode::kCompile) {
    for (const auto& in : compile_inputs)
      if (in->symbols) g.symbols = *in->symbols;
    for (size_t i = 0; i < compile_inputs.size(); ++i) {
      const Node& n = *compile_inputs[i];
      flat::Op op;
      op.kind = flat::OpKind::kParameter;
      op.index = static_cast<int32_t>(i);
      LowerCtx ctx(g, n, {});
      g.input_names.push_back(n.input_name);
      if (n.dim_value) {
        // A shape value: the parameter is a host scalar that only the shape program reads; the
        // graph uses the symbol it defines, also for the value as data.
        op.shape_symbol = n.dim_value->symbol_id();
        g.inputs.push_back(ctx.emit(std::move(op), DType::kInt64, {}));
        values[&n] = ctx.size_value(*n.dim_value);
        continue;
      }
      values[&n] = ctx.emit(std::move(op), n.dtype, n.shape);
      g.inputs.push_back(values[&n]);
    }
  }
  for (Node* n : topo_order(outputs)) {
    if (values.count(n)) continue;
    LowerCtx ctx(g, *n, {});
    flat::Op op;
    if (n->evaluated() && mode == LowerMode::kEager) {
      op.kind = flat::OpKind::kParameter;
      op.index = static_cast<int32_t>(result.eager_inputs.size());
      values[n] = ctx.emit(std::move(op), n->dtype, n->shape);
      g.inputs.push_back(values[n]);
      g.input_names.push_back(n->name());
      result.eager_inputs.push_back(std::static_pointer_cast<Node>(n->shared_from_this()));
    } else if (n->evaluated()) {
      op.kind = flat::OpKind::kConstant;
      TRIPY_ASSIGN_OR_RETURN(op.constant, constant_tensor(n->value));
      values[n] = ctx.emit(std::move(op), n->dtype, n->shape);
    } else if (n->input_index >= 0) {
      return invalid_argument(
          "Cannot evaluate a tensor that depends on a runtime input of tp.compile: inside a compiled function, "
          "values are only known when the executable runs.",
          n->source);
    } else {
      std::vector<flat::ValueId> ins;
      for (const auto& in : n->inputs) ins.push_back(values.at(in.get()));
      LowerCtx node_ctx(g, *n, std::move(ins));
      auto v = n->def->lower(node_ctx);
      if (!v.ok()) return v.status();
      values[n] = v.value();
    }
  }
  for (const auto& out : outputs) g.outputs.push_back(values.at(out.get()));
  return result;
}

std::string trace_str(const std::vector<NodeRef>& outputs) {
  std::string s;
  for (Node* n : topo_order(outputs)) {
    std::string rhs;
    if (n->input_index >= 0) rhs = "input(" + n->input_name + ")";
    else if (n->evaluated()) rhs = "data";
    else {
      rhs = n->def->name + "(";
      for (size_t i = 0; i < n->inputs.size(); ++i) rhs += (i ? ", " : "") + n->inputs[i]->name();
      rhs += ")";
    }
    s += n->describe() + " = " + rhs + "\n";
  }
  return s;
}

}  // namespace tripy::trace

// Trace -> FlatIR: collects the subgraph that produces the requested nodes and lowers each node
// through its OpDef. Eager mode and tp.compile differ only in what evaluated tensors become; both
// compile the result in the layer above (compiler/eager.h).
#pragma once

#include <string>
#include <vector>

#include "flat/ir.h"
#include "trace/node.h"

namespace tripy::trace {

enum class LowerMode {
  kEager,    // evaluated nodes are runtime inputs (so the compiled graph is reusable)
  kCompile,  // evaluated nodes are frozen constants; only InputInfo nodes are runtime inputs
};

struct Lowered {
  flat::Graph graph;
  std::vector<NodeRef> eager_inputs;  // kEager: the evaluated nodes, in parameter order
};

// Post-order over the subgraph producing `outputs`, stopping at evaluated nodes and runtime
// inputs (which lowering turns into parameters, in this order).
std::vector<Node*> topo_order(const std::vector<NodeRef>& outputs);

StatusOr<Lowered> lower_to_flat(const std::vector<NodeRef>& outputs, LowerMode mode,
                                const std::vector<NodeRef>& compile_inputs = {});

// Text form of the Trace subgraph that produces `outputs` (for the `trace` log flag).
std::string trace_str(const std::vector<NodeRef>& outputs);

}  // namespace tripy::trace

// Checks of an ONNX graph as a graph (onnx_model.h): names defined once and before they are read,
// no cycles, outputs defined. Kept apart from the wire format so it can be read on its own.
#pragma once

#include <string>
#include <vector>

#include "onnx/onnx_model.h"

namespace tripy::onnx {

// Puts `g.nodes` in an order in which every name a node reads is defined before it (the file's
// order where that already holds) and sets `g.inputs` to the `declared` inputs that are not
// initializers. Returns "" or what is wrong: a name defined twice, a name read that nothing defines
// (allowed when `may_read_outer`: a subgraph reads the names around it), a cycle, an output that
// nothing defines.
std::string order_graph(Graph& g, std::vector<ValueInfo>& declared, bool may_read_outer);

}  // namespace tripy::onnx

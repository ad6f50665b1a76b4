// Eager evaluation and tp.compile's entry: Trace lowering (trace/lower.h) followed by the
// compiler's back half (compile_graph). They live here, above the Trace layer, so that Trace
// knows nothing of compiling.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/eager_cache.h"
#include "trace/node.h"
#include "tripy/executable.h"
#include "tripy/status.h"

namespace tripy::compiler {

// The evaluation lock, for reading the shared trace graph (a node's value, its inputs) while
// another thread may be evaluating: evaluation writes values and detaches inputs under it.
std::unique_lock<std::recursive_mutex> lock_graph(bool wait = true);

// Compiles (or finds in the cache) the subgraph producing `node`, runs it, and stores the result
// in node->value.
Status evaluate(const trace::NodeRef& node, const CompileOptions& options);
// Whether the subgraph producing `node` reads a runtime input of tp.compile (so has no value while
// tracing). Immediate for one op over values, the usual eager step. The caller holds lock_graph().
bool reads_compile_input(const trace::NodeRef& node);
// tp.compile's frozen parameters (a Module's tensors, evaluated once before tracing): a device
// tensor computed from no device values and without GEMMs or convolutions (ones, iota, tril:
// placeholders, causal masks) is computed by the CPU backend and copied to its device, since a
// one-off value is not worth a device kernel compile (a causal mask: 0.8 s of NVRTC in a fresh
// process, a few ms on the CPU). Otherwise, or where the CPU cannot compute it, as evaluate().
Status evaluate_parameter(const trace::NodeRef& node, const CompileOptions& options);

// tp.compile: lowers the traced function (under the evaluation lock) and compiles it (without).
StatusOr<Executable> compile_trace(const std::vector<trace::NodeRef>& outputs, const std::vector<trace::NodeRef>& inputs,
                                   const std::vector<std::string>& output_names, const CompileOptions& options);

}  // namespace tripy::compiler

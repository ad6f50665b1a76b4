// The compiler's back half: FlatIR graph -> passes -> Program -> backend build -> Executable.
// Trace lowering (the front half) produces the graph; eager mode and tp.compile both end here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flat/ir.h"
#include "tripy/executable.h"
#include "tripy/status.h"

namespace tripy {

struct CompileOptions {
  Device device;
  int optimization_level = 3;
  // Names of the graph's outputs ("return", "return[0]", ...), stored in the Program.
  std::vector<std::string> output_names;
  // Called with (stage, text) after each stage ("flat", "flat.optimized", "program", ...) when set;
  // the frontend's logger and TRIPY_DEBUG use it.
  std::function<void(const std::string&, const std::string&)> dump;
  // Which stages `dump` shows, when not all (eager evaluation asks only for those its flags show,
  // so that the rest is never formatted).
  std::function<bool(const std::string&)> dump_wanted;
  bool wants(const std::string& stage) const { return dump && (!dump_wanted || dump_wanted(stage)); }
  // Runtime inputs (by number) declared with tp.InputInfo(donate=True): updated in place.
  std::vector<int32_t> donated_inputs;
  // Seconds the caller spent lowering the trace: the first line of the "timing" dump.
  double lowering_seconds = 0;
};

StatusOr<Executable> compile_graph(flat::Graph graph, const CompileOptions& options);

// Runs a graph without parameters on the CPU backend (through a Program, so folding and running
// share every kernel) and returns its one output: the evaluator of flat::constant_fold.
StatusOr<Tensor> evaluate_constant_graph(const flat::Graph& graph);

}  // namespace tripy

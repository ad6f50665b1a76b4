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
  // Runtime inputs (by number) declared with tp.InputInfo(donate=True): updated in place.
  std::vector<int32_t> donated_inputs;
  // Channels-last convolutions (flat::channels_last). kAuto: on GPUs for float16 and bfloat16, on
  // the CPU for chains of three or more float32 convolutions, unless TRIPY_CHANNELS_LAST=0;
  // TRIPY_CHANNELS_LAST=1 (or kAll) applies it to every float convolution on every device, so
  // tests run the channels-last kernels on the CPU too.
  enum class ChannelsLast { kAuto, kOff, kAll } channels_last = ChannelsLast::kAuto;
  // Seconds the caller spent lowering the trace: the first line of the "timing" dump.
  double lowering_seconds = 0;
};

StatusOr<Executable> compile_graph(flat::Graph graph, const CompileOptions& options);

// Runs a graph without parameters on the CPU backend (through a Program, so folding and running
// share every kernel) and returns its one output: the evaluator of flat::constant_fold.
StatusOr<Tensor> evaluate_constant_graph(const flat::Graph& graph);

}  // namespace tripy

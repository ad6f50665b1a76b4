// FlatIR graph -> rt::Program: the shape program, input specs and run-time checks, buffers for
// every value a kernel writes or reads, kernels from the fusion plan, and the arena layout.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flat/ir.h"
#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::compiler {

struct BuildProgramOptions {
  std::vector<std::string> output_names;  // one per graph output, or empty for "" names
  // Called with the fusion plan's text (fusion_plan_str) when set, for the "fusion" dump.
  std::function<void(const std::string&)> dump_fusion;
  // Runtime inputs (by number) whose memory the program may update in place: an update_slice
  // whose operand is such an input, read by nothing else, writes there, and when its result is an
  // output that output is the input's memory (rt::BufferDesc::donor).
  std::vector<int32_t> donated_inputs;
  // Where the program runs: a constant in another device's memory is copied to the host (the
  // backend uploads host constants when it loads the program; those in its own memory it shares).
  Device device;
};

// The graph should be optimised already (passes); this reorders reductions for fusion itself.
StatusOr<rt::Program> build_program(const flat::Graph& graph, const BuildProgramOptions& options = {});

// A readable listing of a program (shape program, buffers, kernels with their fused programs),
// for logs and tests.
std::string program_str(const rt::Program& program);

}  // namespace tripy::compiler

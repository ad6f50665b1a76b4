// Fusion planning: partitions a FlatIR graph into kernels. Elementwise chains, broadcasts, iotas,
// scalar splats and row reductions over trailing dims share one fused kernel per domain; a dot
// absorbs a following bias add and relu/gelu, a convolution also a residual add; reshapes become
// aliases; the rest (attention among them) are kernels of their own. build_program turns the plan
// into rt::Kernels over buffers.
#pragma once

#include <string>
#include <vector>

#include "flat/ir.h"
#include "runtime/program.h"

namespace tripy::flat {

enum class GroupKind : uint8_t { kFused, kDot, kTranspose, kSlice, kConcat, kGather, kAlias, kAttention, kConv,
                                 kUpdateSlice, kPlugin, kPool };

struct FusionGroup {
  GroupKind kind = GroupKind::kFused;
  std::vector<int32_t> ops;      // the graph ops this kernel computes, in graph order
  std::vector<ValueId> inputs;   // values the kernel reads, in kernel-input order
  std::vector<ValueId> outputs;  // values the kernel writes, in kernel-output order
  // kFused: the domain it iterates over and its program (FusedProgram::domain is left empty:
  // build_program turns `domain` into slots).
  Shape domain;
  rt::FusedProgram fused;
  // kFused: per input, the slice read in place (starts, sizes), or empty shapes for the whole
  // value (build_program turns them into FusedProgram::input_windows).
  std::vector<std::pair<Shape, Shape>> windows;
  // kDot: epilogue and operand transposes folded in (inputs are lhs, rhs[, bias]).
  rt::DotAttrs dot;
  // kConv: the op's attributes plus the epilogue folded in (inputs are x, w[, bias][, residual]).
  rt::ConvAttrs conv;
  std::string name;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in execution order
};

// Reductions must be over trailing dims (run canonicalize_reductions first).
StatusOr<FusionPlan> plan_fusion(const Graph& graph);
// One line per kernel: "fused[%3, %4] domain=(s0, 8) reduce_from=1 <- %0, %2", for tests and logs.
std::string fusion_plan_str(const Graph& graph, const FusionPlan& plan);

}  // namespace tripy::flat

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

// What a group becomes: the kernel of the same rt::KernelKind, or (kAlias) a reshape that launches
// nothing and only names its input's bytes. Made from the kernel kind list, so it cannot drift.
enum class GroupKind : uint8_t {
#define TRIPY_GROUP_KIND_(Enum, name, Attrs, member) k##Enum,
  TRIPY_KERNEL_KINDS(TRIPY_GROUP_KIND_)
#undef TRIPY_GROUP_KIND_
  kAlias,
};
// The kernel kind of a group that is not kAlias.
inline rt::KernelKind kernel_kind_of(GroupKind kind) { return static_cast<rt::KernelKind>(kind); }
// "fused", "dot", ... as rt::kernel_kind_name spells them, and "alias".
inline const char* group_kind_name(GroupKind kind) {
  return kind == GroupKind::kAlias ? "alias" : rt::kernel_kind_name(kernel_kind_of(kind));
}

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
  // kConvolution: the op's attributes plus the epilogue folded in (inputs are x, w[, bias][, residual]).
  rt::ConvolutionAttrs convolution;
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

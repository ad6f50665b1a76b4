// The fusion planner's state, shared by the sweep that groups ops (fusion.cc) and the code
// generator that turns groups into fused programs and kernel interfaces (fusion_codegen.cc).
#pragma once

#include <map>
#include <vector>

#include "flat/passes/fusion.h"

namespace tripy::flat {

// A convert of a constant (float16 weights that LayerNorm applies in float32): fused kernels load
// the constant and convert it as they read, like a broadcast.
inline bool is_convert_of_constant(const Graph& g, const Op& op) {
  return op.kind == OpKind::kElementwise && op.fn == EwOp::kConvert && g.def(op.operands[0]).kind == OpKind::kConstant;
}

// A slice with unit steps of a value that has bytes (not itself computed inline): fused kernels
// read it in place through a window of its operand's buffer instead of a copy kernel.
inline bool is_slice_read_in_place(const Graph& g, const Op& op) {
  if (op.kind != OpKind::kSlice) return false;
  for (const Dim& s : op.steps)
    if (!s.is_static() || s.static_value() != 1) return false;
  const Op& src = g.def(op.operands[0]);
  return src.kind != OpKind::kBroadcast && src.kind != OpKind::kIota && src.kind != OpKind::kSlice &&
         !is_convert_of_constant(g, src);
}

class Planner {
 public:
  explicit Planner(const Graph& g);
  Status sweep();
  StatusOr<FusionPlan> finish();

 private:
  bool is_virtual(ValueId v) const;
  // The last group that must run before a fused kernel can read `v` (virtual values inline,
  // reshapes seen through), or -1 for inputs/constants.
  int32_t dep_group(ValueId v) const;
  // The group that writes `v`'s bytes: its computing group, or for a virtual its materialisation.
  int32_t producer_group(ValueId v) const;
  // producer_group, seen through reshapes (aliases launch nothing).
  int32_t ready_group(ValueId v) const;
  int32_t new_group(GroupKind kind, int32_t op_index);
  // Gives a virtual value bytes (a small fused kernel) when a non-fused kernel or output reads it.
  ValueId ensure_real(ValueId v);
  bool usable_at_element_level(ValueId v, int32_t gi) const;
  bool usable_at_row_level(ValueId v, int32_t gi) const;
  // How the register group `gi`'s fused program gives `v` varies over the domain: the levels
  // rt::analyze_fused_program checks. Splat constants never vary; reductions, and what is computed
  // only from them and constants, vary per row; loads and iotas per element. Only a per-element or
  // never-varying register may be stored into an element (domain-shaped) output.
  enum class Varies : uint8_t { kNever, kPerRow, kPerElement };
  Varies varies_in(ValueId v, int32_t gi) const;
  Varies operands_vary(const Op& op, int32_t gi) const;  // the most any operand varies
  bool try_join(int32_t op_index);
  int64_t result_bytes_bound(const Op& op) const;
  // A result this small may be computed early in an earlier kernel (Planner::try_join).
  static constexpr int64_t kSmallResultBytes = 1024;
  bool try_join_group(int32_t op_index, int32_t gi);
  void start_fused(int32_t op_index);
  bool is_dot_transpose(int32_t op_index) const;
  int32_t only_user(ValueId v) const;
  void plan_dot(int32_t op_index);
  bool fold_float8_rescale(int32_t gi, ValueId* cur);  // a float8 dot's rescale, its scale
  void plan_conv(int32_t op_index);  // fusion_conv.cc
  void absorb(int32_t gi, int32_t op_index);
  // A dot's or a convolution's group once its epilogues are absorbed: its ops in graph order, its
  // inputs, and `result` (the last epilogue's value, or the product's) as what it writes.
  void finish_epilogues(int32_t gi, std::vector<ValueId> inputs, ValueId result);
  bool available_before(ValueId v, int32_t op_index) const;
  // The activation op `u` applies to `x` that an epilogue can take, or kNone.
  rt::Activation epilogue_activation(int32_t u, ValueId x) const;

  // fusion_codegen.cc
  Status generate_fused(int32_t gi);
  std::string kernel_name(const FusionGroup& grp) const;

  const Graph& g_;
  std::vector<int32_t> uses_;
  std::vector<std::vector<int32_t>> users_;  // op indices reading each value
  std::vector<int32_t> group_of_;            // computing group of each real value, -1 if none
  std::vector<int32_t> materialized_;        // per virtual value: its materialising group or -1
  std::vector<bool> row_level_;              // per value in a fused group: per-row (reduced)
  std::vector<Varies> varies_;               // per value in a fused group: how its register varies
  std::vector<bool> absorbed_;               // per op: folded into a dot kernel
  std::map<int32_t, ValueId> dot_result_;    // per dot group: the value it writes
  std::vector<std::map<ValueId, int32_t>> regs_;  // per fused group: register of each value
  std::vector<FusionGroup> groups_;
};

}  // namespace tripy::flat

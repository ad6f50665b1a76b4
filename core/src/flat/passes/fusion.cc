// Fusion planning: a single sweep in graph order assigns each op to a kernel. Broadcasts, iotas,
// converts of constants and unit-step slices are "virtual" (computed inline by each fused kernel
// that reads them; a slice is read in place)
// and only materialised when a non-fused kernel or an output needs their bytes. Instruction
// selection for fused kernels lives in fusion_codegen.cc.
#include "flat/passes/fusion.h"

#include <algorithm>
#include <cmath>

#include "flat/constant_data.h"
#include "flat/passes/fusion_internal.h"

namespace tripy::flat {
namespace {

bool is_splat_constant(const Op& op) {
  return op.kind == OpKind::kConstant && op.constant.defined() && op.constant.numel() == 1 && on_host(op.constant);
}

// The value of `v` when it is a scalar splat (a one-element constant, or a broadcast of one).
bool splat_value(const Graph& g, ValueId v, double* out) {
  const Op* op = &g.def(v);
  while (op->kind == OpKind::kBroadcast) op = &g.def(op->operands[0]);
  if (!is_splat_constant(*op)) return false;
  *out = read_element(op->constant, 0);
  return true;
}

bool is_splat_of(const Graph& g, ValueId v, double want, double tol = 0) {
  double x;
  return splat_value(g, v, &x) && std::abs(x - want) <= tol;
}

// The kind of the kernel that an op planned on its own (not fused, not a dot or a convolution)
// becomes; a reshape is an alias of its operand's bytes.
GroupKind own_kernel_kind(const Op& op) {
  switch (op.kind) {
    case OpKind::kKernel: return static_cast<GroupKind>(op.kernel.kind);
    case OpKind::kAttention: return GroupKind::kAttention;
    case OpKind::kPlugin: return GroupKind::kPlugin;
    case OpKind::kPooling: return GroupKind::kPooling;
    case OpKind::kUpdateSlice: return GroupKind::kUpdateSlice;
    case OpKind::kReshape: return GroupKind::kAlias;
    case OpKind::kTranspose: return GroupKind::kTranspose;
    case OpKind::kSlice: return GroupKind::kSlice;
    case OpKind::kConcatenate: return GroupKind::kConcatenate;
    default: return GroupKind::kGather;  // kGather, the last kind planned alone
  }
}

}  // namespace

Planner::Planner(const Graph& g) : g_(g) {
  size_t n = g.values.size();
  uses_ = g.use_counts();
  users_.assign(n, {});
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (ValueId v : g.ops[i].operands) users_[v].push_back(static_cast<int32_t>(i));
  }
  group_of_.assign(n, -1);
  materialized_.assign(n, -1);
  row_level_.assign(n, false);
  varies_.assign(n, Varies::kNever);
  absorbed_.assign(g.ops.size(), false);
}

bool Planner::is_virtual(ValueId v) const {
  const Op& op = g_.def(v);
  return op.kind == OpKind::kBroadcast || op.kind == OpKind::kIota || is_convert_of_constant(g_, op) ||
         is_slice_read_in_place(g_, op);
}

int32_t Planner::dep_group(ValueId v) const {
  if (is_virtual(v)) {
    const Op& op = g_.def(v);
    return op.kind == OpKind::kIota ? -1 : dep_group(op.operands[0]);
  }
  return ready_group(v);
}

int32_t Planner::ready_group(ValueId v) const {
  int32_t p = producer_group(v);
  if (p >= 0 && groups_[p].kind == GroupKind::kAlias) return ready_group(groups_[p].inputs[0]);
  return p;
}

int32_t Planner::new_group(GroupKind kind, int32_t op_index) {
  FusionGroup grp;
  grp.kind = kind;
  if (op_index >= 0) grp.ops.push_back(op_index);
  groups_.push_back(std::move(grp));
  return static_cast<int32_t>(groups_.size() - 1);
}

ValueId Planner::ensure_real(ValueId v) {
  if (!is_virtual(v)) return v;
  if (materialized_[v] < 0) {
    int32_t gi = new_group(GroupKind::kFused, g_.values[v].def);
    groups_[gi].domain = g_.values[v].shape;
    groups_[gi].fused.reduce_from = static_cast<int32_t>(g_.values[v].shape.size());
    materialized_[v] = gi;
  }
  return v;
}

int32_t Planner::producer_group(ValueId v) const {
  if (is_virtual(v)) return materialized_[v];
  return group_of_[v];
}

// Whether `v`, read by an element-level instruction of group `gi`, can be computed or loaded
// there without reading the group's own element-level values through a broadcast.
bool Planner::usable_at_element_level(ValueId v, int32_t gi) const {
  const FusionGroup& grp = groups_[gi];
  if (group_of_[v] == gi) return !row_level_[v];
  if (!is_virtual(v)) return dep_group(v) != gi;  // not a reshape of what this kernel writes
  const Op& op = g_.def(v);
  if (op.kind == OpKind::kIota) return true;
  ValueId x = op.operands[0];
  if (op.kind == OpKind::kSlice) return dep_group(x) != gi;  // not a window on what this kernel writes
  if (group_of_[x] == gi) {
    // Only a row result broadcast back along the reduced axes is free.
    int32_t k = grp.fused.reduce_from;
    if (!row_level_[x] || static_cast<int32_t>(op.dims.size()) != k) return false;
    for (int32_t i = 0; i < k; ++i) {
      if (op.dims[i] != i) return false;
    }
    return true;
  }
  return usable_at_element_level(x, gi);
}

bool Planner::usable_at_row_level(ValueId v, int32_t gi) const {
  if (group_of_[v] == gi) return row_level_[v];
  double x;
  return splat_value(g_, v, &x);
}

// Mirrors FusedCodegen::mapped: what it emits a constant for, what it loads, and where a
// broadcast reads a register of the group itself.
Planner::Varies Planner::varies_in(ValueId v, int32_t gi) const {
  if (group_of_[v] == gi) return varies_[v];
  const Op& op = g_.def(v);
  if (is_splat_constant(op)) return Varies::kNever;
  if (op.kind == OpKind::kIota) {
    const Dim& len = g_.values[v].shape[op.dims[0]];
    return len.is_static() && len.static_value() == 1 ? Varies::kNever : Varies::kPerElement;
  }
  if (op.kind == OpKind::kBroadcast || is_convert_of_constant(g_, op)) return varies_in(op.operands[0], gi);
  return Varies::kPerElement;
}

Planner::Varies Planner::operands_vary(const Op& op, int32_t gi) const {
  Varies most = Varies::kNever;
  for (ValueId v : op.operands) most = std::max(most, varies_in(v, gi));
  return most;
}

// The most bytes `op`'s result can take (every dim at its upper bound).
int64_t Planner::result_bytes_bound(const Op& op) const {
  const Value& v = g_.values[op.result];
  int64_t n = dtype_size(v.dtype);
  for (const Dim& d : v.shape) n *= std::max<int64_t>(1, d.upper_bound(g_.symbols));
  return n;
}

bool Planner::try_join(int32_t op_index) {
  const Op& op = g_.ops[op_index];
  int32_t gi = -1;
  for (ValueId v : op.operands) gi = std::max(gi, dep_group(v));
  if (gi >= 0 && groups_[gi].kind == GroupKind::kFused && try_join_group(op_index, gi)) return true;
  // The kernel that computes the last operand cannot take the op (no fused kernel computes one,
  // or its domain differs, as for x * broadcast(cos) after the kernel of cos): any fused kernel
  // that runs after all the operands can take it over the same domain, which saves a launch and a
  // round trip through memory. An op of inputs and constants alone with a large result only joins
  // the last kernel: an earlier one would compute it before the kernels between and keep it alive
  // across them (each layer's dequantized weight, as large as the weight, from the first layer on).
  // A small one (a decode step's position arithmetic) joins wherever it fits, saving its launch.
  const int32_t first = gi >= 0 || result_bytes_bound(op) <= kSmallResultBytes
                            ? gi + 1
                            : std::max<int32_t>(0, static_cast<int32_t>(groups_.size()) - 1);
  for (int32_t j = static_cast<int32_t>(groups_.size()) - 1; j >= first; --j) {
    if (groups_[j].kind == GroupKind::kFused && try_join_group(op_index, j)) return true;
  }
  return false;
}

bool Planner::try_join_group(int32_t op_index, int32_t gi) {
  const Op& op = g_.ops[op_index];
  if (groups_[gi].kind != GroupKind::kFused) return false;
  FusionGroup& grp = groups_[gi];
  const Shape& d = grp.domain;
  const int32_t rank = static_cast<int32_t>(d.size());
  const Value& r = g_.values[op.result];
  if (op.kind == OpKind::kReduce) {
    const Shape& in = g_.values[op.operands[0]].shape;
    int32_t k = rank - static_cast<int32_t>(op.dims.size());
    if (op.dims.empty() || !same_shape(in, d)) return false;
    if (grp.fused.reduce_from != rank && grp.fused.reduce_from != k) return false;
    if (!usable_at_element_level(op.operands[0], gi)) return false;
    grp.fused.reduce_from = k;
    row_level_[op.result] = true;
    varies_[op.result] = Varies::kPerRow;
  } else if (same_shape(r.shape, d)) {
    for (ValueId v : op.operands) {
      if (!usable_at_element_level(v, gi)) return false;
    }
    // An element value computed only from this kernel's row results (and constants), as in
    // softmax(tp.ones(...)) or exp(broadcast(max(x))), would get a per-row register, which the
    // kernel cannot store into an element output. A kernel of its own loads those row results.
    const Varies vary = operands_vary(op, gi);
    if (vary == Varies::kPerRow) return false;
    varies_[op.result] = vary;
  } else {
    int32_t k = grp.fused.reduce_from;
    if (k == rank || !same_shape(r.shape, Shape(d.begin(), d.begin() + k))) return false;
    for (ValueId v : op.operands) {
      if (!usable_at_row_level(v, gi)) return false;
    }
    row_level_[op.result] = true;
    varies_[op.result] = operands_vary(op, gi);
  }
  grp.ops.push_back(op_index);
  group_of_[op.result] = gi;
  return true;
}

void Planner::start_fused(int32_t op_index) {
  const Op& op = g_.ops[op_index];
  int32_t gi = new_group(GroupKind::kFused, op_index);
  FusionGroup& grp = groups_[gi];
  if (op.kind == OpKind::kReduce) {
    grp.domain = g_.values[op.operands[0]].shape;
    grp.fused.reduce_from = static_cast<int32_t>(grp.domain.size() - op.dims.size());
    row_level_[op.result] = !op.dims.empty();
    varies_[op.result] = Varies::kPerRow;
  } else {
    grp.domain = g_.values[op.result].shape;
    grp.fused.reduce_from = static_cast<int32_t>(grp.domain.size());
    varies_[op.result] = operands_vary(op, gi);
  }
  group_of_[op.result] = gi;
}

// A transpose that swaps the last two dims and feeds only a dot becomes a flag of that dot.
bool Planner::is_dot_transpose(int32_t op_index) const {
  const Op& op = g_.ops[op_index];
  if (!swaps_last_two_dims(op) || uses_[op.result] != 1 || users_[op.result].size() != 1) return false;
  return g_.ops[users_[op.result][0]].kind == OpKind::kDot;
}

// The single op using `v`, when `v` has exactly one use and is not an output.
int32_t Planner::only_user(ValueId v) const {
  if (uses_[v] != 1 || users_[v].size() != 1) return -1;
  return users_[v][0];
}

void Planner::plan_dot(int32_t op_index) {
  const Op& op = g_.ops[op_index];
  // Operands first: materialising a broadcast operand adds a kernel that must run before this one.
  std::vector<ValueId> inputs;
  rt::DotAttrs attrs;
  std::vector<int32_t> transposes;
  for (int side = 0; side < 2; ++side) {
    ValueId v = op.operands[side];
    const Op& def = g_.def(v);
    if (def.kind == OpKind::kTranspose && absorbed_[g_.values[v].def]) {
      (side == 0 ? attrs.transpose_lhs : attrs.transpose_rhs) = true;
      transposes.push_back(g_.values[v].def);
      v = def.operands[0];
    }
    inputs.push_back(ensure_real(v));
  }
  int32_t gi = new_group(GroupKind::kDot, op_index);
  groups_[gi].dot = attrs;
  for (int32_t t : transposes) groups_[gi].ops.push_back(t);
  ValueId cur = op.result;
  if (fold_float8_rescale(gi, &cur)) {
    finish_epilogues(gi, std::move(inputs), cur);
    dot_result_[gi] = cur;
    return;
  }
  const int64_t rank = static_cast<int64_t>(g_.values[cur].shape.size());
  // Bias: add(dot, broadcast(bias[N], dims = [rank - 1])), in either operand order.
  int32_t u = only_user(cur);
  if (u >= 0 && g_.ops[u].kind == OpKind::kElementwise && g_.ops[u].fn == EwOp::kAdd) {
    const Op& add = g_.ops[u];
    ValueId other = add.operands[0] == cur ? add.operands[1] : add.operands[0];
    const Op& b = g_.def(other);
    if (add.operands[0] != add.operands[1] && b.kind == OpKind::kBroadcast && b.dims.size() == 1 &&
        b.dims[0] == rank - 1 && !is_virtual(b.operands[0]) && available_before(b.operands[0], op_index) &&
        g_.values[b.operands[0]].shape.size() == 1 &&
        g_.values[b.operands[0]].shape[0].same_as(g_.values[cur].shape.back())) {
      groups_[gi].dot.has_bias = true;
      inputs.push_back(b.operands[0]);
      absorb(gi, u);
      cur = add.result;
    }
  }
  // relu or GELU (cuBLASLt and the CPU GEMM take no other).
  u = only_user(cur);
  const rt::Activation act = u >= 0 ? epilogue_activation(u, cur) : rt::Activation::kNone;
  if (act == rt::Activation::kRelu || act == rt::Activation::kGelu) {
    groups_[gi].dot.activation = act;
    absorb(gi, u);
    cur = g_.ops[u].result;
  }
  finish_epilogues(gi, std::move(inputs), cur);
  dot_result_[gi] = cur;
}

// float8 operands: the rescale that flat::quantized_dot writes after their GEMM (a multiply by a
// float32 scalar constant, then a convert to float16 or bfloat16 where the dequantized dtype is
// one) becomes the GEMM's own (DotAttrs::scale, the result written in that dtype), so the float32
// sums never reach memory. Only alone: with a scale the dot takes no bias or activation.
bool Planner::fold_float8_rescale(int32_t gi, ValueId* cur) {
  const Op& dot = g_.def(*cur);
  if (g_.values[dot.operands[0]].dtype != DType::kFloat8E4M3 || g_.values[*cur].dtype != DType::kFloat32) return false;
  const int32_t mul = only_user(*cur);
  if (mul < 0 || g_.ops[mul].kind != OpKind::kElementwise || g_.ops[mul].fn != EwOp::kMul) return false;
  const Op& m = g_.ops[mul];
  const ValueId other = m.operands[0] == *cur ? m.operands[1] : m.operands[0];
  double scale = 0.0;
  if (other == *cur || g_.values[other].dtype != DType::kFloat32 || !splat_value(g_, other, &scale) ||
      !(std::abs(scale) < 1e30))
    return false;
  groups_[gi].dot.scale = scale;
  absorb(gi, mul);
  *cur = m.result;
  const int32_t cv = only_user(*cur);
  if (cv >= 0 && g_.ops[cv].kind == OpKind::kElementwise && g_.ops[cv].fn == EwOp::kConvert &&
      rt::dot_kernel_writes(DType::kFloat8E4M3, g_.values[g_.ops[cv].result].dtype)) {
    absorb(gi, cv);
    *cur = g_.ops[cv].result;
  }
  return true;
}

void Planner::finish_epilogues(int32_t gi, std::vector<ValueId> inputs, ValueId result) {
  std::sort(groups_[gi].ops.begin(), groups_[gi].ops.end());
  groups_[gi].inputs = std::move(inputs);
  group_of_[result] = gi;
  groups_[gi].outputs = {result};
}

// A value a kernel starting at `op_index` may read: constants and inputs exist before any kernel
// runs, wherever lowering placed them; computed values must come earlier.
bool Planner::available_before(ValueId v, int32_t op_index) const {
  const Op& def = g_.def(v);
  return def.kind == OpKind::kConstant || def.kind == OpKind::kParameter || g_.values[v].def < op_index;
}

void Planner::absorb(int32_t gi, int32_t op_index) {
  absorbed_[op_index] = true;
  groups_[gi].ops.push_back(op_index);
}

// Activations are recognised by what they are: relu is max(x, 0); GELU and SiLU are primitives
// that lowering keeps (no matching of their expansions, whose constants round with the dtype).
rt::Activation Planner::epilogue_activation(int32_t u, ValueId x) const {
  const Op& op = g_.ops[u];
  if (op.kind != OpKind::kElementwise) return rt::Activation::kNone;
  if (op.fn == EwOp::kMax && op.operands[0] != op.operands[1]) {
    const ValueId other = op.operands[0] == x ? op.operands[1] : op.operands[0];
    return is_splat_of(g_, other, 0.0) ? rt::Activation::kRelu : rt::Activation::kNone;
  }
  if (op.fn != EwOp::kGelu && op.fn != EwOp::kSilu) return rt::Activation::kNone;
  // Feeding one elementwise op (GEGLU's x * gelu(gate)), the activation costs nothing in that op's
  // fused kernel, while as an epilogue the CUDA backend may run it as a pass of its own.
  const int32_t next = only_user(op.result);
  if (next >= 0 && g_.ops[next].kind == OpKind::kElementwise) return rt::Activation::kNone;
  return op.fn == EwOp::kGelu ? rt::Activation::kGelu : rt::Activation::kSilu;
}

Status Planner::sweep() {
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    if (is_dot_transpose(static_cast<int32_t>(i))) absorbed_[i] = true;
  }
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const auto idx = static_cast<int32_t>(i);
    const Op& op = g_.ops[i];
    if (absorbed_[i]) continue;
    switch (op.kind) {
      case OpKind::kParameter:
      case OpKind::kConstant:
      case OpKind::kIota:
      case OpKind::kBroadcast: break;
      case OpKind::kElementwise:
      case OpKind::kReduce:
        if (is_virtual(op.result)) break;
        if (op.kind == OpKind::kReduce) {
          const int64_t rank = static_cast<int64_t>(g_.values[op.operands[0]].shape.size());
          for (size_t j = 0; j < op.dims.size(); ++j) {
            if (op.dims[j] != rank - static_cast<int64_t>(op.dims.size() - j)) {
              return internal_error("fusion: reduction over non-trailing dims (run canonicalize_reductions first)");
            }
          }
        }
        if (!try_join(idx)) start_fused(idx);
        break;
      case OpKind::kDot: plan_dot(idx); break;
      case OpKind::kConvolution: plan_conv(idx); break;
      default: {  // each its own kernel
        if (is_virtual(op.result)) break;  // a slice read in place by the kernels that use it
        std::vector<ValueId> inputs;
        for (ValueId v : op.operands) inputs.push_back(ensure_real(v));
        int32_t gi = new_group(own_kernel_kind(op), idx);
        groups_[gi].inputs = inputs;
        group_of_[op.result] = gi;
        break;
      }
    }
  }
  for (ValueId v : g_.outputs) ensure_real(v);
  return ok_status();
}

StatusOr<FusionPlan> plan_fusion(const Graph& graph) {
  Planner p(graph);
  TRIPY_RETURN_IF_ERROR(p.sweep());
  return p.finish();
}

}  // namespace tripy::flat

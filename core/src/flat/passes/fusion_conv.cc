// Fusion planning for convolutions: a convolution kernel absorbs what follows it in the pattern
// act(conv(x, w) + bias[channel] + residual) with act relu, GELU or SiLU, which oneDNN (post-ops) and cuDNN
// (ConvolutionBiasActivationForward with its z input) run in the convolution's own pass.
#include <algorithm>

#include "flat/passes/fusion_internal.h"

namespace tripy::flat {
namespace {

// The add's other operand, when `op` is add(v, other) or add(other, v) with other != v.
ValueId other_addend(const Op& op, ValueId v) {
  if (op.kind != OpKind::kElementwise || op.fn != EwOp::kAdd || op.operands[0] == op.operands[1]) return -1;
  return op.operands[0] == v ? op.operands[1] : op.operands[1] == v ? op.operands[0] : -1;
}

}  // namespace

void Planner::plan_conv(int32_t op_index) {
  const Op& op = g_.ops[op_index];
  std::vector<ValueId> inputs = {ensure_real(op.operands[0]), ensure_real(op.operands[1])};
  int32_t gi = new_group(GroupKind::kConvolution, op_index);
  rt::ConvolutionAttrs& attrs = groups_[gi].convolution;
  attrs = op.convolution;
  ValueId cur = op.result;
  const Shape& shape = g_.values[cur].shape;
  const int64_t channel_axis = attrs.layout == rt::Layout::kChannelsLast ? static_cast<int64_t>(shape.size()) - 1 : 1;
  const Dim& channels = shape[static_cast<size_t>(channel_axis)];

  // Bias: add(conv, broadcast(b, dims)) where b holds one value per channel (a [O] vector or its
  // [O, 1, 1] reshape, [1, 1, O] channels-last): every dim of b is 1 except the one broadcast
  // along the channels.
  int32_t u = only_user(cur);
  if (u >= 0) {
    ValueId other = other_addend(g_.ops[u], cur);
    if (other >= 0 && g_.def(other).kind == OpKind::kBroadcast) {
      const Op& b = g_.def(other);
      ValueId v = b.operands[0];
      const Shape& vs = g_.values[v].shape;
      // Lowering reshapes the [O] bias to [O, 1, 1] after the convolution: the kernel reads the
      // reshape's operand, which holds the same bytes and exists before it runs.
      ValueId bytes = v;
      while (g_.def(bytes).kind == OpKind::kReshape && !available_before(bytes, op_index))
        bytes = g_.def(bytes).operands[0];
      bool per_channel = !is_virtual(bytes) && available_before(bytes, op_index) && channels.is_static();
      for (size_t j = 0; per_channel && j < vs.size(); ++j) {
        const bool along_channels = b.dims[j] == channel_axis;
        per_channel = vs[j].is_static() && vs[j].static_value() == (along_channels ? channels.static_value() : 1) &&
                      (along_channels || vs[j].static_value() == 1);
      }
      if (per_channel && num_elements(vs).is_static() && num_elements(vs).static_value() == channels.static_value()) {
        attrs.has_bias = true;
        inputs.push_back(bytes);
        absorb(gi, u);
        cur = g_.ops[u].result;
      }
    }
  }
  // Residual: add(conv, r) with r of the result's shape, computed before this kernel runs.
  u = only_user(cur);
  if (u >= 0) {
    ValueId r = other_addend(g_.ops[u], cur);
    if (r >= 0 && !is_virtual(r) && available_before(r, op_index) && same_shape(g_.values[r].shape, shape) &&
        g_.values[r].dtype == g_.values[cur].dtype) {
      attrs.has_residual = true;
      inputs.push_back(r);
      absorb(gi, u);
      cur = g_.ops[u].result;
    }
  }
  // relu, GELU or SiLU, recognised as the dot's are.
  u = only_user(cur);
  if (rt::Activation act = u >= 0 ? epilogue_activation(u, cur) : rt::Activation::kNone; act != rt::Activation::kNone) {
    attrs.activation = act;
    absorb(gi, u);
    cur = g_.ops[u].result;
  }
  finish_epilogues(gi, std::move(inputs), cur);
}

}  // namespace tripy::flat

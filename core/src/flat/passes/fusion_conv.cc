// Fusion planning for convolutions: a convolution kernel absorbs what follows it in the pattern
// act(conv(x, w) + bias[channel] + residual) with act relu, GELU or SiLU, which oneDNN (post-ops) and cuDNN
// (ConvolutionBiasActivationForward with its z input) run in the convolution's own pass.
#include <algorithm>

#include "flat/passes/fusion_internal.h"

namespace tripy::flat {
namespace {

bool is_zero_splat(const Graph& g, ValueId v) {
  const Op* op = &g.def(v);
  while (op->kind == OpKind::kBroadcast) op = &g.def(op->operands[0]);
  return op->kind == OpKind::kConstant && op->constant.defined() && op->constant.numel() == 1 &&
         op->constant.dtype() == g.values[v].dtype && [&] {
           const Tensor& t = op->constant;
           switch (t.dtype()) {
             case DType::kFloat32: return *static_cast<const float*>(t.data()) == 0.0f;
             case DType::kFloat16: case DType::kBFloat16: return (*static_cast<const uint16_t*>(t.data()) & 0x7fff) == 0;
             default: return false;
           }
         }();
}

// The add's other operand, when `op` is add(v, other) or add(other, v) with other != v.
ValueId other_addend(const Op& op, ValueId v) {
  if (op.kind != OpKind::kElementwise || op.fn != EwOp::kAdd || op.operands[0] == op.operands[1]) return -1;
  return op.operands[0] == v ? op.operands[1] : op.operands[1] == v ? op.operands[0] : -1;
}

}  // namespace

// silu(x) = mul(x, sigmoid(x)) (either operand order) where nothing else reads x or the sigmoid.
// Returns the mul (after absorbing both ops into group gi) or -1.
int32_t Planner::match_silu(int32_t gi, ValueId x) {
  if (uses_[x] != 2 || users_[x].size() != 2) return -1;
  int32_t sig = users_[x][0], mul = users_[x][1];
  if (g_.ops[sig].kind != OpKind::kElementwise || g_.ops[sig].fn != EwOp::kSigmoid) std::swap(sig, mul);
  const Op& s = g_.ops[sig];
  const Op& m = g_.ops[mul];
  if (s.kind != OpKind::kElementwise || s.fn != EwOp::kSigmoid || only_user(s.result) != mul) return -1;
  if (m.kind != OpKind::kElementwise || m.fn != EwOp::kMul) return -1;
  if (!((m.operands[0] == x && m.operands[1] == s.result) || (m.operands[1] == x && m.operands[0] == s.result)))
    return -1;
  absorb(gi, std::min(sig, mul));
  absorb(gi, std::max(sig, mul));
  return mul;
}

void Planner::plan_conv(int32_t op_index) {
  const Op& op = g_.ops[op_index];
  std::vector<ValueId> inputs = {ensure_real(op.operands[0]), ensure_real(op.operands[1])};
  int32_t gi = new_group(GroupKind::kConv, op_index);
  rt::ConvAttrs& attrs = groups_[gi].conv;
  attrs = op.conv;
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
  // relu: max(x, 0); GELU (erf form) as the dot matches it; SiLU: x * sigmoid(x).
  u = only_user(cur);
  if (u >= 0 && g_.ops[u].kind == OpKind::kElementwise && g_.ops[u].fn == EwOp::kMax) {
    const Op& mx = g_.ops[u];
    ValueId other = mx.operands[0] == cur ? mx.operands[1] : mx.operands[0];
    if (mx.operands[0] != mx.operands[1] && is_zero_splat(g_, other)) {
      attrs.activation = rt::Activation::kRelu;
      absorb(gi, u);
      cur = mx.result;
    }
  } else if (int32_t last = match_gelu(gi, cur); last >= 0) {
    attrs.activation = rt::Activation::kGelu;
    cur = g_.ops[last].result;
  } else if (int32_t mul = match_silu(gi, cur); mul >= 0) {
    attrs.activation = rt::Activation::kSilu;
    cur = g_.ops[mul].result;
  }
  std::sort(groups_[gi].ops.begin(), groups_[gi].ops.end());
  groups_[gi].inputs = inputs;
  group_of_[cur] = gi;
  groups_[gi].outputs = {cur};
}

}  // namespace tripy::flat

// Common subexpression elimination: ops with the same kind, fn, operands, attributes and type
// compute one value. Operands of commutative fns are compared as a set; constants compare by
// bytes when small (large weights are only equal to themselves).
#include <algorithm>
#include <unordered_map>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "runtime/fields.h"

namespace tripy::flat {
namespace {

bool commutative(EwOp fn) { return rt::ew_valid(fn) && rt::ew_info(fn).commutative; }

std::string key_of(const Graph& g, const Op& op) {
  const Value& r = g.values[op.result];
  std::string k = std::to_string(static_cast<int>(op.kind)) + "|" + std::to_string(static_cast<int>(op.fn)) + "|" +
                  std::to_string(static_cast<int>(r.dtype)) + "|" + shape_str(r.shape) + "|";
  std::vector<ValueId> operands = op.operands;
  if (op.kind == OpKind::kElementwise && commutative(op.fn)) std::sort(operands.begin(), operands.end());
  for (ValueId v : operands) k += std::to_string(v) + ",";
  // The attributes the op's kind carries (op_kinds.def), exactly.
  const OpAttrs has = op_attrs(op.kind);
  k += "|";
  if (has & (kDims | kDimsIfAny)) rt::append_field_key(k, op.dims);
  if (has & kSliceBounds) k += shape_str(op.starts) + shape_str(op.limits) + shape_str(op.steps);
  if (has & kParameterAttrs) k += std::to_string(op.index) + "," + std::to_string(op.shape_symbol);
  // Plugins are pure (as TensorRT's are): one call per plugin, fields, device code and inputs.
  if (has & kAttentionAttrs) rt::append_field_key(k, op.attention);
  if (has & kConvolutionAttrs) rt::append_field_key(k, op.convolution);
  if (has & kPoolingAttrs) rt::append_field_key(k, op.pooling);
  if (has & kPluginAttrs) rt::append_field_key(k, op.plugin);
  if (has & kKernelAttrs) {
    rt::append_field_key(k, op.kernel.kind);
    rt::visit_kind_attrs(op.kernel, [&](const auto& a) { rt::append_field_key(k, a); });
  }
  if (op.kind == OpKind::kConstant) {
    if (op.constant.nbytes() <= 256 && on_host(op.constant)) {
      const auto* p = static_cast<const unsigned char*>(op.constant.data());
      static const char* kHex = "0123456789abcdef";
      for (int64_t i = 0; i < op.constant.nbytes(); ++i) {
        k += kHex[p[i] >> 4];
        k += kHex[p[i] & 15];
      }
    } else {
      k += "@" + std::to_string(reinterpret_cast<uintptr_t>(op.constant.data()));
    }
  }
  return k;
}

}  // namespace

Graph cse(const Graph& graph) {
  Graph g = graph;
  std::vector<ValueId> replace(g.values.size(), -1);
  std::vector<bool> keep(g.ops.size(), true);
  std::unordered_map<std::string, ValueId> seen;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    Op& op = g.ops[i];
    for (ValueId& v : op.operands) {
      if (replace[v] >= 0) v = replace[v];
    }
    if (op.kind == OpKind::kParameter) continue;
    auto [it, inserted] = seen.emplace(key_of(g, op), op.result);
    if (!inserted) {
      replace[op.result] = it->second;
      keep[i] = false;
    }
  }
  return rebuild(g, keep, replace);
}

}  // namespace tripy::flat

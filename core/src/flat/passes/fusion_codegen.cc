// Turns planned groups into kernel interfaces: the fused program of each fused group (virtual
// broadcasts, iotas and splats inlined as index arithmetic, converts of constants as they load),
// and which values each kernel must write because another kernel or the caller reads them.
#include <algorithm>
#include <set>

#include "flat/constant_data.h"
#include "flat/ir_text.h"
#include "flat/passes/fusion_internal.h"
#include "runtime/ew_ops.h"
#include "runtime/fields_text.h"

namespace tripy::flat {
namespace {

// Whether a one-element constant survives the double an immediate holds (rt::Instr::imm): an
// int64 past 2**53 does not, and is loaded from its buffer instead.
bool exact_as_immediate(const Tensor& c) {
  if (c.dtype() != DType::kInt64) return true;
  const int64_t v = *static_cast<const int64_t*>(c.data());
  return rt::saturated_immediate<int64_t>(static_cast<double>(v)) == v;
}

// Emits the instructions of one fused group.
class FusedCodegen {
 public:
  FusedCodegen(const Graph& g, FusionGroup& grp, std::map<ValueId, int32_t>& regs,
               const std::vector<int32_t>& group_of, int32_t gi)
      : g_(g), grp_(grp), regs_(regs), group_of_(group_of), gi_(gi) {}

  Status run() {
    for (int32_t i : grp_.ops) {
      const Op& op = g_.ops[i];
      rt::Instr in;
      in.dtype = g_.values[op.result].dtype;
      switch (op.kind) {
        case OpKind::kElementwise:
        case OpKind::kReduce: {
          in.op = op.fn;
          int32_t* slots[3] = {&in.a, &in.b, &in.c};
          for (size_t k = 0; k < op.operands.size() && k < 3; ++k) {
            TRIPY_ASSIGN_OR_RETURN(*slots[k], reg(op.operands[k]));
          }
          regs_[op.result] = emit(in);
          break;
        }
        case OpKind::kBroadcast:
        case OpKind::kSlice:
        case OpKind::kIota: {
          // A materialised virtual value: the whole kernel is its index mapping.
          TRIPY_ASSIGN_OR_RETURN(int32_t r, reg(op.result));
          regs_[op.result] = r;
          break;
        }
        default: return internal_error(std::string("fusion: cannot fuse ") + op_kind_name(op.kind));
      }
    }
    return ok_status();
  }

 private:
  int32_t emit(const rt::Instr& in) {
    grp_.fused.instrs.push_back(in);
    return static_cast<int32_t>(grp_.fused.instrs.size() - 1);
  }

  // The register holding `v` where its dims run along the first domain axes in order (element
  // values: the whole domain; row values: the row axes).
  StatusOr<int32_t> reg(ValueId v) {
    auto it = regs_.find(v);
    if (it != regs_.end()) return it->second;
    std::vector<int32_t> axes(g_.values[v].shape.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int32_t>(i);
    TRIPY_ASSIGN_OR_RETURN(int32_t r, mapped(v, axes));
    regs_[v] = r;
    return r;
  }

  // The register holding `v` where v's dim i runs along domain axis axes[i].
  StatusOr<int32_t> mapped(ValueId v, const std::vector<int32_t>& axes) {
    if (group_of_[v] == gi_) {
      auto it = regs_.find(v);
      if (it == regs_.end()) return internal_error("fusion: value %" + std::to_string(v) + " used before computed");
      return it->second;
    }
    const Op& op = g_.def(v);
    const DType dtype = g_.values[v].dtype;
    if (op.kind == OpKind::kConstant && op.constant.defined() && op.constant.numel() == 1 &&
        on_host(op.constant) && exact_as_immediate(op.constant)) {
      return emit(rt::Instr{EwOp::kConst, dtype, -1, -1, -1, read_element(op.constant, 0)});
    }
    if (op.kind == OpKind::kIota) {
      const Dim& len = g_.values[v].shape[op.dims[0]];
      if (len.is_static() && len.static_value() == 1) return emit(rt::Instr{EwOp::kConst, dtype, -1, -1, -1, 0});
      return emit(rt::Instr{EwOp::kIota, dtype, axes[op.dims[0]], -1, -1, 0});
    }
    if (is_convert_of_constant(g_, op)) {
      TRIPY_ASSIGN_OR_RETURN(int32_t x, mapped(op.operands[0], axes));
      return emit(rt::Instr{EwOp::kConvert, dtype, x, -1, -1, 0});
    }
    if (op.kind == OpKind::kBroadcast) {
      std::vector<int32_t> inner;
      for (int64_t d : op.dims) inner.push_back(axes[d]);
      return mapped(op.operands[0], inner);
    }
    auto key = std::make_pair(v, axes);
    auto it = loads_.find(key);
    if (it != loads_.end()) return it->second;
    int32_t input = static_cast<int32_t>(grp_.inputs.size());
    if (is_slice_read_in_place(g_, op)) {
      // The kernel reads the slice's window of its operand's bytes (views, not copies).
      grp_.inputs.push_back(op.operands[0]);
      grp_.windows.emplace_back(op.starts, g_.values[v].shape);
    } else {
      grp_.inputs.push_back(v);
      grp_.windows.emplace_back();
    }
    grp_.fused.input_axes.push_back(axes);
    int32_t r = emit(rt::Instr{EwOp::kLoad, dtype, input, -1, -1, 0});
    loads_[key] = r;
    return r;
  }

  const Graph& g_;
  FusionGroup& grp_;
  std::map<ValueId, int32_t>& regs_;
  const std::vector<int32_t>& group_of_;
  int32_t gi_;
  std::map<std::pair<ValueId, std::vector<int32_t>>, int32_t> loads_;
};

}  // namespace

Status Planner::generate_fused(int32_t gi) {
  // A materialising group computes a virtual value that group_of_ does not map to it.
  return FusedCodegen(g_, groups_[gi], regs_[gi], group_of_, gi).run();
}

std::string Planner::kernel_name(const FusionGroup& grp) const {
  switch (grp.kind) {
    case GroupKind::kFused: {
      std::string name = "fused";
      int n = 0;
      for (int32_t i : grp.ops) {
        if (++n > 4) break;
        name += "_" + op_text_name(g_.ops[i]);
      }
      return name;
    }
    case GroupKind::kDot: {
      std::string name = "dot";
      if (grp.dot.has_bias) name += "_bias";
      if (grp.dot.activation == rt::Activation::kRelu) name += "_relu";
      if (grp.dot.activation == rt::Activation::kGelu) name += "_gelu";
      return name;
    }
    case GroupKind::kCopy:  // fusion plans no copies; build_program adds them
    case GroupKind::kTranspose:
    default: return group_kind_name(grp.kind);  // and the kinds of kernel ops (flat::OpKind::kKernel)
    case GroupKind::kSlice:
    case GroupKind::kConcatenate:
    case GroupKind::kGather:
    case GroupKind::kAttention:
    case GroupKind::kUpdateSlice: return group_kind_name(grp.kind);
    case GroupKind::kAlias: return "reshape";
    case GroupKind::kPlugin: {
      // "namespace::Name/version" -> "plugin_Name"
      const std::string& key = g_.ops[grp.ops.back()].plugin.name;
      const size_t from = key.find("::") == std::string::npos ? 0 : key.find("::") + 2;
      return "plugin_" + key.substr(from, key.rfind('/') == std::string::npos ? std::string::npos : key.rfind('/') - from);
    }
    case GroupKind::kPooling: return g_.ops[grp.ops.front()].pooling.kind == rt::PoolingAttrs::Kind::kMax ? "maxpool" : "avgpool";
    case GroupKind::kConvolution: {
      std::string name = grp.convolution.transposed ? "conv_transpose" : "conv";
      if (grp.convolution.has_bias) name += "_bias";
      if (grp.convolution.has_residual) name += "_add";
      if (grp.convolution.activation == rt::Activation::kRelu) name += "_relu";
      if (grp.convolution.activation == rt::Activation::kGelu) name += "_gelu";
      if (grp.convolution.activation == rt::Activation::kSilu) name += "_silu";
      return name;
    }
  }
  return "kernel";
}

StatusOr<FusionPlan> Planner::finish() {
  regs_.assign(groups_.size(), {});
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (groups_[gi].kind == GroupKind::kFused) TRIPY_RETURN_IF_ERROR(generate_fused(static_cast<int32_t>(gi)));
  }
  // What each group must write: values read by other groups, and the graph's outputs.
  std::vector<std::set<ValueId>> needed(groups_.size());
  auto need = [&](ValueId v, int32_t reader) {
    int32_t p = producer_group(v);
    if (p >= 0 && p != reader) needed[p].insert(v);
  };
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (ValueId v : groups_[gi].inputs) need(v, static_cast<int32_t>(gi));
  }
  for (ValueId v : g_.outputs) need(v, -1);
  // Reshapes run right after what they view, so a kernel that joined an earlier group may read them.
  std::vector<std::vector<int32_t>> aliases_after(groups_.size() + 1);
  std::vector<int32_t> order;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    if (groups_[gi].kind == GroupKind::kAlias) aliases_after[ready_group(groups_[gi].inputs[0]) + 1].push_back(gi);
  for (int32_t gi = -1; gi < static_cast<int32_t>(groups_.size()); ++gi) {
    if (gi >= 0 && groups_[gi].kind != GroupKind::kAlias) order.push_back(gi);
    for (int32_t a : aliases_after[gi + 1]) order.push_back(a);
  }
  FusionPlan plan;
  for (int32_t gi : order) {
    FusionGroup& grp = groups_[gi];
    if (grp.kind == GroupKind::kFused) {
      grp.outputs.assign(needed[gi].begin(), needed[gi].end());
      if (grp.outputs.empty()) continue;  // nothing reads it (dead code that DCE did not see)
      for (ValueId v : grp.outputs) grp.fused.output_regs.push_back(regs_[gi].at(v));
    } else if (grp.kind != GroupKind::kDot && grp.kind != GroupKind::kConvolution) {
      grp.outputs = {g_.ops[grp.ops.back()].result};
    }
    grp.name = kernel_name(grp);
    plan.groups.push_back(std::move(grp));
  }
  return plan;
}

namespace {
const Op& g_op(const Graph& graph, const FusionGroup& grp) { return graph.ops[grp.ops.front()]; }
}  // namespace

std::string fusion_plan_str(const Graph& graph, const FusionPlan& plan) {
  auto values = [](const std::vector<ValueId>& vs) {
    std::string out;
    for (size_t i = 0; i < vs.size(); ++i) out += (i ? ", %" : "%") + std::to_string(vs[i]);
    return out;
  };
  std::string out;
  for (const FusionGroup& grp : plan.groups) {
    out += values(grp.outputs) + " = " + group_kind_name(grp.kind) + "(" + values(grp.inputs) + ")";
    if (grp.kind == GroupKind::kFused) {
      out += " {domain = " + shape_str(grp.domain, &graph.symbols);
      if (grp.fused.reduce_from != static_cast<int32_t>(grp.domain.size())) {
        out += ", reduce_from = " + std::to_string(grp.fused.reduce_from);
      }
      out += ", ops = " + std::to_string(grp.ops.size()) + "}";
    } else if (grp.kind == GroupKind::kDot) {
      std::string attrs;
      if (grp.dot.transpose_lhs) attrs += ", transpose_lhs";
      if (grp.dot.transpose_rhs) attrs += ", transpose_rhs";
      if (grp.dot.has_bias) attrs += ", bias";
      if (grp.dot.activation == rt::Activation::kRelu) attrs += ", relu";
      if (grp.dot.activation == rt::Activation::kGelu) attrs += ", gelu";
      if (grp.dot.scale != 1.0) attrs += ", scale " + rt::exact_double_text(grp.dot.scale);
      if (!attrs.empty()) out += " {" + attrs.substr(2) + "}";
    } else if (grp.kind == GroupKind::kConvolution) {
      out += " {" + rt::fields_text(grp.convolution) + "}";
    } else if (grp.kind == GroupKind::kPooling) {
      out += " {" + rt::fields_text(g_op(graph, grp).pooling) + "}";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tripy::flat

// A readable listing of an rt::Program for logs (TRIPY_DEBUG, the "program" dump) and tests.
#include <string>

#include "compiler/build_program.h"
#include "flat/ir_text.h"

namespace tripy::compiler {
namespace {

std::string slot_list(const std::vector<rt::Slot>& slots) {
  std::string out = "[";
  for (size_t i = 0; i < slots.size(); ++i) out += (i ? ", $" : "$") + std::to_string(slots[i]);
  return out + "]";
}

std::string shape_instr(const rt::ShapeInstr& in) {
  using Op = rt::ShapeInstr::Op;
  static const char* kSym[] = {"", "", "+", "-", "*", "//", "ceildiv", "%", "max", "min"};
  const auto a = std::to_string(in.a), b = std::to_string(in.b);
  switch (in.op) {
    case Op::kConst: return a;
    case Op::kInputDim: return "input" + a + ".dim" + b;
    case Op::kInputValue: return "input" + a + ".value";
    case Op::kCeilDiv:
    case Op::kMax:
    case Op::kMin: return std::string(kSym[static_cast<int>(in.op)]) + "($" + a + ", $" + b + ")";
    default: return "$" + a + " " + kSym[static_cast<int>(in.op)] + " $" + b;
  }
}

std::string buffer_line(const rt::BufferDesc& b) {
  static const char* kKinds[] = {"input", "constant", "temp", "output", "alias"};
  std::string out = std::string(kKinds[static_cast<int>(b.kind)]);
  if (b.kind != rt::BufferDesc::Kind::kTemp) out += " " + std::to_string(b.index);
  out += std::string(" ") + flat::dtype_short_name(b.dtype) + slot_list(b.shape);
  if (b.kind == rt::BufferDesc::Kind::kTemp) out += " @" + std::to_string(b.offset);
  if (b.max_bytes) out += " (<= " + std::to_string(b.max_bytes) + " bytes)";
  if (b.donor >= 0) out += " in input " + std::to_string(b.donor) + "'s memory";
  return out;
}

std::string instr_line(const rt::Instr& in) {
  std::string out = std::string(rt::ew_op_name(in.op)) + "." + flat::dtype_short_name(in.dtype);
  switch (in.op) {
    case rt::EwOp::kLoad: return out + " in" + std::to_string(in.a);
    case rt::EwOp::kConst: return out + " " + flat::number_text(in.imm);
    case rt::EwOp::kIota: return out + " axis" + std::to_string(in.a);
    default: break;
  }
  for (int32_t r : {in.a, in.b, in.c}) {
    if (r >= 0) out += " r" + std::to_string(r);
  }
  return out;
}

std::string buffers(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", b" : "b") + std::to_string(ids[i]);
  return out;
}

}  // namespace

std::string program_str(const rt::Program& p) {
  std::string out;
  for (size_t i = 0; i < p.shape_program.size(); ++i) {
    out += "$" + std::to_string(i) + " = " + shape_instr(p.shape_program[i]) + "\n";
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const rt::InputSpec& in = p.inputs[i];
    if (in.kind == rt::InputSpec::Kind::kShapeValue) {
      out += "input " + std::to_string(i) + " '" + in.name + "': shape value in [" + std::to_string(in.value_min) +
             ", " + std::to_string(in.value_opt) + ", " + std::to_string(in.value_max) + "]\n";
      continue;
    }
    out += "input " + std::to_string(i) + " '" + in.name + "': " + flat::dtype_short_name(in.dtype) + "[";
    for (size_t d = 0; d < in.dim_min.size(); ++d) {
      if (d) out += ", ";
      if (in.dim_min[d] == in.dim_max[d]) {
        out += std::to_string(in.dim_min[d]);
      } else {
        out += (in.dim_names[d].empty() ? "" : in.dim_names[d] + " ") + "in [" + std::to_string(in.dim_min[d]) +
               ", " + std::to_string(in.dim_opt[d]) + ", " + std::to_string(in.dim_max[d]) + "]";
      }
    }
    out += std::string("]") + (in.donated ? " donated" : "") + "\n";
  }
  for (const rt::ShapeCheck& c : p.checks) {
    out += std::string("check $") + std::to_string(c.a) +
           (c.kind == rt::ShapeCheck::Kind::kEqual ? " == $" : " broadcasts with $") + std::to_string(c.b) +
           ": " + c.message + "\n";
  }
  for (size_t i = 0; i < p.buffers.size(); ++i) out += "b" + std::to_string(i) + " = " + buffer_line(p.buffers[i]) + "\n";
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const rt::Kernel& k = p.kernels[i];
    out += buffers(k.outputs) + " = " + rt::kernel_kind_name(k.kind) + " '" + k.name + "'(" + buffers(k.inputs) + ")";
    switch (k.kind) {
      case rt::KernelKind::kFused: {
        out += " domain " + slot_list(k.fused.domain) + " reduce_from " + std::to_string(k.fused.reduce_from) + "\n";
        for (size_t r = 0; r < k.fused.instrs.size(); ++r) {
          out += "    r" + std::to_string(r) + " = " + instr_line(k.fused.instrs[r]);
          if (k.fused.instrs[r].op == rt::EwOp::kLoad && k.fused.instrs[r].a >= 0 &&
              static_cast<size_t>(k.fused.instrs[r].a) < k.fused.input_axes.size()) {
            std::string axes;
            for (int32_t a : k.fused.input_axes[k.fused.instrs[r].a]) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
            out += " axes [" + axes + "]";
            const size_t in = static_cast<size_t>(k.fused.instrs[r].a);
            if (in < k.fused.input_windows.size() && !k.fused.input_windows[in].starts.empty())
              out += " window starts " + slot_list(k.fused.input_windows[in].starts) + " sizes " +
                     slot_list(k.fused.input_windows[in].sizes);
          }
          out += "\n";
        }
        out += "    store";
        for (int32_t r : k.fused.output_regs) out += " r" + std::to_string(r);
        break;
      }
      case rt::KernelKind::kDot:
        if (k.dot.transpose_lhs) out += " transpose_lhs";
        if (k.dot.transpose_rhs) out += " transpose_rhs";
        if (k.dot.has_bias) out += " bias";
        if (k.dot.activation == rt::Activation::kRelu) out += " relu";
        if (k.dot.activation == rt::Activation::kGelu) out += " gelu";
        break;
      case rt::KernelKind::kTranspose: {
        out += " perm [";
        for (size_t d = 0; d < k.perm.size(); ++d) out += (d ? ", " : "") + std::to_string(k.perm[d]);
        out += "]";
        break;
      }
      case rt::KernelKind::kSlice: out += " starts " + slot_list(k.starts) + " steps " + slot_list(k.steps); break;
      case rt::KernelKind::kConcat:
      case rt::KernelKind::kGather:
      case rt::KernelKind::kUpdateSlice: out += " axis " + std::to_string(k.axis); break;
      case rt::KernelKind::kCopy: break;
      case rt::KernelKind::kAttention: {
        const rt::AttentionAttrs& a = k.attention;
        static const char* kMasks[] = {"", " bool_mask", " additive_mask"};
        out += std::string(a.causal ? " causal" : "") + kMasks[static_cast<int>(a.mask) % 3] + " scale " +
               std::to_string(a.scale);
        static const char* kOperands[] = {"q", "k", "v", "mask", "out"};
        for (int x = 0; x < rt::AttentionAttrs::kNumOperands; ++x) {
          const auto& p = a.perms[x];
          if (p == rt::AttentionAttrs::Perm{0, 1, 2, 3}) continue;
          out += std::string(" ") + kOperands[x] + "_perm [" + std::to_string(p[0]) + ", " + std::to_string(p[1]) +
                 ", " + std::to_string(p[2]) + ", " + std::to_string(p[3]) + "]";
        }
        for (int x = 0; x < rt::AttentionAttrs::kNumOperands; ++x) {
          const auto& w = a.heads[x];
          if (w.count > 0)
            out += std::string(" ") + kOperands[x] + "_heads [" + std::to_string(w.start) + ", " +
                   std::to_string(w.count) + "]";
        }
        break;
      }
      case rt::KernelKind::kConv: out += " {" + rt::conv_attrs_text(k.conv) + "}"; break;
      case rt::KernelKind::kPlugin: out += " " + k.plugin.name + " " + k.plugin.fields; break;
      case rt::KernelKind::kPool: out += " {" + rt::pool_attrs_text(k.pool) + "}"; break;
    }
    out += "\n";
  }
  out += "arena " + std::to_string(p.arena_bytes) + " bytes\n";
  return out;
}

}  // namespace tripy::compiler

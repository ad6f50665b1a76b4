// A readable listing of an rt::Program for logs (TRIPY_DEBUG, the "program" dump) and tests.
#include <string>

#include "compiler/build_program.h"
#include "flat/ir_text.h"
#include "runtime/fields_text.h"

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
    // Fused kernels print their instructions a line each; the other kinds their attributes.
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
      default: {
        const std::string attrs = rt::visit_kind_attrs(k, [](const auto& a) { return rt::fields_text(a); });
        if (!attrs.empty()) out += " {" + attrs + "}";
      }
    }
    out += "\n";
  }
  out += "arena " + std::to_string(p.arena_bytes) + " bytes\n";
  return out;
}

}  // namespace tripy::compiler

// FlatIR to text: one op a line, symbols declared first, outputs last. parse_graph reads it back.
#include <cstdio>
#include <cstdlib>

#include "flat/constant_data.h"
#include "flat/ir.h"
#include "flat/ir_text.h"

namespace tripy::flat {
namespace {

constexpr int64_t kMaxPrintedElements = 64;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string dim_list(const std::vector<Dim>& v, const SymbolTable& t) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i].str(&t);
  return out + "]";
}

std::string attrs(const Op& op, const Graph& g) {
  std::string out;
  switch (op.kind) {
    case OpKind::kParameter: {
      out = "index = " + std::to_string(op.index);
      size_t i = static_cast<size_t>(op.index);
      if (i < g.input_names.size() && !g.input_names[i].empty()) out += ", name = " + quoted(g.input_names[i]);
      if (op.shape_symbol >= 0) out += ", value_of = " + Dim::symbol(op.shape_symbol).str(&g.symbols);
      break;
    }
    case OpKind::kConstant: {
      int64_t n = op.constant.defined() ? op.constant.numel() : 0;
      if (n > kMaxPrintedElements) {
        out = "value = <" + std::to_string(n) + " elements>";
      } else {
        out = "value = [";
        for (int64_t i = 0; i < n; ++i) out += (i ? ", " : "") + number_text(read_element(op.constant, i));
        out += "]";
      }
      break;
    }
    case OpKind::kSlice:
      out = "starts = " + dim_list(op.starts, g.symbols) + ", limits = " + dim_list(op.limits, g.symbols) +
            ", steps = " + dim_list(op.steps, g.symbols);
      break;
    case OpKind::kAttention: {
      const rt::AttentionAttrs& a = op.attention;
      out = std::string("causal = ") + (a.causal ? "true" : "false") + ", scale = " + double_text(a.scale);
      if (a.mask != rt::MaskKind::kNone) out += a.mask == rt::MaskKind::kBool ? ", mask = bool" : ", mask = additive";
      static const char* kOperands[] = {"q", "k", "v", "mask", "out"};
      for (int x = 0; x < rt::AttentionAttrs::kNumOperands; ++x) {
        const rt::AttentionAttrs::Perm& p = a.perms[x];
        if (p != rt::AttentionAttrs::Perm{0, 1, 2, 3})
          out += std::string(", ") + kOperands[x] + "_perm = " + int_list({p[0], p[1], p[2], p[3]});
      }
      for (int x = 0; x < rt::AttentionAttrs::kNumOperands; ++x)
        if (a.heads[x].count > 0)
          out += std::string(", ") + kOperands[x] + "_heads = " + int_list({a.heads[x].start, a.heads[x].count});
      break;
    }
    case OpKind::kConvolution: out = rt::convolution_attrs_text(op.convolution); break;
    // The device code is not printed (it can be long); the key finds it in the registry.
    case OpKind::kPlugin: out = "plugin = " + quoted(op.plugin.name) + ", fields = " + quoted(op.plugin.fields); break;
    case OpKind::kPooling: out = rt::pooling_attrs_text(op.pooling); break;
    case OpKind::kElementwise:
    case OpKind::kReshape:
    case OpKind::kDot:
      if (!op.dims.empty()) out = "dims = " + int_list(op.dims);
      break;
    default: out = "dims = " + int_list(op.dims); break;
  }
  return out.empty() ? "" : " {" + out + "}";
}

}  // namespace

// An attribute is a double, not a tensor element: the shortest text that reads back as the same
// double, so that printing is stable under parse -> print (found by fuzz/flat_ir_fuzz.cc).
std::string double_text(double v) {
  std::string text = number_text(v);
  for (int digits = 10; digits <= 17 && std::strtod(text.c_str(), nullptr) != v; ++digits) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    text = buf;
  }
  return text;
}

std::string number_text(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -9.0e15 && v < 9.0e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string Graph::str() const {
  std::string out;
  for (const Symbol& s : symbols.symbols) {
    out += "sym " + s.name + " [" + std::to_string(s.min) + ", " + std::to_string(s.opt) + ", " +
           std::to_string(s.max) + "]\n";
  }
  for (const Op& op : ops) {
    const Value& v = values[op.result];
    out += "%" + std::to_string(op.result) + " : " + dtype_short_name(v.dtype) + "[";
    for (size_t i = 0; i < v.shape.size(); ++i) out += (i ? ", " : "") + v.shape[i].str(&symbols);
    out += "] = " + op_text_name(op) + "(";
    for (size_t i = 0; i < op.operands.size(); ++i) out += (i ? ", %" : "%") + std::to_string(op.operands[i]);
    out += ")" + attrs(op, *this) + "\n";
  }
  for (const ShapeAssertion& a : assertions) {
    out += a.kind == rt::ShapeCheck::Kind::kEqual ? "assert_eq(" : "assert_broadcast(";
    out += a.a.str(&symbols) + ", " + a.b.str(&symbols) + ") " + quoted(a.message) + "\n";
  }
  out += "return";
  for (size_t i = 0; i < outputs.size(); ++i) out += (i ? ", %" : " %") + std::to_string(outputs[i]);
  return out + "\n";
}

}  // namespace tripy::flat

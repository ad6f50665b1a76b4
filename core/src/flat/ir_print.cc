// FlatIR to text: one op a line, symbols declared first, outputs last. parse_graph reads it back.
#include <cstdio>
#include <cstdlib>

#include "flat/constant_data.h"
#include "flat/ir.h"
#include "flat/ir_text.h"
#include "runtime/fields_text.h"

namespace tripy::flat {
namespace {

constexpr int64_t kMaxPrintedElements = 64;

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

// The op's attributes, as its row of op_kinds.def says: "{dims = [1]}", "{stride = [2, 2], ...}".
std::string attrs(const Op& op, const Graph& g) {
  const OpAttrs has = op_attrs(op.kind);
  std::string out;
  auto add = [&](const std::string& text) {
    if (!text.empty()) out += (out.empty() ? "" : ", ") + text;
  };
  if (has & kParameterAttrs) {
    add("index = " + std::to_string(op.index));
    size_t i = static_cast<size_t>(op.index);
    if (i < g.input_names.size() && !g.input_names[i].empty()) add("name = " + rt::quoted_text(g.input_names[i]));
    if (op.shape_symbol >= 0) add("value_of = " + Dim::symbol(op.shape_symbol).str(&g.symbols));
  }
  if (op.kind == OpKind::kConstant) {
    int64_t n = op.constant.defined() ? op.constant.numel() : 0;
    if (n > kMaxPrintedElements || !on_host(op.constant)) {
      add("value = <" + std::to_string(n) + " elements>");
    } else {
      std::string values;
      for (int64_t i = 0; i < n; ++i) values += (i ? ", " : "") + number_text(read_element(op.constant, i));
      add("value = [" + values + "]");
    }
  }
  if ((has & kDims) || ((has & kDimsIfAny) && !op.dims.empty())) add("dims = " + int_list(op.dims));
  if (has & kSliceBounds)
    add("starts = " + dim_list(op.starts, g.symbols) + ", limits = " + dim_list(op.limits, g.symbols) +
        ", steps = " + dim_list(op.steps, g.symbols));
  if (has & kAttentionAttrs) add(rt::fields_text(op.attention));
  if (has & kConvolutionAttrs) add(rt::fields_text(op.convolution));
  if (has & kPoolingAttrs) add(rt::fields_text(op.pooling));
  if (has & kPluginAttrs) add(rt::fields_text(op.plugin));
  if (has & kKernelAttrs) add(rt::visit_kind_attrs(op.kernel, [](const auto& a) { return rt::fields_text(a); }));
  return out.empty() ? "" : " {" + out + "}";
}

}  // namespace

std::string number_text(double v) {
  // The range first: casting an infinity or NaN to an integer is undefined.
  if (v > -9.0e15 && v < 9.0e15 && v == static_cast<double>(static_cast<int64_t>(v))) {
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
    out += a.a.str(&symbols) + ", " + a.b.str(&symbols) + ") " + rt::quoted_text(a.message) + "\n";
  }
  out += "return";
  for (size_t i = 0; i < outputs.size(); ++i) out += (i ? ", %" : " %") + std::to_string(outputs[i]);
  return out + "\n";
}

}  // namespace tripy::flat

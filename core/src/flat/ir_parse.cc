// Text to FlatIR: reads what Graph::str() writes, so pass tests can be written as text in,
// text out. Errors name the line; nothing here aborts on bad input.
#include <array>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <map>
#include <optional>
#include <unordered_map>

#include "flat/constant_data.h"
#include "flat/ir.h"
#include "flat/ir_text.h"
#include "runtime/fields.h"

namespace tripy::flat {
namespace {

// A cursor over one line.
class Cursor {
 public:
  Cursor(std::string_view s, int line) : s_(s), line_(line) {}

  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool done() {
    skip_ws();
    return pos_ >= s_.size();
  }
  char peek() {
    skip_ws();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool consume(std::string_view tok) {
    skip_ws();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  Status expect(std::string_view tok) {
    if (consume(tok)) return ok_status();
    return error("expected '" + std::string(tok) + "'");
  }
  // A name; symbol names may also carry indices ("x.shape[0]", as the frontend names dims).
  std::string ident(bool symbol = false) {
    skip_ws();
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
        ++pos_;
        continue;
      }
      if (symbol && c == '[' && pos_ > start) {
        size_t end = pos_ + 1;
        while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
        if (end > pos_ + 1 && end < s_.size() && s_[end] == ']') {
          pos_ = end + 1;
          continue;
        }
      }
      break;
    }
    return std::string(s_.substr(start, pos_ - start));
  }
  StatusOr<int64_t> integer() {
    skip_ws();
    const std::string rest(s_.substr(pos_));
    char* end = nullptr;
    long long v = std::strtoll(rest.c_str(), &end, 10);
    if (end == rest.c_str()) return error("expected an integer");
    pos_ += static_cast<size_t>(end - rest.c_str());
    return static_cast<int64_t>(v);
  }
  StatusOr<double> number() {
    skip_ws();
    if (consume("true")) return 1.0;
    if (consume("false")) return 0.0;
    const std::string rest(s_.substr(pos_));
    char* end = nullptr;
    double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) return error("expected a number");
    pos_ += static_cast<size_t>(end - rest.c_str());
    return v;
  }
  StatusOr<std::string> string() {
    TRIPY_RETURN_IF_ERROR(expect("\""));
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\' && pos_ < s_.size()) {
        c = s_[pos_++];
        if (c == 'n') c = '\n';
      }
      out += c;
    }
    if (pos_ >= s_.size()) return error("unterminated string");
    ++pos_;
    return out;
  }
  Status error(const std::string& what) const {
    return invalid_argument("FlatIR text, line " + std::to_string(line_) + ": " + what + " at '" +
                            std::string(s_.substr(pos_, 24)) + "'");
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  int line_;
};

template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};

template <class T>
Status parse_field(Cursor& c, T& out);

// Sets the field of described struct `s` called `key` from the text at `c`; false when `s` has
// no such field (the caller tries its other attributes, then reports the key as unknown).
template <class T>
StatusOr<bool> parse_named_field(Cursor& c, const std::string& key, T& s) {
  bool found = false;
  Status st = ok_status();
  T::visit_fields(
      [&](const char* name, auto& f) {
        if (found || key != name) return;
        found = true;
        st = parse_field(c, f);
      },
      s);
  TRIPY_RETURN_IF_ERROR(st);
  return found;
}

// One value of a described attribute, as rt::field_text writes it.
template <class T>
Status parse_field(Cursor& c, T& out) {
  if constexpr (rt::has_fields<T>::value) {
    TRIPY_RETURN_IF_ERROR(c.expect("{"));
    while (!c.consume("}")) {
      if (c.consume(",")) continue;
      const std::string key = c.ident();
      TRIPY_RETURN_IF_ERROR(c.expect("="));
      TRIPY_ASSIGN_OR_RETURN(bool found, parse_named_field(c, key, out));
      if (!found) return c.error("unknown attribute '" + key + "'");
    }
    return ok_status();
  } else if constexpr (std::is_same_v<T, bool>) {
    TRIPY_ASSIGN_OR_RETURN(double v, c.number());  // true, false, 1 or 0
    if (v != 0 && v != 1) return c.error("expected true or false");
    out = v != 0;
    return ok_status();
  } else if constexpr (std::is_same_v<T, DType>) {
    const std::string name = c.ident();
    std::optional<DType> dtype = dtype_from_name(name);
    if (!dtype) return c.error("unknown dtype '" + name + "'");
    out = *dtype;
    return ok_status();
  } else if constexpr (std::is_same_v<T, EwOp>) {
    const std::string name = c.ident();
    for (size_t i = 0; i < rt::kNumEwOps; ++i)
      if (name == rt::ew_op_name(static_cast<EwOp>(i))) {
        out = static_cast<EwOp>(i);
        return ok_status();
      }
    return c.error("unknown op '" + name + "'");
  } else if constexpr (std::is_enum_v<T>) {
    const std::string name = c.ident();
    const rt::EnumNames names = enum_names(T{});
    for (size_t i = 0; i < names.count; ++i)
      if (name == names[i]) {
        out = static_cast<T>(i);
        return ok_status();
      }
    return c.error("unknown name '" + name + "'");
  } else if constexpr (std::is_floating_point_v<T>) {
    TRIPY_ASSIGN_OR_RETURN(out, c.number());
    return ok_status();
  } else if constexpr (std::is_integral_v<T>) {
    TRIPY_ASSIGN_OR_RETURN(int64_t v, c.integer());
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return c.error("integer out of range");
    out = static_cast<T>(v);
    return ok_status();
  } else if constexpr (std::is_same_v<T, std::string>) {
    TRIPY_ASSIGN_OR_RETURN(out, c.string());
    return ok_status();
  } else {
    TRIPY_RETURN_IF_ERROR(c.expect("["));
    size_t n = 0;
    while (!c.consume("]")) {
      if (n) TRIPY_RETURN_IF_ERROR(c.expect(","));
      if constexpr (is_std_array<T>::value) {
        if (n >= out.size()) return c.error("expected " + std::to_string(out.size()) + " entries");
      } else {
        if (n > (size_t{1} << 20)) return c.error("list too long");
        out.resize(n + 1);
      }
      TRIPY_RETURN_IF_ERROR(parse_field(c, out[n]));
      ++n;
    }
    if constexpr (is_std_array<T>::value) {
      if (n != out.size()) return c.error("expected " + std::to_string(out.size()) + " entries");
    } else {
      out.resize(n);
    }
    return ok_status();
  }
}

class Parser {
 public:
  StatusOr<Graph> parse(std::string_view text) {
    int line_no = 0;
    while (!text.empty()) {
      size_t nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      ++line_no;
      Cursor c(line, line_no);
      if (c.done() || c.consume("//") || c.consume("#")) continue;
      TRIPY_RETURN_IF_ERROR(parse_line(c));
    }
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      if (g_.inputs[i] < 0) return invalid_argument("FlatIR text: no parameter with index " + std::to_string(i));
    }
    return std::move(g_);
  }

 private:
  Status parse_line(Cursor& c) {
    if (c.consume("sym ")) return parse_symbol(c);
    if (c.consume("return")) return parse_return(c);
    if (c.consume("assert_eq")) return parse_assertion(c, rt::ShapeCheck::Kind::kEqual);
    if (c.consume("assert_broadcast")) return parse_assertion(c, rt::ShapeCheck::Kind::kBroadcast);
    if (c.peek() == '%') return parse_op(c);
    return c.error("expected an op, 'sym', 'assert_eq' or 'return'");
  }

  Status parse_symbol(Cursor& c) {
    std::string name = c.ident(true);
    if (name.empty()) return c.error("expected a symbol name");
    int64_t b[3];
    TRIPY_RETURN_IF_ERROR(c.expect("["));
    for (int i = 0; i < 3; ++i) {
      if (i) TRIPY_RETURN_IF_ERROR(c.expect(","));
      TRIPY_ASSIGN_OR_RETURN(b[i], c.integer());
    }
    TRIPY_RETURN_IF_ERROR(c.expect("]"));
    if (symbol_ids_.count(name)) return c.error("symbol '" + name + "' declared twice");
    symbol_ids_[name] = g_.symbols.add(name, b[0], b[1], b[2]);
    return ok_status();
  }

  StatusOr<ValueId> value_ref(Cursor& c) {
    TRIPY_RETURN_IF_ERROR(c.expect("%"));
    TRIPY_ASSIGN_OR_RETURN(int64_t id, c.integer());
    auto it = ids_.find(id);
    if (it == ids_.end()) return c.error("%" + std::to_string(id) + " is not defined");
    return it->second;
  }

  Status parse_return(Cursor& c) {
    while (!c.done()) {
      if (!g_.outputs.empty()) TRIPY_RETURN_IF_ERROR(c.expect(","));
      TRIPY_ASSIGN_OR_RETURN(ValueId v, value_ref(c));
      g_.outputs.push_back(v);
    }
    return ok_status();
  }

  Status parse_assertion(Cursor& c, rt::ShapeCheck::Kind kind) {
    ShapeAssertion a;
    a.kind = kind;
    TRIPY_RETURN_IF_ERROR(c.expect("("));
    TRIPY_ASSIGN_OR_RETURN(a.a, dim_expr(c));
    TRIPY_RETURN_IF_ERROR(c.expect(","));
    TRIPY_ASSIGN_OR_RETURN(a.b, dim_expr(c));
    TRIPY_RETURN_IF_ERROR(c.expect(")"));
    if (c.peek() == '"') {
      TRIPY_ASSIGN_OR_RETURN(a.message, c.string());
    }
    g_.assertions.push_back(std::move(a));
    return ok_status();
  }

  // expr := term (('+' | '-') term)*; term := atom (('*' | '//' | '%') atom)*; atom := '(' expr ')'
  // | integer | symbol | (max | min | ceildiv) '(' expr ',' expr ')'. Parsed with explicit stacks
  // (operator precedence), not recursion: a text's nesting only grows the stacks, so a hostile one
  // cannot overflow the call stack, and any depth the printer writes (a parenthesis a binary op)
  // reads back.
  StatusOr<Dim> dim_expr(Cursor& c) {
    struct Open {  // an open '(' or function call: its function, arguments read, operators below it
      bool call;
      DimOp fn;
      int args;
      size_t ops_below;
    };
    std::vector<Dim> vals;
    std::vector<DimOp> ops;
    std::vector<Open> open;
    auto rank = [](DimOp op) { return op == DimOp::kAdd || op == DimOp::kSub ? 1 : 2; };
    auto apply = [&] {  // the top operator on the top two values
      const DimOp op = ops.back();
      ops.pop_back();
      const Dim rhs = vals.back();
      vals.pop_back();
      vals.back() = Dim::make(op, vals.back(), rhs);
    };
    auto floor = [&] { return open.empty() ? size_t{0} : open.back().ops_below; };
    static const std::map<std::string, DimOp> kFuncs = {
        {"max", DimOp::kMax}, {"min", DimOp::kMin}, {"ceildiv", DimOp::kCeilDiv}};
    while (true) {
      // An operand: opening parentheses and calls, then a number or a symbol.
      const char p = c.peek();
      if (p == '(') {
        c.consume("(");
        open.push_back({false, DimOp::kAdd, 0, ops.size()});
        continue;
      }
      if (p == '-' || std::isdigit(static_cast<unsigned char>(p))) {
        TRIPY_ASSIGN_OR_RETURN(int64_t v, c.integer());
        vals.push_back(Dim(v));
      } else {
        std::string name = c.ident(true);
        auto f = kFuncs.find(name);
        if (f != kFuncs.end() && c.consume("(")) {
          open.push_back({true, f->second, 0, ops.size()});
          continue;
        }
        TRIPY_ASSIGN_OR_RETURN(Dim sym, symbol_dim(c, name));
        vals.push_back(sym);
      }
      // After an operand: a binary operator, or the end of the innermost open expression.
      while (true) {
        DimOp op;
        if (c.consume("+")) {
          op = DimOp::kAdd;
        } else if (c.peek() == '-') {
          c.consume("-");
          op = DimOp::kSub;
        } else if (c.consume("*")) {
          op = DimOp::kMul;
        } else if (c.consume("//")) {
          op = DimOp::kFloorDiv;
        } else if (c.consume("%")) {
          op = DimOp::kMod;
        } else {
          while (ops.size() > floor()) apply();
          if (open.empty()) return vals.back();
          Open& o = open.back();
          if (o.call && o.args == 0) {  // the first argument: the second follows
            TRIPY_RETURN_IF_ERROR(c.expect(","));
            o.args = 1;
            break;
          }
          TRIPY_RETURN_IF_ERROR(c.expect(")"));
          if (o.call) {
            const Dim rhs = vals.back();
            vals.pop_back();
            vals.back() = Dim::make(o.fn, vals.back(), rhs);
          }
          open.pop_back();
          continue;  // the closed expression is an operand
        }
        while (ops.size() > floor() && rank(ops.back()) >= rank(op)) apply();
        ops.push_back(op);
        break;
      }
    }
  }
  StatusOr<Dim> symbol_dim(Cursor& c, const std::string& name) {
    auto s = symbol_ids_.find(name);
    if (s == symbol_ids_.end()) return c.error("unknown symbol '" + name + "' (declare it with 'sym')");
    return Dim::symbol(s->second);
  }

  StatusOr<std::vector<Dim>> dim_list(Cursor& c) {
    std::vector<Dim> out;
    TRIPY_RETURN_IF_ERROR(c.expect("["));
    while (!c.consume("]")) {
      if (!out.empty()) TRIPY_RETURN_IF_ERROR(c.expect(","));
      TRIPY_ASSIGN_OR_RETURN(Dim d, dim_expr(c));
      out.push_back(d);
    }
    return out;
  }

  StatusOr<std::vector<int64_t>> int_list(Cursor& c) {
    std::vector<int64_t> out;
    TRIPY_RETURN_IF_ERROR(c.expect("["));
    while (!c.consume("]")) {
      if (!out.empty()) TRIPY_RETURN_IF_ERROR(c.expect(","));
      TRIPY_ASSIGN_OR_RETURN(int64_t v, c.integer());
      out.push_back(v);
    }
    return out;
  }

  Status parse_constant_value(Cursor& c, Op& op, DType dtype, const Shape& shape) {
    if (!is_static(shape)) return c.error("a constant needs a static shape");
    // Text constants are test data: anything past 2**24 elements (or a negative size) is a typo.
    int64_t count = 1;
    for (int64_t d : static_dims(shape))
      if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > (int64_t{1} << 24))
        return c.error("a constant of shape " + shape_str(shape) + " is larger than text constants may be (2**24 elements)");
    Tensor t = Tensor::empty_host(dtype, static_dims(shape));
    if (c.consume("<")) {
      TRIPY_ASSIGN_OR_RETURN(int64_t n, c.integer());
      TRIPY_RETURN_IF_ERROR(c.expect("elements>"));
      if (n != t.numel()) return c.error("element count does not match the shape");
      // Elided weights: a deterministic pattern stands in for them (enough for pass tests).
      for (int64_t i = 0; i < n; ++i) {
        double v = dtype == DType::kBool ? i % 2 : is_floating(dtype) ? ((i * 7) % 13) * 0.25 - 1.5 : (i * 7) % 13 - 6;
        write_element(t, i, v);
      }
    } else {
      TRIPY_RETURN_IF_ERROR(c.expect("["));
      int64_t i = 0;
      while (!c.consume("]")) {
        if (i) TRIPY_RETURN_IF_ERROR(c.expect(","));
        TRIPY_ASSIGN_OR_RETURN(double v, c.number());
        if (i >= t.numel()) return c.error("too many elements for the shape");
        write_element(t, i++, v);
      }
      if (i != t.numel()) return c.error("too few elements for the shape");
    }
    op.constant = t;
    return ok_status();
  }

  Status parse_op(Cursor& c) {
    TRIPY_RETURN_IF_ERROR(c.expect("%"));
    TRIPY_ASSIGN_OR_RETURN(int64_t text_id, c.integer());
    if (ids_.count(text_id)) return c.error("%" + std::to_string(text_id) + " is defined twice");
    TRIPY_RETURN_IF_ERROR(c.expect(":"));
    std::string dt = c.ident();
    auto dtype = dtype_from_short_name(dt);
    if (!dtype) return c.error("unknown dtype '" + dt + "'");
    TRIPY_ASSIGN_OR_RETURN(Shape shape, dim_list(c));
    TRIPY_RETURN_IF_ERROR(c.expect("="));
    Op op;
    std::string name = c.ident();
    if (!op_from_text_name(name, op)) return c.error("unknown op '" + name + "'");
    TRIPY_RETURN_IF_ERROR(c.expect("("));
    while (!c.consume(")")) {
      if (!op.operands.empty()) TRIPY_RETURN_IF_ERROR(c.expect(","));
      TRIPY_ASSIGN_OR_RETURN(ValueId v, value_ref(c));
      op.operands.push_back(v);
    }
    std::string input_name;
    bool has_value = false;
    if (c.consume("{")) {
      const OpAttrs has = op_attrs(op.kind);
      while (!c.consume("}")) {
        if (c.consume(",")) continue;
        std::string key = c.ident();
        TRIPY_RETURN_IF_ERROR(c.expect("="));
        // The op's attributes, as its row of op_kinds.def says; the struct-valued ones by field.
        bool found = true;
        if ((has & kParameterAttrs) && key == "index") {
          TRIPY_ASSIGN_OR_RETURN(int64_t idx, c.integer());
          op.index = static_cast<int32_t>(idx);
        } else if ((has & kParameterAttrs) && key == "name") {
          TRIPY_ASSIGN_OR_RETURN(input_name, c.string());
        } else if ((has & kParameterAttrs) && key == "value_of") {
          TRIPY_ASSIGN_OR_RETURN(Dim sym, symbol_dim(c, c.ident(true)));
          op.shape_symbol = sym.symbol_id();
        } else if (op.kind == OpKind::kConstant && key == "value") {
          TRIPY_RETURN_IF_ERROR(parse_constant_value(c, op, *dtype, shape));
          has_value = true;
        } else if ((has & (kDims | kDimsIfAny)) && key == "dims") {
          TRIPY_ASSIGN_OR_RETURN(op.dims, int_list(c));
        } else if ((has & kSliceBounds) && key == "starts") {
          TRIPY_ASSIGN_OR_RETURN(op.starts, dim_list(c));
        } else if ((has & kSliceBounds) && key == "limits") {
          TRIPY_ASSIGN_OR_RETURN(op.limits, dim_list(c));
        } else if ((has & kSliceBounds) && key == "steps") {
          TRIPY_ASSIGN_OR_RETURN(op.steps, dim_list(c));
        } else if (has & kAttentionAttrs) {
          TRIPY_ASSIGN_OR_RETURN(found, parse_named_field(c, key, op.attention));
        } else if (has & kConvolutionAttrs) {
          TRIPY_ASSIGN_OR_RETURN(found, parse_named_field(c, key, op.convolution));
        } else if (has & kPoolingAttrs) {
          TRIPY_ASSIGN_OR_RETURN(found, parse_named_field(c, key, op.pooling));
        } else if (has & kPluginAttrs) {
          TRIPY_ASSIGN_OR_RETURN(found, parse_named_field(c, key, op.plugin));
        } else if (has & kKernelAttrs) {
          StatusOr<bool> parsed = rt::visit_kind_attrs(op.kernel, [&](auto& a) { return parse_named_field(c, key, a); });
          TRIPY_ASSIGN_OR_RETURN(found, std::move(parsed));
        } else {
          found = false;
        }
        if (!found) return c.error("unknown attribute '" + key + "' of " + std::string(op_kind_name(op.kind)));
      }
    }
    if (!c.done()) return c.error("unexpected text after the op");
    if (op.kind == OpKind::kConstant && !has_value) return c.error("a constant needs a value");
    // Output padding matters to transposed convolutions only; a forward one's is zeros.
    if (op.kind == OpKind::kConvolution && op.convolution.output_padding.empty())
      op.convolution.output_padding.assign(op.convolution.stride.size(), 0);
    ValueId id = g_.add(std::move(op), *dtype, std::move(shape));
    ids_[text_id] = id;
    const Op& added = g_.ops.back();
    if (added.kind == OpKind::kParameter) {
      if (added.index < 0 || added.index > 100000) return c.error("bad parameter index");
      size_t i = static_cast<size_t>(added.index);
      if (g_.inputs.size() <= i) {
        g_.inputs.resize(i + 1, -1);
        g_.input_names.resize(i + 1);
      }
      if (g_.inputs[i] >= 0) return c.error("parameter index used twice");
      g_.inputs[i] = id;
      g_.input_names[i] = input_name;
    }
    return ok_status();
  }

  Graph g_;
  std::unordered_map<int64_t, ValueId> ids_;
  std::map<std::string, int> symbol_ids_;
};

}  // namespace

StatusOr<Graph> parse_graph(std::string_view text) { return Parser().parse(text); }

}  // namespace tripy::flat

// Symbolic dims: construction with simplification, structural comparison, evaluation, bounds and
// printing. Lowering proves shape equalities with same_as(), so construction canonicalises: sums
// and products are flattened, constants folded and operands of commutative ops sorted.
#include "ir/dim.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>

namespace tripy {
namespace {

// Arithmetic saturates at the int64 range, as the runtime's shape program does: sizes may come
// from hostile text or absurd bounds, and must never be undefined behaviour (found by UBSan under
// fuzz/flat_ir_fuzz.cc).
int64_t saturate(__int128 v) {
  return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : static_cast<int64_t>(v);
}
int64_t sat_add(int64_t a, int64_t b) { return saturate(static_cast<__int128>(a) + b); }
int64_t sat_sub(int64_t a, int64_t b) { return saturate(static_cast<__int128>(a) - b); }
int64_t sat_mul(int64_t a, int64_t b) { return saturate(static_cast<__int128>(a) * b); }
int64_t sat_abs(int64_t a) { return a < 0 ? sat_sub(0, a) : a; }

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return sat_sub(0, a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t ceil_div(int64_t a, int64_t b) { return b == 0 ? 0 : sat_sub(0, floor_div(sat_sub(0, a), b)); }
int64_t floor_mod(int64_t a, int64_t b) { return b == 0 ? 0 : saturate(static_cast<__int128>(a) - static_cast<__int128>(floor_div(a, b)) * b); }

int64_t apply(DimOp op, int64_t a, int64_t b) {
  switch (op) {
    case DimOp::kAdd: return sat_add(a, b);
    case DimOp::kSub: return sat_sub(a, b);
    case DimOp::kMul: return sat_mul(a, b);
    case DimOp::kFloorDiv: return floor_div(a, b);
    case DimOp::kCeilDiv: return ceil_div(a, b);
    case DimOp::kMod: return floor_mod(a, b);
    case DimOp::kMax: return std::max(a, b);
    case DimOp::kMin: return std::min(a, b);
    default: return 0;
  }
}

// A total order on dims used to sort operands of commutative ops: non-constants first (so that
// "s0 * 2" rather than "2 * s0"), then symbols by id, then by op and operands.
int compare(const Dim& a, const Dim& b) {
  auto rank = [](const Dim& d) { return d.is_static() ? 2 : d.op() == DimOp::kSym ? 0 : 1; };
  if (rank(a) != rank(b)) return rank(a) < rank(b) ? -1 : 1;
  if (a.is_static()) {
    return a.static_value() == b.static_value() ? 0 : a.static_value() < b.static_value() ? -1 : 1;
  }
  if (a.op() == DimOp::kSym) {
    return a.symbol_id() == b.symbol_id() ? 0 : a.symbol_id() < b.symbol_id() ? -1 : 1;
  }
  if (a.op() != b.op()) return a.op() < b.op() ? -1 : 1;
  int c = compare(a.lhs(), b.lhs());
  return c != 0 ? c : compare(a.rhs(), b.rhs());
}

// Terms of a sum with their signs, found through nested + and -.
void collect_terms(const Dim& d, bool negate, std::vector<std::pair<Dim, bool>>& terms) {
  if (d.op() == DimOp::kAdd || d.op() == DimOp::kSub) {
    collect_terms(d.lhs(), negate, terms);
    collect_terms(d.rhs(), d.op() == DimOp::kSub ? !negate : negate, terms);
    return;
  }
  terms.emplace_back(d, negate);
}

void collect_factors(const Dim& d, std::vector<Dim>& factors) {
  if (d.op() == DimOp::kMul) {
    collect_factors(d.lhs(), factors);
    collect_factors(d.rhs(), factors);
    return;
  }
  factors.push_back(d);
}

// Symbols are input sizes, so sums, products, quotients, max and min of them and of
// non-negative constants are never negative.
bool never_negative(const Dim& d) {
  switch (d.op()) {
    case DimOp::kConst: return d.static_value() >= 0;
    case DimOp::kSym: return true;
    case DimOp::kAdd:
    case DimOp::kMul:
    case DimOp::kFloorDiv:
    case DimOp::kCeilDiv:
    case DimOp::kMax:
    case DimOp::kMin: return never_negative(d.lhs()) && never_negative(d.rhs());
    default: return false;
  }
}

}  // namespace

int SymbolTable::add(std::string name, int64_t min, int64_t opt, int64_t max) {
  int id = static_cast<int>(symbols.size());
  if (name.empty()) name = "s" + std::to_string(id);
  symbols.push_back(Symbol{id, std::move(name), min, opt, max});
  return id;
}

Dim::Dim(int64_t value) : node_(constant(value)) {}

std::shared_ptr<const Dim::Node> Dim::constant(int64_t value) {
  // Small sizes recur in every shape an op infers: one shared node each, so making them allocates
  // nothing (nodes are immutable).
  constexpr int64_t kShared = 256;
  static const std::vector<std::shared_ptr<const Node>>* const shared = [] {
    auto* nodes = new std::vector<std::shared_ptr<const Node>>();
    for (int64_t v = 0; v < kShared; ++v) nodes->push_back(std::make_shared<const Node>(Node{DimOp::kConst, v, nullptr, nullptr}));
    return nodes;
  }();
  if (value >= 0 && value < kShared) return (*shared)[static_cast<size_t>(value)];
  return std::make_shared<const Node>(Node{DimOp::kConst, value, nullptr, nullptr});
}

Dim Dim::symbol(int id) {
  return Dim(std::make_shared<const Node>(Node{DimOp::kSym, id, nullptr, nullptr}));
}

Dim Dim::make(DimOp op, const Dim& a, const Dim& b) {
  // Builds a node without simplifying (the cases below have already canonicalised).
  auto raw = [](DimOp o, const Dim& x, const Dim& y) {
    return Dim(std::make_shared<const Node>(
        Node{o, 0, std::make_shared<const Dim>(x), std::make_shared<const Dim>(y)}));
  };
  if (op == DimOp::kConst || op == DimOp::kSym) return a;
  if (a.is_static() && b.is_static()) {
    // Division by zero is left symbolic: it is the caller's error to report, never a crash here.
    bool div = op == DimOp::kFloorDiv || op == DimOp::kCeilDiv || op == DimOp::kMod;
    if (!(div && b.static_value() == 0)) return Dim(apply(op, a.static_value(), b.static_value()));
  }
  switch (op) {
    case DimOp::kAdd:
    case DimOp::kSub: {
      std::vector<std::pair<Dim, bool>> terms;
      collect_terms(a, false, terms);
      collect_terms(b, op == DimOp::kSub, terms);
      int64_t constant = 0;
      std::vector<Dim> pos, neg;
      for (auto& [t, negate] : terms) {
        if (t.is_static()) {
          constant = negate ? sat_sub(constant, t.static_value()) : sat_add(constant, t.static_value());
          continue;
        }
        // x - x cancels: remove a matching term of the opposite sign.
        auto& other = negate ? pos : neg;
        const Dim& term = t;  // C++17 lambdas cannot capture structured bindings (clang refuses)
        auto it = std::find_if(other.begin(), other.end(), [&](const Dim& o) { return o.same_as(term); });
        if (it != other.end()) {
          other.erase(it);
        } else {
          (negate ? neg : pos).push_back(t);
        }
      }
      auto less = [](const Dim& x, const Dim& y) { return compare(x, y) < 0; };
      std::stable_sort(pos.begin(), pos.end(), less);
      std::stable_sort(neg.begin(), neg.end(), less);
      if (pos.empty() && neg.empty()) return Dim(constant);
      // With no positive terms the sum starts from the constant: "(4 - s0)", not "((0 - s0) + 4)".
      Dim acc = pos.empty() ? Dim(constant) : pos[0];
      if (pos.empty()) constant = 0;
      for (size_t i = 1; i < pos.size(); ++i) acc = raw(DimOp::kAdd, acc, pos[i]);
      for (const Dim& n : neg) acc = raw(DimOp::kSub, acc, n);
      if (constant > 0) acc = raw(DimOp::kAdd, acc, Dim(constant));
      if (constant < 0) acc = raw(DimOp::kSub, acc, Dim(sat_sub(0, constant)));
      return acc;
    }
    case DimOp::kMul: {
      std::vector<Dim> factors;
      collect_factors(a, factors);
      collect_factors(b, factors);
      int64_t constant = 1;
      std::vector<Dim> rest;
      for (const Dim& f : factors) {
        if (f.is_static()) {
          constant = sat_mul(constant, f.static_value());
        } else {
          rest.push_back(f);
        }
      }
      if (constant == 0) return Dim(int64_t{0});
      std::stable_sort(rest.begin(), rest.end(),
                       [](const Dim& x, const Dim& y) { return compare(x, y) < 0; });
      Dim acc = rest[0];
      for (size_t i = 1; i < rest.size(); ++i) acc = raw(DimOp::kMul, acc, rest[i]);
      if (constant != 1) acc = raw(DimOp::kMul, acc, Dim(constant));
      return acc;
    }
    case DimOp::kFloorDiv:
    case DimOp::kCeilDiv:
      if (b.is_static() && b.static_value() == 1) return a;
      if (a.is_static() && a.static_value() == 0) return a;
      // (x * c) // c == x
      if (b.is_static() && b.static_value() > 0 && a.op() == DimOp::kMul && a.rhs().is_static() &&
          a.rhs().static_value() % b.static_value() == 0) {
        return make(DimOp::kMul, a.lhs(), Dim(a.rhs().static_value() / b.static_value()));
      }
      return raw(op, a, b);
    case DimOp::kMod:
      if (b.is_static() && b.static_value() == 1) return Dim(int64_t{0});
      if (a.same_as(b)) return Dim(int64_t{0});
      return raw(op, a, b);
    case DimOp::kMax:
    case DimOp::kMin: {
      if (a.same_as(b)) return a;
      // Sizes are never negative: max(size, c <= 0) is the size, min(size, c <= 0) is c.
      if (b.is_static() && b.static_value() <= 0 && never_negative(a)) return op == DimOp::kMax ? a : b;
      if (a.is_static() && a.static_value() <= 0 && never_negative(b)) return op == DimOp::kMax ? b : a;
      // Absorption, whatever the bounds: max(x, min(x, y)) == x and min(x, max(x, y)) == x.
      const DimOp dual = op == DimOp::kMax ? DimOp::kMin : DimOp::kMax;
      auto absorbs = [&](const Dim& x, const Dim& y) {
        return y.op() == dual && (y.lhs().same_as(x) || y.rhs().same_as(x));
      };
      if (absorbs(a, b)) return a;
      if (absorbs(b, a)) return b;
      const Dim& x = compare(a, b) <= 0 ? a : b;
      const Dim& y = compare(a, b) <= 0 ? b : a;
      return raw(op, x, y);
    }
    default: return raw(op, a, b);
  }
}

bool Dim::same_as(const Dim& o) const {
  if (node_ == o.node_) return true;
  if (op() != o.op()) return false;
  if (op() == DimOp::kConst || op() == DimOp::kSym) return node_->value == o.node_->value;
  return lhs().same_as(o.lhs()) && rhs().same_as(o.rhs());
}

size_t Dim::hash() const {
  size_t h = std::hash<int>()(static_cast<int>(op())) * 0x9e3779b97f4a7c15ULL;
  if (op() == DimOp::kConst || op() == DimOp::kSym) return h ^ std::hash<int64_t>()(node_->value);
  h ^= lhs().hash() + 0x9e3779b9 + (h << 6) + (h >> 2);
  h ^= rhs().hash() + 0x85ebca6b + (h << 6) + (h >> 2);
  return h;
}

int64_t Dim::eval(const std::vector<int64_t>& symbol_values) const {
  switch (op()) {
    case DimOp::kConst: return node_->value;
    case DimOp::kSym: {
      size_t id = static_cast<size_t>(node_->value);
      return id < symbol_values.size() ? symbol_values[id] : 0;
    }
    default: return apply(op(), lhs().eval(symbol_values), rhs().eval(symbol_values));
  }
}

namespace {

struct Interval {
  int64_t lo, hi;
};

Interval bounds(const Dim& d, const SymbolTable& table) {
  switch (d.op()) {
    case DimOp::kConst: return {d.static_value(), d.static_value()};
    case DimOp::kSym: {
      size_t id = static_cast<size_t>(d.symbol_id());
      if (id >= table.symbols.size()) return {0, 0};
      return {table.symbols[id].min, table.symbols[id].max};
    }
    default: break;
  }
  Interval a = bounds(d.lhs(), table), b = bounds(d.rhs(), table);
  switch (d.op()) {
    case DimOp::kAdd: return {sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
    case DimOp::kSub: return {sat_sub(a.lo, b.hi), sat_sub(a.hi, b.lo)};
    case DimOp::kMax: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    case DimOp::kMin: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case DimOp::kMod:
      if (b.lo > 0) {
        if (a.lo >= 0 && a.hi < b.lo) return a;  // x % y == x when 0 <= x < y
        return {0, b.hi - 1};
      }
      return {-std::max(sat_abs(b.lo), sat_abs(b.hi)), std::max(sat_abs(b.lo), sat_abs(b.hi))};
    case DimOp::kMul:
    case DimOp::kFloorDiv:
    case DimOp::kCeilDiv: {
      if (d.op() != DimOp::kMul && b.lo <= 0 && b.hi >= 0) {
        // The divisor's range contains 0: only the magnitude of the dividend bounds the result.
        int64_t m = std::max(sat_abs(a.lo), sat_abs(a.hi));
        return {-m, m};
      }
      // Monotonic in each argument over a sign-constant range: the extremes are at the corners.
      int64_t c[4] = {apply(d.op(), a.lo, b.lo), apply(d.op(), a.lo, b.hi),
                      apply(d.op(), a.hi, b.lo), apply(d.op(), a.hi, b.hi)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    default: return {0, 0};
  }
}

// Whether every symbol of `d` is in the table (bounds() reads others as [0, 0], which proves
// nothing).
bool symbols_known(const Dim& d, const SymbolTable& table) {
  if (d.op() == DimOp::kConst) return true;
  if (d.op() == DimOp::kSym) return static_cast<size_t>(d.symbol_id()) < table.symbols.size();
  return symbols_known(d.lhs(), table) && symbols_known(d.rhs(), table);
}

// a <= b over the bounds: by the intervals of a, b and b - a (in which shared terms cancel), then
// through the max and min nodes on either side, `depth` levels down.
bool le(const Dim& a, const Dim& b, const SymbolTable& table, int depth) {
  if (a.same_as(b)) return true;
  if (bounds(a, table).hi <= bounds(b, table).lo) return true;
  if (bounds(b - a, table).lo >= 0) return true;
  if (depth == 0) return false;
  auto rec = [&](const Dim& x, const Dim& y) { return le(x, y, table, depth - 1); };
  if (a.op() == DimOp::kMin && (rec(a.lhs(), b) || rec(a.rhs(), b))) return true;
  if (a.op() == DimOp::kMax && rec(a.lhs(), b) && rec(a.rhs(), b)) return true;
  if (b.op() == DimOp::kMax && (rec(a, b.lhs()) || rec(a, b.rhs()))) return true;
  if (b.op() == DimOp::kMin && rec(a, b.lhs()) && rec(a, b.rhs())) return true;
  return false;
}

constexpr int kProofDepth = 6;

}  // namespace

bool provably_le(const Dim& a, const Dim& b, const SymbolTable& table) {
  return symbols_known(a, table) && symbols_known(b, table) && le(a, b, table, kProofDepth);
}

Dim Dim::simplified(const SymbolTable& table) const {
  if (op() == DimOp::kConst || op() == DimOp::kSym) return *this;
  const Dim a = lhs().simplified(table), b = rhs().simplified(table);
  auto leq = [&](const Dim& x, const Dim& y) { return provably_le(x, y, table); };
  switch (op()) {
    case DimOp::kMax:
      if (leq(b, a)) return a;
      if (leq(a, b)) return b;
      break;
    case DimOp::kMin:
      if (leq(a, b)) return a;
      if (leq(b, a)) return b;
      break;
    case DimOp::kMod:  // x % y == x when 0 <= x < y
      if (leq(Dim(int64_t{0}), a) && leq(a + Dim(1), b)) return a;
      break;
    case DimOp::kFloorDiv:  // x // y == 0 when 0 <= x < y
      if (leq(Dim(int64_t{0}), a) && leq(a + Dim(1), b)) return Dim(int64_t{0});
      break;
    case DimOp::kCeilDiv:  // ceildiv(x, y) == 1 when 0 < x <= y
      if (leq(Dim(1), a) && leq(a, b)) return Dim(1);
      break;
    default: break;
  }
  if (a.node_ == lhs().node_ && b.node_ == rhs().node_) return *this;
  return make(op(), a, b);
}

Shape simplified(const Shape& s, const SymbolTable& table) {
  Shape out;
  out.reserve(s.size());
  for (const Dim& d : s) out.push_back(d.simplified(table));
  return out;
}

int64_t Dim::upper_bound(const SymbolTable& table) const { return bounds(*this, table).hi; }
int64_t Dim::lower_bound(const SymbolTable& table) const { return bounds(*this, table).lo; }

int64_t Dim::opt_value(const SymbolTable& table) const {
  std::vector<int64_t> values;
  values.reserve(table.symbols.size());
  for (const Symbol& s : table.symbols) values.push_back(s.opt);
  return eval(values);
}

std::string Dim::str(const SymbolTable* table) const {
  switch (op()) {
    case DimOp::kConst: return std::to_string(node_->value);
    case DimOp::kSym: {
      size_t id = static_cast<size_t>(node_->value);
      if (table && id < table->symbols.size()) return table->symbols[id].name;
      return "s" + std::to_string(node_->value);
    }
    default: break;
  }
  std::string a = lhs().str(table), b = rhs().str(table);
  switch (op()) {
    case DimOp::kAdd: return "(" + a + " + " + b + ")";
    case DimOp::kSub: return "(" + a + " - " + b + ")";
    case DimOp::kMul: return "(" + a + " * " + b + ")";
    case DimOp::kFloorDiv: return "(" + a + " // " + b + ")";
    case DimOp::kMod: return "(" + a + " % " + b + ")";
    case DimOp::kCeilDiv: return "ceildiv(" + a + ", " + b + ")";
    case DimOp::kMax: return "max(" + a + ", " + b + ")";
    case DimOp::kMin: return "min(" + a + ", " + b + ")";
    default: return "?";
  }
}

Dim operator+(const Dim& a, const Dim& b) { return Dim::make(DimOp::kAdd, a, b); }
Dim operator-(const Dim& a, const Dim& b) { return Dim::make(DimOp::kSub, a, b); }
Dim operator*(const Dim& a, const Dim& b) { return Dim::make(DimOp::kMul, a, b); }

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].same_as(b[i])) return false;
  }
  return true;
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
}

std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) out.push_back(d.is_static() ? d.static_value() : -1);
  return out;
}

Shape shape_of(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

Dim num_elements(const Shape& s) {
  Dim n(int64_t{1});
  for (const Dim& d : s) n = n * d;
  return n;
}

std::string shape_str(const Shape& s, const SymbolTable* table) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str(table);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

}  // namespace tripy

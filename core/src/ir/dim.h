// Symbolic dimensions: a dim is an integer expression over symbols with [min, opt, max] bounds.
// Static dims are constant expressions, so there is one code path for static and dynamic shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tripy {

struct Symbol {
  int id = 0;
  std::string name;  // the NamedDimension name, or "s<id>"
  int64_t min = 0, opt = 0, max = 0;
};

// All symbols of one graph; ids index `symbols`.
struct SymbolTable {
  std::vector<Symbol> symbols;
  int add(std::string name, int64_t min, int64_t opt, int64_t max);
};

enum class DimOp : uint8_t { kConst, kSym, kAdd, kSub, kMul, kFloorDiv, kCeilDiv, kMod, kMax, kMin };

class Dim {
 public:
  Dim() : Dim(int64_t{0}) {}
  Dim(int64_t value);  // NOLINT: a static dim converts implicitly
  static Dim symbol(int id);
  static Dim make(DimOp op, const Dim& a, const Dim& b);  // simplifies constants and identities

  bool is_static() const { return node_->op == DimOp::kConst; }
  int64_t static_value() const { return node_->value; }  // only when is_static()
  DimOp op() const { return node_->op; }
  int symbol_id() const { return static_cast<int>(node_->value); }  // only for kSym
  const Dim& lhs() const { return *node_->a; }
  const Dim& rhs() const { return *node_->b; }

  // Structural equality after simplification (sufficient for what lowering must prove).
  bool same_as(const Dim& o) const;
  size_t hash() const;
  // Value for concrete symbol values (indexed by symbol id).
  int64_t eval(const std::vector<int64_t>& symbol_values) const;
  // Interval bounds given the symbols' [min, max]; `at_opt` evaluates at each symbol's opt.
  int64_t upper_bound(const SymbolTable& table) const;
  int64_t lower_bound(const SymbolTable& table) const;
  int64_t opt_value(const SymbolTable& table) const;
  // The same value for every symbol value inside the table's bounds, with the max, min, mod and
  // division nodes that those bounds decide folded away: min(s, 1024) is s when s <= 1024, so a
  // mask sliced to a dynamic length has that length's shape and fusion sees equal shapes.
  Dim simplified(const SymbolTable& table) const;
  // "4", "s0", "(s0 * 2)"; symbols print their name when a table is given.
  std::string str(const SymbolTable* table = nullptr) const;

 private:
  struct Node {
    DimOp op;
    int64_t value;  // constant, or symbol id
    std::shared_ptr<const Dim> a, b;
  };
  explicit Dim(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static std::shared_ptr<const Node> constant(int64_t value);
  std::shared_ptr<const Node> node_;
};

Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim operator*(const Dim& a, const Dim& b);

// Whether a <= b for every symbol value inside the table's bounds; false when it cannot tell.
bool provably_le(const Dim& a, const Dim& b, const SymbolTable& table);

using Shape = std::vector<Dim>;
bool same_shape(const Shape& a, const Shape& b);
bool is_static(const Shape& s);
std::vector<int64_t> static_dims(const Shape& s);  // only when is_static(s)
Shape simplified(const Shape& s, const SymbolTable& table);  // each dim's simplified()
Shape shape_of(const std::vector<int64_t>& dims);
Dim num_elements(const Shape& s);
// "(3, 4)" — the form error messages use.
std::string shape_str(const Shape& s, const SymbolTable* table = nullptr);

}  // namespace tripy

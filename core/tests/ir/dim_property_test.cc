// Symbolic dims against brute force: seeded random expressions over three bounded symbols, each
// evaluated at every symbol value inside the bounds by an evaluator written here, must agree with
// Dim's construction-time folding, its simplified() form, its interval bounds and provably_le.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "ir/dim.h"

namespace tripy {
namespace {

// An expression tree of this test's own, with Python's integer semantics.
struct Expr {
  DimOp op = DimOp::kConst;
  int64_t value = 0;  // constant, or symbol id
  std::shared_ptr<Expr> a, b;
};
using ExprRef = std::shared_ptr<Expr>;

int64_t floor_div(int64_t x, int64_t y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); }

int64_t reference(const Expr& e, const std::vector<int64_t>& s) {
  if (e.op == DimOp::kConst) return e.value;
  if (e.op == DimOp::kSym) return s[static_cast<size_t>(e.value)];
  const int64_t x = reference(*e.a, s), y = reference(*e.b, s);
  switch (e.op) {
    case DimOp::kAdd: return x + y;
    case DimOp::kSub: return x - y;
    case DimOp::kMul: return x * y;
    case DimOp::kFloorDiv: return floor_div(x, y);
    case DimOp::kCeilDiv: return -floor_div(-x, y);
    case DimOp::kMod: return x - y * floor_div(x, y);
    case DimOp::kMax: return std::max(x, y);
    case DimOp::kMin: return std::min(x, y);
    default: return 0;
  }
}

std::string text(const Expr& e) {
  if (e.op == DimOp::kConst) return std::to_string(e.value);
  if (e.op == DimOp::kSym) return "s" + std::to_string(e.value);
  static const char* names[] = {"", "", "+", "-", "*", "//", "ceildiv", "%", "max", "min"};
  return "(" + text(*e.a) + " " + names[static_cast<int>(e.op)] + " " + text(*e.b) + ")";
}

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  ExprRef leaf(bool positive) {
    auto e = std::make_shared<Expr>();
    if (pick(3) == 0 || positive) {
      // Divisors are positive: a constant in [1, 5] or a symbol whose minimum is at least 1.
      if (positive && pick(2) == 0) {
        e->op = DimOp::kSym;
        e->value = static_cast<int64_t>(pick(2));
      } else {
        e->op = DimOp::kConst;
        e->value = positive ? 1 + static_cast<int64_t>(pick(5)) : static_cast<int64_t>(pick(13)) - 3;
      }
    } else {
      e->op = DimOp::kSym;
      e->value = static_cast<int64_t>(pick(3));
    }
    return e;
  }

  ExprRef expr(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf(false);
    static const DimOp ops[] = {DimOp::kAdd, DimOp::kSub, DimOp::kMul, DimOp::kFloorDiv,
                                DimOp::kCeilDiv, DimOp::kMod, DimOp::kMax, DimOp::kMin};
    auto e = std::make_shared<Expr>();
    e->op = ops[pick(8)];
    e->a = expr(depth - 1);
    const bool divisor = e->op == DimOp::kFloorDiv || e->op == DimOp::kCeilDiv || e->op == DimOp::kMod;
    e->b = divisor ? leaf(true) : expr(depth - 1);
    return e;
  }

 private:
  uint32_t pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  std::mt19937 rng_;
};

Dim build(const Expr& e) {
  if (e.op == DimOp::kConst) return Dim(e.value);
  if (e.op == DimOp::kSym) return Dim::symbol(static_cast<int>(e.value));
  return Dim::make(e.op, build(*e.a), build(*e.b));
}

SymbolTable table() {
  SymbolTable t;
  t.add("s0", 1, 2, 7);
  t.add("s1", 2, 3, 5);
  t.add("s2", 0, 1, 3);
  return t;
}

// Every symbol value inside the table's bounds.
std::vector<std::vector<int64_t>> assignments(const SymbolTable& t) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t a = t.symbols[0].min; a <= t.symbols[0].max; ++a)
    for (int64_t b = t.symbols[1].min; b <= t.symbols[1].max; ++b)
      for (int64_t c = t.symbols[2].min; c <= t.symbols[2].max; ++c) out.push_back({a, b, c});
  return out;
}

TEST(DimProperty, FoldingSimplificationAndBoundsAgreeWithBruteForce) {
  const SymbolTable t = table();
  const auto all = assignments(t);
  Generator gen(20261126);
  for (int n = 0; n < 3000; ++n) {
    const ExprRef e = gen.expr(4);
    const Dim d = build(*e);
    const Dim s = d.simplified(t);
    const int64_t lo = d.lower_bound(t), hi = d.upper_bound(t);
    for (const auto& v : all) {
      const int64_t want = reference(*e, v);
      ASSERT_EQ(d.eval(v), want) << text(*e) << " folded to " << d.str() << " at s = " << v[0] << ", " << v[1] << ", " << v[2];
      ASSERT_EQ(s.eval(v), want) << text(*e) << " simplified to " << s.str() << " at s = " << v[0] << ", " << v[1] << ", " << v[2];
      ASSERT_LE(lo, want) << text(*e) << " lower bound";
      ASSERT_GE(hi, want) << text(*e) << " upper bound";
    }
  }
}

TEST(DimProperty, ProvablyLeHoldsEverywhereItSaysSo) {
  const SymbolTable t = table();
  const auto all = assignments(t);
  Generator gen(7);
  int proved = 0;
  for (int n = 0; n < 3000; ++n) {
    const ExprRef a = gen.expr(3), b = gen.expr(3);
    if (!provably_le(build(*a), build(*b), t)) continue;
    ++proved;
    for (const auto& v : all)
      ASSERT_LE(reference(*a, v), reference(*b, v)) << text(*a) << " <= " << text(*b) << " was claimed";
  }
  EXPECT_GT(proved, 100);  // the property was exercised, not vacuous
}

}  // namespace
}  // namespace tripy

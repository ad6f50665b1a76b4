// Symbolic dims: simplification, structural equality, evaluation, bounds and printing.
#include "ir/dim.h"

#include <gtest/gtest.h>

namespace tripy {
namespace {

TEST(Dim, ConstantsFold) {
  EXPECT_EQ((Dim(3) + Dim(4)).static_value(), 7);
  EXPECT_EQ((Dim(3) * Dim(4)).static_value(), 12);
  EXPECT_EQ(Dim::make(DimOp::kFloorDiv, -7, 2).static_value(), -4);
  EXPECT_EQ(Dim::make(DimOp::kCeilDiv, 7, 2).static_value(), 4);
  EXPECT_EQ(Dim::make(DimOp::kMod, -7, 3).static_value(), 2);
  EXPECT_EQ(Dim::make(DimOp::kMax, 3, 9).static_value(), 9);
  EXPECT_EQ(Dim::make(DimOp::kMin, 3, 9).static_value(), 3);
}

TEST(Dim, DivisionByZeroStaysSymbolic) {
  Dim d = Dim::make(DimOp::kFloorDiv, 4, 0);
  EXPECT_FALSE(d.is_static());
}

TEST(Dim, IdentitiesSimplify) {
  Dim s = Dim::symbol(0);
  EXPECT_TRUE((s + 0).same_as(s));
  EXPECT_TRUE((s * 1).same_as(s));
  EXPECT_TRUE((s * 0).is_static());
  EXPECT_EQ((s * 0).static_value(), 0);
  EXPECT_TRUE((s - s).is_static());
  EXPECT_EQ((s - s).static_value(), 0);
  EXPECT_TRUE(Dim::make(DimOp::kFloorDiv, s, 1).same_as(s));
  EXPECT_TRUE(Dim::make(DimOp::kFloorDiv, s * 6, 3).same_as(s * 2));
  EXPECT_TRUE(Dim::make(DimOp::kMax, s, s).same_as(s));
  // Sizes are never negative, so clamping them at zero changes nothing (slice shapes do this).
  EXPECT_TRUE(Dim::make(DimOp::kMax, s * 2 + 1, 0).same_as(s * 2 + 1));
  EXPECT_EQ(Dim::make(DimOp::kMin, 0, s).static_value(), 0);
  EXPECT_FALSE(Dim::make(DimOp::kMax, s - 4, 0).same_as(s - 4));
}

TEST(Dim, CommutativeOpsAreCanonical) {
  Dim a = Dim::symbol(0), b = Dim::symbol(1), c = Dim::symbol(2);
  EXPECT_TRUE((a + b).same_as(b + a));
  EXPECT_TRUE((a * b).same_as(b * a));
  EXPECT_TRUE(((a + b) + c).same_as(a + (c + b)));
  EXPECT_TRUE((a * 2 * 3).same_as(a * 6));
  EXPECT_TRUE((a + 2 - 2).same_as(a));
  EXPECT_TRUE((a + b - a).same_as(b));
  EXPECT_TRUE(Dim::make(DimOp::kMax, a, b).same_as(Dim::make(DimOp::kMax, b, a)));
  EXPECT_FALSE((a + b).same_as(a * b));
  EXPECT_EQ((a + b).hash(), (b + a).hash());
}

TEST(Dim, PrintsWithAndWithoutTable) {
  SymbolTable t;
  t.add("batch", 1, 2, 4);
  t.add("", 1, 1, 8);
  Dim d = Dim(2) * Dim::symbol(0);
  EXPECT_EQ(d.str(), "(s0 * 2)");
  EXPECT_EQ(d.str(&t), "(batch * 2)");
  EXPECT_EQ(Dim::symbol(1).str(&t), "s1");
  EXPECT_EQ((Dim(4) - Dim::symbol(0)).str(), "(4 - s0)");
  EXPECT_EQ((Dim::symbol(0) - 1).str(), "(s0 - 1)");
  EXPECT_EQ(Dim(4).str(), "4");
}

TEST(Dim, EvalAndBounds) {
  SymbolTable t;
  t.add("a", 1, 2, 4);
  t.add("b", 3, 5, 10);
  Dim a = Dim::symbol(0), b = Dim::symbol(1);
  Dim e = a * b + 1;
  EXPECT_EQ(e.eval({3, 7}), 22);
  EXPECT_EQ(e.upper_bound(t), 41);
  EXPECT_EQ(e.lower_bound(t), 4);
  EXPECT_EQ(e.opt_value(t), 11);
  Dim s = b - a;
  EXPECT_EQ(s.lower_bound(t), -1);
  EXPECT_EQ(s.upper_bound(t), 9);
  Dim q = Dim::make(DimOp::kCeilDiv, b, 2);
  EXPECT_EQ(q.upper_bound(t), 5);
  EXPECT_EQ(q.lower_bound(t), 2);
  Dim m = Dim::make(DimOp::kMod, b, 4);
  EXPECT_EQ(m.upper_bound(t), 3);
}

TEST(Dim, MinAndMaxAbsorbWhateverTheBounds) {
  Dim s = Dim::symbol(0), t = Dim::symbol(1);
  EXPECT_TRUE(Dim::make(DimOp::kMax, s, Dim::make(DimOp::kMin, s, 1024)).same_as(s));
  EXPECT_TRUE(Dim::make(DimOp::kMax, Dim::make(DimOp::kMin, 1024, s), s).same_as(s));
  EXPECT_TRUE(Dim::make(DimOp::kMin, s, Dim::make(DimOp::kMax, s, t)).same_as(s));
  EXPECT_FALSE(Dim::make(DimOp::kMax, s, Dim::make(DimOp::kMin, t, 1024)).same_as(s));
}

TEST(Dim, BoundsDecideMinMaxModAndDivision) {
  SymbolTable table;
  table.add("T", 1, 512, 1024);
  table.add("B", 2, 4, 8);
  Dim T = Dim::symbol(0), B = Dim::symbol(1);
  auto mn = [](const Dim& a, const Dim& b) { return Dim::make(DimOp::kMin, a, b); };
  auto mx = [](const Dim& a, const Dim& b) { return Dim::make(DimOp::kMax, a, b); };
  // GPT-2's sliced causal mask: bias[:T, :T] of a 1024-row buffer has T rows when T <= 1024.
  EXPECT_TRUE(mn(T, 1024).simplified(table).same_as(T));
  EXPECT_TRUE(mx(T, mn(T, 1024)).simplified(table).same_as(T));
  EXPECT_TRUE(mx(T, 1).simplified(table).same_as(T));
  EXPECT_TRUE(mx(T, 2).simplified(table).same_as(mx(T, 2)));  // T may be 1
  EXPECT_TRUE(mn(T, 1000).simplified(table).same_as(mn(T, 1000)));  // T may pass 1000
  EXPECT_TRUE(mn(T + 8, B).simplified(table).same_as(B));  // T + 8 >= 9 > 8 >= B
  EXPECT_TRUE(mx(T + 8, B).simplified(table).same_as(T + 8));
  EXPECT_TRUE(mx(T, T - 1).simplified(table).same_as(T));   // the difference cancels to 1
  EXPECT_TRUE(mn(T, B).simplified(table).same_as(mn(T, B)));  // either may be smaller
  // Nested: min(T, max(B, 1024)) is T; max(min(T, 4096), min(T, 2048)) is T.
  EXPECT_TRUE(mn(T, mx(B, 1024)).simplified(table).same_as(T));
  EXPECT_TRUE(mx(mn(T, 4096), mn(T, 2048)).simplified(table).same_as(T));
  // Inside larger expressions too.
  EXPECT_TRUE((mn(T, 1024) * 2 + 1).simplified(table).same_as(T * 2 + 1));
  // x % y and x // y when 0 <= x < y; ceildiv(x, y) when 0 < x <= y.
  EXPECT_TRUE(Dim::make(DimOp::kMod, B, 16).simplified(table).same_as(B));
  EXPECT_TRUE(Dim::make(DimOp::kMod, B, 8).simplified(table).same_as(Dim::make(DimOp::kMod, B, 8)));
  EXPECT_EQ(Dim::make(DimOp::kFloorDiv, B, 9).simplified(table).static_value(), 0);
  EXPECT_EQ(Dim::make(DimOp::kCeilDiv, T, 1024).simplified(table).static_value(), 1);
  EXPECT_FALSE(Dim::make(DimOp::kCeilDiv, T, 1023).simplified(table).is_static());
  // Every rewrite keeps the value at every point of the bounds.
  for (int64_t t = 1; t <= 1024; t += 97) {
    for (int64_t b = 2; b <= 8; ++b) {
      for (const Dim& d : {mn(T + 8, B), mx(T, mn(T, 1024)), mn(T, mx(B, 1024)), Dim::make(DimOp::kMod, B, 16)}) {
        EXPECT_EQ(d.simplified(table).eval({t, b}), d.eval({t, b}));
      }
    }
  }
  EXPECT_TRUE(provably_le(T, Dim(1024), table));
  EXPECT_FALSE(provably_le(T, Dim(1023), table));
  // A symbol missing from the table proves nothing.
  EXPECT_FALSE(provably_le(Dim::symbol(7), Dim(1 << 30), table));
  EXPECT_TRUE(mn(Dim::symbol(7), 4).simplified(table).same_as(mn(Dim::symbol(7), 4)));
}

TEST(Shape, Helpers) {
  Shape s = shape_of({3, 4});
  EXPECT_TRUE(is_static(s));
  EXPECT_EQ(static_dims(s), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(num_elements(s).static_value(), 12);
  EXPECT_EQ(shape_str(s), "(3, 4)");
  EXPECT_EQ(shape_str(shape_of({3})), "(3,)");
  EXPECT_EQ(shape_str({}), "()");
  EXPECT_TRUE(same_shape(s, shape_of({3, 4})));
  EXPECT_FALSE(same_shape(s, shape_of({4, 3})));
  Shape d = {Dim::symbol(0), 4};
  EXPECT_FALSE(is_static(d));
  EXPECT_EQ(shape_str(d), "(s0, 4)");
}

}  // namespace
}  // namespace tripy

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

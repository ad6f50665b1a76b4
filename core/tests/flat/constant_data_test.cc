// flat::is_lower_triangle, the causal-mask test attention matching reads constants with: the same
// answer as comparing every element's read_element value with 0, in every dtype, for the triangle,
// its inverse, and matrices one element off either; write_element's integers saturated.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "flat/constant_data.h"

namespace tripy::flat {
namespace {

// The element-by-element rule is_lower_triangle must agree with.
bool reference_triangle(const Tensor& t, bool inverted) {
  const std::vector<int64_t>& shape = t.shape();
  if (shape.size() < 2) return false;
  for (size_t d = 0; d + 2 < shape.size(); ++d)
    if (shape[d] != 1) return false;
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if ((read_element(t, i * cols + j) != 0) != ((j <= i) != inverted)) return false;
  return true;
}

Tensor triangle(DType dtype, std::vector<int64_t> shape, bool inverted, double one) {
  Tensor t = splat_tensor(dtype, shape, 0.0);
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if ((j <= i) != inverted) write_element(t, i * cols + j, one);
  return t;
}

const DType kDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3,
                         DType::kInt8,    DType::kInt32,   DType::kInt64,    DType::kBool};

TEST(IsLowerTriangle, AgreesWithEveryElementComparedWithZeroInEveryDtype) {
  for (DType dtype : kDTypes) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 1, 7, 7}, {5, 9}, {9, 5}, {1, 1}, {0, 4}}) {
      for (bool inverted : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + dims_str(shape) + (inverted ? " inverted" : ""));
        // A value nonzero in every dtype (bool stores it as 1); -1 for signed kinds.
        const double one = dtype == DType::kBool ? 1.0 : -1.0;
        Tensor t = triangle(dtype, shape, inverted, one);
        EXPECT_TRUE(is_lower_triangle(t, inverted));
        EXPECT_EQ(is_lower_triangle(t, !inverted), reference_triangle(t, !inverted));
        const int64_t rows = shape[shape.size() - 2], cols = shape.back();
        if (rows * cols == 0) continue;
        // One element flipped anywhere, the corners and the diagonal's neighbours among them.
        for (int64_t k = 0; k < rows * cols; ++k) {
          const double was = read_element(t, k);
          write_element(t, k, was != 0 ? 0.0 : one);
          ASSERT_FALSE(is_lower_triangle(t, inverted)) << "flipped element " << k;
          ASSERT_EQ(is_lower_triangle(t, !inverted), reference_triangle(t, !inverted)) << k;
          write_element(t, k, was);
        }
      }
    }
  }
}

TEST(IsLowerTriangle, NegativeZeroIsZeroAndNanIsNonzero) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor t = triangle(dtype, {3, 3}, false, NAN);
    write_element(t, 2, -0.0);  // above the diagonal: -0 must read as zero
    EXPECT_TRUE(is_lower_triangle(t, false));
    EXPECT_EQ(is_lower_triangle(t, false), reference_triangle(t, false));
  }
}

TEST(IsLowerTriangle, RefusesLeadingDimsOtherThanOneAndVectors) {
  EXPECT_FALSE(is_lower_triangle(triangle(DType::kFloat32, {2, 3, 3}, false, 1.0), false));
  EXPECT_FALSE(is_lower_triangle(splat_tensor(DType::kFloat32, {4}, 1.0), false));
}

TEST(WriteElement, IntegersSaturateAtTheirRangeAndNanIsZero) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  struct Case {
    DType dtype;
    double v, want;
  };
  for (const Case& c : {Case{DType::kInt8, 1e9, 127}, Case{DType::kInt8, -1e9, -128}, Case{DType::kInt8, nan, 0},
                        Case{DType::kInt32, 3e9, 2147483647.0}, Case{DType::kInt32, -inf, -2147483648.0},
                        Case{DType::kInt32, -7.9, -7}, Case{DType::kInt64, 1e30, 9223372036854775807.0},
                        Case{DType::kInt64, -1e30, -9223372036854775808.0}, Case{DType::kInt4, 99, 7}}) {
    const Tensor t = splat_tensor(c.dtype, {1}, c.v);
    EXPECT_EQ(read_element(t, 0), c.want) << static_cast<int>(c.dtype) << " " << c.v;
  }
}

}  // namespace
}  // namespace tripy::flat

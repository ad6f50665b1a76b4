// number_text: floats in error messages read as Python's repr() writes them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/number_text.h"

namespace tripy {
namespace {

TEST(NumberText, WritesTheShortestTextThatReadsBack) {
  EXPECT_EQ(number_text(0.5), "0.5");
  EXPECT_EQ(number_text(2.0), "2.0");  // a float stays visibly a float
  EXPECT_EQ(number_text(-3.0), "-3.0");
  EXPECT_EQ(number_text(0.1), "0.1");  // not 0.10000000000000001
  EXPECT_EQ(number_text(1e20), "1e+20");
  EXPECT_EQ(number_text(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(number_text(std::nan("")), "nan");
  for (double v : {1.0 / 3.0, 123456.789, 5e-324, 1.7976931348623157e308})
    EXPECT_EQ(std::strtod(number_text(v).c_str(), nullptr), v) << number_text(v);
}

}  // namespace
}  // namespace tripy

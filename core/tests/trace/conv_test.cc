// The convolution Trace op: its shape rule (stride, padding, dilation, groups, transposed), the
// errors users see, and its lowering to the one FlatIR convolution primitive.
#include <gtest/gtest.h>

#include "flat/ir.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

SourceRef here(int line) {
  return std::make_shared<SourceInfo>(SourceInfo{{"user.py", line, "main", -1, -1}});
}

NodeRef data(std::vector<int64_t> shape, int line = 1) {
  return make_data_node(Tensor::empty_host(DType::kFloat32, std::move(shape)), here(line));
}

Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> lo, std::vector<int64_t> hi,
                 std::vector<int64_t> dilation, int64_t groups, bool transposed = false,
                 std::vector<int64_t> output_padding = {}) {
  Attrs a;
  a.convolution.output_padding = output_padding.empty() ? std::vector<int64_t>(stride.size(), 0) : output_padding;
  a.convolution.stride = std::move(stride);
  a.convolution.pad_before = std::move(lo);
  a.convolution.pad_after = std::move(hi);
  a.convolution.dilation = std::move(dilation);
  a.convolution.groups = groups;
  a.convolution.transposed = transposed;
  return a;
}

StatusOr<NodeRef> conv(NodeRef x, NodeRef w, Attrs a) { return make_node("convolution", {x, w}, std::move(a), here(7)); }

TEST(Convolution, OutputSizeFollowsStridePaddingAndDilation) {
  // (7 + 1 + 1 - ((3 - 1) * 2 + 1)) / 2 + 1 = 3 and (6 + 0 + 2 - 2) / 1 + 1 = 7.
  auto out = conv(data({2, 4, 7, 6}), data({6, 2, 3, 2}), conv_attrs({2, 1}, {1, 0}, {1, 2}, {2, 1}, 2));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(shape_str(out.value()->shape), "(2, 6, 3, 7)");
  EXPECT_EQ(out.value()->dtype, DType::kFloat32);
}

TEST(Convolution, BatchMayBeDynamic) {
  auto table = std::make_shared<SymbolTable>();
  int s = table->add("batch", 1, 2, 8);
  NodeRef x = make_input_node(0, "x", DType::kFloat32, {Dim::symbol(s), Dim(3), Dim(5)}, Device{}, table, here(1));
  auto out = conv(x, data({4, 3, 3}), conv_attrs({1}, {1}, {1}, {1}, 1));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(shape_str(out.value()->shape, table.get()), "(batch, 4, 5)");
}

TEST(Convolution, MismatchedChannelsNameBothInputs) {
  auto out = conv(data({1, 3, 5, 5}, 2), data({8, 4, 3, 3}, 3), conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("the input has 3 channels, but the weight of shape (8, 4, 3, 3) with groups=1 expects 4"),
            std::string::npos)
      << out.status().message();
  ASSERT_EQ(out.status().notes().size(), 2u);
  EXPECT_EQ(out.status().notes()[0].where->at(0).line, 2);
  EXPECT_EQ(out.status().notes()[1].where->at(0).line, 3);
  EXPECT_EQ(out.status().where()->at(0).line, 7);
}

TEST(Convolution, RejectsKernelsLargerThanThePaddedInput) {
  auto out = conv(data({1, 1, 4, 4}), data({1, 1, 3, 3}), conv_attrs({1, 1}, {0, 0}, {0, 0}, {2, 1}, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("spans 5 elements in spatial dim 0, more than the padded input's 4"),
            std::string::npos)
      << out.status().message();
}

TEST(Convolution, RejectsBadConfigurations) {
  auto bad = [](NodeRef x, NodeRef w, Attrs a, const std::string& text) {
    auto out = conv(std::move(x), std::move(w), std::move(a));
    ASSERT_FALSE(out.ok()) << text;
    EXPECT_NE(out.status().message().find(text), std::string::npos) << out.status().message();
  };
  bad(data({1, 4, 5}), data({3, 2, 3}), conv_attrs({1}, {0}, {0}, {1}, 2), "must both be divisible by groups (2)");
  bad(data({1, 4, 5}), data({4, 4, 3}), conv_attrs({0}, {0}, {0}, {1}, 1), "strides and dilations must be at least 1");
  bad(data({1, 4, 5}), data({4, 4, 3, 3}), conv_attrs({1}, {0}, {0}, {1}, 1), "the weight has rank 4");
  bad(data({1, 4, 5}), data({4, 4, 3}), conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}, 1), "one entry per spatial dim");
  bad(data({4, 5}), data({4, 5}), conv_attrs({}, {}, {}, {}, 1), "with 1 to 3 spatial dims");
  // Past 2^30 the shape rule's sums and products would overflow int64.
  bad(data({1, 4, 5}), data({4, 4, 3}), conv_attrs({1}, {0}, {int64_t{1} << 62}, {1}, 1), "must be at most 2^30");
  bad(data({1, 4, 5}), data({4, 4, 3}), conv_attrs({1}, {0}, {0}, {1}, int64_t{1} << 62), "must be at most 2^30");
  auto ints = make_node("convolution", {make_data_node(Tensor::empty_host(DType::kInt32, {1, 1, 3}), here(1)),
                                        make_data_node(Tensor::empty_host(DType::kInt32, {1, 1, 1}), here(1))},
                        conv_attrs({1}, {0}, {0}, {1}, 1), here(1));
  EXPECT_FALSE(ints.ok());
}

TEST(Convolution, LowersToOneConvolutionPrimitive) {
  auto out = conv(data({1, 2, 5, 5}), data({4, 1, 3, 2}), conv_attrs({1, 2}, {1, 0}, {1, 1}, {1, 1}, 2));
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto lowered = lower_to_flat({out.value()}, LowerMode::kEager);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  const flat::Graph& g = lowered->graph;
  ASSERT_TRUE(flat::verify(g).ok()) << flat::verify(g).message();
  int convs = 0;
  for (const auto& o : g.ops) {
    convs += o.kind == flat::OpKind::kConvolution;
    EXPECT_NE(o.kind, flat::OpKind::kSlice);
  }
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(shape_str(g.value(g.outputs[0]).shape), "(1, 4, 5, 3)");
}

TEST(Convolution, TransposedOutputSizeIncludesOutputPadding) {
  // (4 - 1) * 2 - 1 - 0 + (3 - 1) * 1 + 1 + 1 = 9 and (3 - 1) * 1 - 0 - 0 + (2 - 1) * 2 + 1 = 5.
  auto out = conv(data({2, 6, 4, 3}), data({6, 2, 3, 2}),
                  conv_attrs({2, 1}, {1, 0}, {0, 0}, {1, 2}, 3, true, {1, 0}));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(shape_str(out.value()->shape), "(2, 6, 9, 5)");
}

TEST(Convolution, TransposedRejectsOutputPaddingAsLargeAsTheStride) {
  auto out = conv(data({1, 2, 4}), data({2, 1, 3}), conv_attrs({2}, {0}, {0}, {1}, 1, true, {2}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("output_padding (2,) must be non-negative and smaller"), std::string::npos)
      << out.status().message();
}

TEST(Convolution, SpatialDimsMayBeDynamicAndAreCheckedAtTheirSmallest) {
  auto table = std::make_shared<SymbolTable>();
  int n = table->add("n", 1, 2, 8), h = table->add("h", 4, 8, 16);
  NodeRef x = make_input_node(0, "x", DType::kFloat32, {Dim::symbol(n), Dim(3), Dim::symbol(h), Dim(9)}, Device{},
                              table, here(1));
  auto out = conv(x, data({4, 3, 3, 3}), conv_attrs({2, 1}, {1, 1}, {1, 1}, {1, 1}, 1));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value()->shape[3].static_value(), 9);
  std::vector<int64_t> values(2);
  values[static_cast<size_t>(n)] = 2;
  for (int64_t hv : {4, 5, 16}) {
    values[static_cast<size_t>(h)] = hv;
    EXPECT_EQ(out.value()->shape[2].eval(values), (hv + 2 - 3) / 2 + 1) << hv;
  }
  // A kernel spanning 7 rows does not fit the smallest padded height, 4 + 2.
  auto bad = conv(x, data({4, 3, 7, 3}), conv_attrs({1, 1}, {1, 1}, {1, 1}, {1, 1}, 1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("more than the smallest padded input's 6"), std::string::npos)
      << bad.status().message();
}

TEST(Convolution, WeightDtypeMustMatchTheInput) {
  auto half = make_data_node(Tensor::empty_host(DType::kFloat16, {4, 3, 3, 3}), here(4));
  auto out = make_node("convolution", {data({1, 3, 5, 5}), half}, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}, 1), here(7));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().where()->at(0).line, 7);
}

}  // namespace
}  // namespace tripy::trace

// The convolution Trace op: its shape rule (stride, padding, dilation, groups), the errors users
// see, and its im2col lowering (strided slices, one concatenation, one dot).
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
                 std::vector<int64_t> dilation, int64_t groups) {
  Attrs a;
  for (size_t i = 0; i < stride.size(); ++i) {
    a.steps.push_back(stride[i]);
    a.starts.push_back(lo[i]);
    a.limits.push_back(hi[i]);
  }
  a.dims = std::move(dilation);
  a.axis = groups;
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
  bad(data({4, 5}), data({4, 5}), conv_attrs({}, {}, {}, {}, 1), "at least one spatial dim");
  auto ints = make_node("convolution", {make_data_node(Tensor::empty_host(DType::kInt32, {1, 1, 3}), here(1)),
                                        make_data_node(Tensor::empty_host(DType::kInt32, {1, 1, 1}), here(1))},
                        conv_attrs({1}, {0}, {0}, {1}, 1), here(1));
  EXPECT_FALSE(ints.ok());
}

TEST(Convolution, LowersToSlicesOneConcatenationAndOneDot) {
  auto out = conv(data({1, 2, 5, 5}), data({4, 1, 3, 2}), conv_attrs({1, 2}, {1, 0}, {1, 1}, {1, 1}, 2));
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto lowered = lower_to_flat({out.value()}, LowerMode::kEager);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  const flat::Graph& g = lowered->graph;
  ASSERT_TRUE(flat::verify(g).ok()) << flat::verify(g).message();
  int slices = 0, dots = 0;
  for (const auto& o : g.ops) {
    slices += o.kind == flat::OpKind::kSlice;
    dots += o.kind == flat::OpKind::kDot;
  }
  EXPECT_EQ(slices, 6);  // one per kernel tap
  EXPECT_EQ(dots, 1);
  EXPECT_EQ(shape_str(g.value(g.outputs[0]).shape), "(1, 4, 5, 3)");
}

}  // namespace
}  // namespace tripy::trace

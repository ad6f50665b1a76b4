// The resize Trace op: its shape rule (sizes or scales, dynamic dims kept or resized to an int),
// the errors users see, and what its lowering builds (constant taps for static dims, taps
// computed in the graph for dynamic ones).
#include <gtest/gtest.h>

#include "flat/ir.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

SourceRef here(int line) {
  return std::make_shared<SourceInfo>(SourceInfo{{"user.py", line, "main", -1, -1}});
}

NodeRef data(std::vector<int64_t> shape, DType dt = DType::kFloat32) {
  return make_data_node(Tensor::empty_host(dt, std::move(shape)), here(1));
}

Attrs sizes(Shape shape, std::string mode = "linear") {
  Attrs a;
  a.shape = std::move(shape);
  a.mode = std::move(mode);
  return a;
}

Attrs scales(std::vector<double> s, std::string mode = "linear") {
  Attrs a;
  a.scales = std::move(s);
  a.mode = std::move(mode);
  return a;
}

StatusOr<NodeRef> resize(NodeRef x, Attrs a) { return make_node("resize", {x}, std::move(a), here(7)); }

std::string error_of(const StatusOr<NodeRef>& r) { return r.ok() ? "(no error)" : r.status().message(); }

int count_ops(const flat::Graph& g, flat::OpKind kind) {
  int n = 0;
  for (const flat::Op& op : g.ops) n += op.kind == kind;
  return n;
}

TEST(Resize, SizesAndScalesGiveTheOutputShape) {
  auto by_sizes = resize(data({2, 3, 4, 5}), sizes({2, 3, 8, 7}, "nearest"));
  ASSERT_TRUE(by_sizes.ok()) << error_of(by_sizes);
  EXPECT_EQ(shape_str(by_sizes.value()->shape), "(2, 3, 8, 7)");
  // floor(4 * 2.0) = 8 and floor(5 * 1.5) = 7.
  auto by_scales = resize(data({2, 3, 4, 5}), scales({1, 1, 2.0, 1.5}));
  ASSERT_TRUE(by_scales.ok()) << error_of(by_scales);
  EXPECT_EQ(shape_str(by_scales.value()->shape), "(2, 3, 8, 7)");
}

TEST(Resize, DynamicDimsAreKeptOrResizedToAnInt) {
  auto table = std::make_shared<SymbolTable>();
  const Dim n = Dim::symbol(table->add("N", 1, 2, 3));
  const Dim h = Dim::symbol(table->add("H", 1, 4, 12));
  NodeRef x = make_input_node(0, "x", DType::kFloat32, {n, h, Dim(5)}, Device{}, table, here(1));
  auto out = resize(x, sizes({n, 7, 9}, "cubic"));
  ASSERT_TRUE(out.ok()) << error_of(out);
  EXPECT_EQ(shape_str(out.value()->shape, table.get()), "(N, 7, 9)");

  auto lowered = lower_to_flat({out.value()}, LowerMode::kCompile, {x});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_TRUE(flat::verify(lowered.value().graph).ok());
  // Dim 1 (dynamic) reads its positions from an iota; dim 2 (static) from constant indices.
  EXPECT_EQ(count_ops(lowered.value().graph, flat::OpKind::kIota), 1);
  EXPECT_EQ(count_ops(lowered.value().graph, flat::OpKind::kGather), 8);  // 4 taps per resized dim

  EXPECT_NE(error_of(resize(x, sizes({h, 7, 9}))).find("the output size of dimension 0 must be an int or that "
                                                      "dimension's own size, but got H"),
            std::string::npos)
      << error_of(resize(x, sizes({h, 7, 9})));
  EXPECT_NE(error_of(resize(x, scales({1, 2.0, 1}))).find("dimension 1 is dynamic (H); resize it with output_shape"),
            std::string::npos);
}

TEST(Resize, KeptDimsLowerToNothing) {
  auto out = resize(data({2, 3}), sizes({2, 3}));
  ASSERT_TRUE(out.ok()) << error_of(out);
  auto lowered = lower_to_flat({out.value()}, LowerMode::kCompile);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(count_ops(lowered.value().graph, flat::OpKind::kGather), 0);
}

TEST(Resize, BadArgumentsAreErrorsAtTheCall) {
  EXPECT_EQ(error_of(resize(data({1, 2}), sizes({1, 4}, "area"))),
            "resize: unsupported mode 'area'; use 'nearest', 'linear' or 'cubic'.");
  EXPECT_EQ(error_of(resize(data({1, 2}, DType::kInt32), sizes({1, 4}))),
            "resize: linear interpolation needs a float tensor, but got dtype int32.");
  EXPECT_EQ(error_of(resize(data({1, 2}), sizes({4}))),
            "resize: expected 2 entries (one per dim), but got 1: (4,).");
  EXPECT_EQ(error_of(resize(data({1, 2}), scales({0.0, 1.0}))),
            "resize: scales must be positive, but got (0.0, 1.0).");
  EXPECT_EQ(error_of(resize(data({1, 2}), scales({1, 0.4}))),
            "resize: dimension 1 would have size 0; sizes must be at least 1.");
  auto r = resize(data({1, 2}), sizes({1, 0}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().where()->at(0).line, 7);  // the resize call
  // Nearest only copies elements: any dtype.
  EXPECT_TRUE(resize(data({1, 2}, DType::kInt32), sizes({1, 4}, "nearest")).ok());
}

}  // namespace
}  // namespace tripy::trace

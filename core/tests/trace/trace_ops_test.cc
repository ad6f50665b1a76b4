// Trace op rules: shape and dtype inference, the errors users see, and lowering to FlatIR.
#include <gtest/gtest.h>

#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

SourceRef here(int line) {
  return std::make_shared<SourceInfo>(SourceInfo{{"user.py", line, "main", -1, -1}});
}

NodeRef data(DType dt, std::vector<int64_t> shape, int line = 1) {
  return make_data_node(Tensor::empty_host(dt, std::move(shape)), here(line));
}

NodeRef op(const std::string& name, std::vector<NodeRef> in, Attrs attrs = {}) {
  auto n = make_node(name, std::move(in), std::move(attrs), here(10));
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? n.value() : nullptr;
}

TEST(TraceOps, BinaryOpsBroadcastNumpyStyle) {
  NodeRef out = op("add", {data(DType::kFloat32, {3, 1}), data(DType::kFloat32, {4})});
  EXPECT_EQ(shape_str(out->shape), "(3, 4)");
  EXPECT_EQ(out->dtype, DType::kFloat32);
  EXPECT_EQ(op("lt", {data(DType::kInt32, {2}), data(DType::kInt32, {2})})->dtype, DType::kBool);
}

TEST(TraceOps, IncompatibleBroadcastExplainsTheInsertedBroadcast) {
  auto r = make_node("add", {data(DType::kFloat32, {3, 4}, 9), data(DType::kFloat32, {3, 3}, 10)}, {}, here(5));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(3, 4) and (3, 3)"), std::string::npos) << r.status().message();
  ASSERT_GE(r.status().notes().size(), 3u);
  EXPECT_NE(r.status().notes()[0].text.find("broadcast the right operand of '+'"), std::string::npos);
  EXPECT_NE(r.status().notes()[0].text.find("to a shape of: (3, 4)"), std::string::npos);
  EXPECT_EQ(r.status().notes()[1].where->at(0).line, 9);   // where input 0 was created
  EXPECT_EQ(r.status().notes()[2].where->at(0).line, 10);  // and input 1
  EXPECT_EQ(r.status().where()->at(0).line, 5);            // the '+' itself
}

TEST(TraceOps, MixedDtypesAreRejectedNotPromoted) {
  auto r = make_node("mul", {data(DType::kFloat32, {2}), data(DType::kInt32, {2})}, {}, here(3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("float32 and int32"), std::string::npos);
}

TEST(TraceOps, DtypeRulesAreData) {
  auto r = make_node("exp", {data(DType::kInt32, {2})}, {}, here(3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must be one of: float32, float16, bfloat16"), std::string::npos);
  // Every op has a rule and a lowering.
  for (const OpDef* d : all_ops()) {
    EXPECT_NE(d->infer, nullptr) << d->name;
    EXPECT_NE(d->lower, nullptr) << d->name;
  }
}

TEST(TraceOps, AttributesAreDeclaredPerOpAndCheckedByName) {
  EXPECT_EQ(attr_named("keepdim"), attr::keepdim);
  EXPECT_EQ(attr_named("padding"), 0u);  // a convolution's field, inside its `conv` attribute
  EXPECT_EQ(attr_set_str(attr::dims | attr::keepdim), "dims, keepdim");
  EXPECT_TRUE(check_attrs("sum", attr::dims | attr::keepdim, here(3)).ok());
  EXPECT_TRUE(check_attrs("sum", 0, here(3)).ok());  // no dims: every dim
  Status extra = check_attrs("softmax", attr::dims | attr::keepdim, here(3));
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.message(), "softmax takes the attributes dims, not keepdim");
  EXPECT_EQ(extra.where()->at(0).line, 3);
  EXPECT_EQ(check_attrs("add", attr::axis, here(3)).message(), "'+' takes no attributes, not axis");
  EXPECT_EQ(check_attrs("slice", attr::starts | attr::limits, here(3)).message(),
            "slice needs the attributes steps");
  // Every declared requirement is an attribute the op reads.
  for (const OpDef* d : all_ops()) EXPECT_EQ(d->required & ~d->attrs, 0u) << d->name;
}

TEST(TraceOps, ReshapeInfersMinusOneAndChecksCounts) {
  Attrs a;
  a.shape = {Dim(2), Dim(-1)};
  EXPECT_EQ(shape_str(op("reshape", {data(DType::kFloat32, {3, 4})}, a)->shape), "(2, 6)");
  a.shape = {Dim(5), Dim(-1)};
  EXPECT_FALSE(make_node("reshape", {data(DType::kFloat32, {3, 4})}, a, here(1)).ok());
}

TEST(TraceOps, ReductionsNormaliseAndRejectDuplicateDims) {
  Attrs a;
  a.dims = {-1};
  a.keepdim = true;
  EXPECT_EQ(shape_str(op("sum", {data(DType::kFloat32, {2, 3})}, a)->shape), "(2, 1)");
  a.dims = {1, -1};
  EXPECT_FALSE(make_node("sum", {data(DType::kFloat32, {2, 3})}, a, here(1)).ok());
}

TEST(TraceOps, MatmulFollowsNumpyRules) {
  EXPECT_EQ(shape_str(op("matmul", {data(DType::kFloat32, {2, 3, 4}), data(DType::kFloat32, {4, 5})})->shape),
            "(2, 3, 5)");
  EXPECT_EQ(shape_str(op("matmul", {data(DType::kFloat32, {4}), data(DType::kFloat32, {4, 5})})->shape), "(5,)");
  EXPECT_FALSE(make_node("matmul", {data(DType::kFloat32, {2, 3}), data(DType::kFloat32, {4, 5})}, {}, here(1)).ok());
}

TEST(TraceOps, DynamicDimsStaySymbolic) {
  auto table = std::make_shared<SymbolTable>();
  int s = table->add("batch", 1, 2, 4);
  NodeRef x = make_input_node(0, "x", DType::kFloat32, {Dim::symbol(s), Dim(2)}, Device{}, table, here(1));
  NodeRef y = op("add", {x, data(DType::kFloat32, {2})});
  EXPECT_EQ(shape_str(y->shape, table.get()), "(batch, 2)");
  Attrs a;
  a.shape = {Dim(-1)};
  EXPECT_EQ(shape_str(op("reshape", {y}, a)->shape, table.get()), "((batch * 2),)");
}

TEST(TraceOps, LoweringInsertsBroadcastsThatSayWhy) {
  NodeRef out = op("add", {data(DType::kFloat32, {3, 4}), data(DType::kFloat32, {4})});
  auto lowered = lower_to_flat({out}, LowerMode::kEager);
  ASSERT_TRUE(lowered.ok());
  const flat::Graph& g = lowered->graph;
  EXPECT_EQ(g.inputs.size(), 2u);
  int broadcasts = 0;
  for (const auto& o : g.ops) {
    if (o.kind != flat::OpKind::kBroadcast) continue;
    ++broadcasts;
    EXPECT_EQ(o.origin->reason, "broadcast the right operand of '+' to a shape of (3, 4)");
  }
  EXPECT_EQ(broadcasts, 1);
  EXPECT_NE(g.str().find("add"), std::string::npos);
}

TEST(TraceOps, EagerLoweringMakesEvaluatedTensorsInputsAndCompileMakesThemConstants) {
  NodeRef out = op("exp", {data(DType::kFloat32, {2})});
  EXPECT_EQ(lower_to_flat({out}, LowerMode::kEager)->graph.inputs.size(), 1u);
  auto compiled = lower_to_flat({out}, LowerMode::kCompile, {});
  EXPECT_EQ(compiled->graph.inputs.size(), 0u);
  EXPECT_EQ(compiled->graph.ops[0].kind, flat::OpKind::kConstant);
}

}  // namespace
}  // namespace tripy::trace

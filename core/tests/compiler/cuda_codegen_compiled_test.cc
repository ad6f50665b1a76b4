// The CUDA code generator on programs the compiler builds (not hand-written ones): every fused
// kernel of common op patterns must generate. Needs no GPU, so CI exercises it.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA
#include "backend/cuda/codegen/cuda_sources.h"
#include "compiler/build_program.h"
#include "compiler/compile.h"
#include "flat/passes/passes.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy {
namespace {

using trace::Attrs;
using trace::NodeRef;

NodeRef data(std::vector<int64_t> shape, DType dt = DType::kFloat32) {
  return trace::make_data_node(Tensor::empty_host(dt, std::move(shape)), nullptr);
}

NodeRef op(const std::string& name, std::vector<NodeRef> in, Attrs a = {}) {
  auto n = trace::make_node(name, std::move(in), std::move(a), nullptr);
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.value();
}

// Lowers `out` as eager mode does (no optimisation) and as tp.compile does (optimised), builds
// the programs and generates every fused kernel.
void generate_all(const NodeRef& out) {
  auto lowered = trace::lower_to_flat({out}, trace::LowerMode::kEager);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  auto folded = flat::constant_fold(lowered->graph, evaluate_constant_graph);
  ASSERT_TRUE(folded.ok());
  for (const flat::Graph& g : {flat::dce(lowered->graph), flat::dce(flat::cse(flat::simplify(*folded)))}) {
  auto program = compiler::build_program(g);
  ASSERT_TRUE(program.ok()) << program.status().message();
  for (const auto& k : program->kernels) {
    if (k.kind != rt::KernelKind::kFused) continue;
    auto gen = rt::cuda::generate_fused(*program, k);
    ASSERT_TRUE(gen.ok()) << k.name << ": " << gen.status().message();
    EXPECT_NE(gen->source.find(gen->function), std::string::npos);
  }
  }
}

Attrs dims(std::vector<int64_t> d, bool keepdim = false) {
  Attrs a;
  a.dims = std::move(d);
  a.keepdim = keepdim;
  return a;
}

TEST(CudaCodegenCompiled, ElementwiseAndBroadcast) {
  generate_all(op("add", {data({3, 4}), data({4})}));
  generate_all(op("gelu", {data({2, 8})}));
}

TEST(CudaCodegenCompiled, ScalarResults) {
  generate_all(op("sum", {data({3, 4})}));                 // rank-0 output
  generate_all(op("exp", {data({})}));                     // rank-0 domain
  generate_all(op("mul", {data({}), data({})}));
}

TEST(CudaCodegenCompiled, RowReductions) {
  generate_all(op("softmax", {data({4, 8})}, dims({1})));
  generate_all(op("mean", {data({2, 3, 4})}, dims({-1}, true)));
  generate_all(op("argmax", {data({3, 5})}, dims({1})));
  generate_all(op("var", {data({6})}, dims({})));
}

TEST(CudaCodegenCompiled, Creation) {
  Attrs a;
  a.shape = {Dim(12)};
  a.axis = 0;
  generate_all(op("iota", {}, a));
  Attrs f;
  f.shape = {Dim(2), Dim(3)};
  f.fill = 1;
  generate_all(op("full", {}, f));
}

}  // namespace
}  // namespace tripy
#endif

#if TRIPY_WITH_CUDA
namespace tripy {
namespace {

// Values used several times (x*x, then that squared, ...) must not be re-expanded per use.
TEST(CudaCodegenCompiledDeep, SharedSubexpressionsStayLinear) {
  NodeRef x = data({4, 8});
  for (int i = 0; i < 40; ++i) x = op("mul", {x, x});
  generate_all(x);
  Attrs a;
  a.dims = {1};  // the normalized (trailing) dim
  a.eps = 1e-5;
  generate_all(op("layernorm", {data({4, 8}), data({8}), data({8})}, a));
}

}  // namespace
}  // namespace tripy
#endif

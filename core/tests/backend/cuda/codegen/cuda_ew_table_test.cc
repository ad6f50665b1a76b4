// The CUDA code generator's side of the primitive table (runtime/ew_ops_test.cc): it emits every
// op on exactly the kinds its row allows and rejects the rest, naming the kernel, the instruction
// and the op.
#include <gtest/gtest.h>

#include "../../../runtime/ew_ops_programs.h"
#include "backend/cuda/codegen/cuda_sources.h"

namespace tripy::cpu::testing {
namespace {

TEST(EwOpTable, TheCudaGeneratorEmitsEveryOpOnTheKindsItsRowAllowsAndRejectsTheRest) {
  for (const rt::EwOpInfo& r : rt::kEwOps) {
    if (!tiled(r.form)) continue;
    for (DType dt : kKindDTypes) {
      ProgramBuilder b;
      std::vector<Tensor> args;
      const Program p = one_op_program(r.op, dt, b, args);
      auto g = rt::cuda::generate_fused(p, p.kernels[0]);
      if (rt::ew_defined_on(r.op, rt::compute_kind(dt))) {
        EXPECT_TRUE(g.ok()) << r.name << " on " << dtype_name(dt) << ": " << g.status().message();
      } else {
        ASSERT_FALSE(g.ok()) << r.name << " on " << dtype_name(dt);
        EXPECT_NE(g.status().message().find("kernel 'fused_" + std::string(r.name) + "': instruction "),
                  std::string::npos);
        EXPECT_NE(g.status().message().find(std::string("(") + r.name + ") is not defined on " + std::string(dtype_name(dt))),
                  std::string::npos)
            << g.status().message();
      }
    }
  }
}

}  // namespace
}  // namespace tripy::cpu::testing

namespace tripy::rt::cuda {
namespace {

// Integer immediates past their type (a loaded file's, or int64's largest value, which reads back
// from its double as 2**63) are written saturated, as the CPU backend computes them.
TEST(EwOpTable, IntegerConstantsPastTheirTypeAreWrittenSaturated) {
  EXPECT_EQ(const_literal(DType::kInt64, 9223372036854775807.0), "(9223372036854775807LL)");
  EXPECT_EQ(const_literal(DType::kInt64, -1e300), "(-9223372036854775807LL - 1)");
  EXPECT_EQ(const_literal(DType::kInt32, 2.14774e9), "(2147483647)");
  EXPECT_EQ(const_literal(DType::kInt32, -7.0), "(-7)");
}

}  // namespace
}  // namespace tripy::rt::cuda

// The primitive table (ew_ops.def) and the one analysis of fused programs: every op has a name
// and a rule, every backend runs every op on exactly the kinds its row allows, and a program using
// an op outside its row is rejected alike by the validator, the CPU and the CUDA backend, naming
// the kernel, the instruction and the op (the CUDA code generator's side:
// tests/backend/cuda/codegen/cuda_ew_table_test.cc).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "ew_ops_programs.h"
#include "runtime/fused_analysis.h"
#if TRIPY_WITH_CUDA
#include "backend/cuda/cuda_codegen.h"
#endif

namespace tripy::cpu::testing {
namespace {

using rt::ComputeKind;
using rt::EwForm;

TEST(EwOpTable, EveryOpHasAUniqueNameAndAConsistentRule) {
  std::set<std::string> names, apis;
  for (const rt::EwOpInfo& r : rt::kEwOps) {
    const std::string name = r.name;
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    EXPECT_EQ(rt::ew_op_name(r.op), name);
    EXPECT_NE(r.kinds, 0) << name << " is defined on no kind";
    EXPECT_EQ(r.reduce != rt::ReduceKind::kNone, r.form == EwForm::kReduce) << name;
    if (r.commutative) EXPECT_TRUE(r.form == EwForm::kBinary || r.form == EwForm::kCompare) << name;
    if (!r.api) {
      EXPECT_EQ(r.api_dtypes, rt::ApiDTypes::kNone) << name;
      continue;
    }
    EXPECT_TRUE(apis.insert(r.api).second) << "duplicate API name " << r.api;
    ASSERT_NE(r.display, nullptr) << name;
    EXPECT_TRUE(r.form == EwForm::kUnary || r.form == EwForm::kBinary || r.form == EwForm::kCompare) << name;
    // The API's dtypes must be ones the primitive is defined on.
    const uint8_t need = r.api_dtypes == rt::ApiDTypes::kFloats    ? rt::ew_kinds::F
                         : r.api_dtypes == rt::ApiDTypes::kNumbers ? rt::ew_kinds::FI
                         : r.api_dtypes == rt::ApiDTypes::kBool    ? rt::ew_kinds::B
                         : r.api_dtypes == rt::ApiDTypes::kAny     ? rt::ew_kinds::FIB
                                                                   : 0;
    EXPECT_NE(need, 0) << name << " has an API but no dtype rule";
    EXPECT_EQ(r.kinds & need, need) << name << ": its API accepts kinds the primitive is not defined on";
  }
  EXPECT_STREQ(rt::ew_op_name(rt::EwOp::kNumOps), "invalid");
}

TEST(EwOpTable, TheCpuRunsEveryOpOnTheKindsItsRowAllowsAndRejectsTheRest) {
  for (const rt::EwOpInfo& r : rt::kEwOps) {
    if (!tiled(r.form)) continue;
    for (DType dt : kKindDTypes) {
      ProgramBuilder b;
      std::vector<Tensor> args;
      const Program p = one_op_program(r.op, dt, b, args);
      const bool defined = rt::ew_defined_on(r.op, rt::compute_kind(dt));
      const std::string at = std::string("instruction ") + std::to_string(p.kernels[0].fused.instrs.size() - 1) +
                             " (" + r.name + ")";
      auto run = b.run(args);
      Status valid = rt::validate_program(p);
      if (defined) {
        EXPECT_TRUE(run.ok()) << r.name << " on " << dtype_name(dt) << ": " << run.status().message();
        EXPECT_TRUE(valid.ok()) << r.name << " on " << dtype_name(dt) << ": " << valid.message();
        continue;
      }
      // Rejected, naming the kernel, the instruction and the op, by the CPU and the validator alike.
      ASSERT_FALSE(run.ok()) << r.name << " on " << dtype_name(dt);
      const std::string why = at + " is not defined on " + std::string(dtype_name(dt)) + " operands";
      EXPECT_EQ(run.status().message(), "kernel 'fused_" + std::string(r.name) + "': " + why);
      ASSERT_FALSE(valid.ok());
      EXPECT_NE(valid.message().find("kernel 0 ('fused_" + std::string(r.name) + "') " + why), std::string::npos)
          << valid.message();
    }
  }
}

// Malformed programs: the shared analysis names what is wrong, and every consumer says it alike.
TEST(FusedAnalysis, NamesTheInstructionAndTheFault) {
  struct Case {
    const char* name;
    std::function<void(rt::FusedProgram&)> mutate;
    const char* expected;
  };
  const Case cases[] = {
      {"later_operand", [](rt::FusedProgram& f) { f.instrs[2].a = 2; }, "instruction 2 (add) reads register 2, which is not an earlier one"},
      {"mixed_dtypes", [](rt::FusedProgram& f) { f.instrs[1].dtype = DType::kInt32; }, "instruction 1 (load) loads a int32 register from a float32 input"},
      {"compare_result", [](rt::FusedProgram& f) { f.instrs[2].op = rt::EwOp::kLt; }, "instruction 2 (lt) gives a float32 result, not bool"},
      {"opcode", [](rt::FusedProgram& f) { f.instrs[2].op = rt::EwOp::kNumOps; }, "instruction 2 has an invalid opcode"},
      {"unused_operand", [](rt::FusedProgram& f) { f.instrs[2].c = 0; }, "instruction 2 (add) sets operands it does not use"},
      {"reduce_from", [](rt::FusedProgram& f) { f.reduce_from = 0; }, "has reduce_from < rank but no reduction"},
  };
  for (const Case& c : cases) {
    ProgramBuilder b;
    std::vector<Tensor> args;
    Program p = one_op_program(rt::EwOp::kAdd, DType::kFloat32, b, args);
    c.mutate(p.kernels[0].fused);
    auto an = rt::analyze_fused_program(p, p.kernels[0]);
    ASSERT_FALSE(an.ok()) << c.name;
    EXPECT_NE(an.status().message().find(c.expected), std::string::npos) << c.name << ": " << an.status().message();
    auto cpu = cpu_backend()->load(std::make_shared<Program>(p), {});
    ASSERT_FALSE(cpu.ok()) << c.name;
    EXPECT_EQ(cpu.status().message(), "kernel 'fused_add': " + an.status().message());
#if TRIPY_WITH_CUDA
    auto g = rt::cuda::analyze_fused(p, p.kernels[0]);  // what CudaBackend::load checks
    ASSERT_FALSE(g.ok()) << c.name;
    EXPECT_EQ(g.status().message(), "kernel 'fused_add': " + an.status().message());
#endif
    Status valid = rt::validate_program(p);
    EXPECT_NE(valid.message().find("kernel 0 ('fused_add') " + an.status().message()), std::string::npos) << valid.message();
  }
}

}  // namespace
}  // namespace tripy::cpu::testing

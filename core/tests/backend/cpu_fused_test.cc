// Tests of fused elementwise kernels on the CPU backend against reference loops.
#include <cmath>

#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;

TEST(CpuFused, AddsTwoMatrices) {
  ProgramBuilder b;
  int32_t x = b.input(F, {2, 3}), y = b.input(F, {2, 3}), o = b.output(F, {2, 3});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_add", {x, y}, {o});
  k.fused.domain = b.dims({2, 3});
  k.fused.reduce_from = 2;
  k.fused.input_axes = {{0, 1}, {0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kAdd, F, 0, 1)};
  k.fused.output_regs = {2};
  auto out = b.run({f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {10, 20, 30, 40, 50, 60})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

}  // namespace
}  // namespace tripy::cpu::testing

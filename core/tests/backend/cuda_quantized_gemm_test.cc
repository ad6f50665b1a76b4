// The quantized dot's cuBLASLt problem, without a GPU: which architectures run which low-precision
// GEMMs, how an int8 / float8 kDot maps to a "TN" problem with the accumulator as output, and which
// kernels the CUDA backend refuses (a layout or dtype that flat::quantized_dot never makes).
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/cuda_gemm_shape.h"

namespace tripy::rt::cuda {
namespace {

TEST(CudaQuantizedGemm, ArchitecturesGetTheKernelsCublasLtHas) {
  EXPECT_FALSE(low_precision_gemms_for(75).int8);
  EXPECT_TRUE(low_precision_gemms_for(80).int8);
  EXPECT_FALSE(low_precision_gemms_for(86).float8);
  EXPECT_TRUE(low_precision_gemms_for(89).float8);
  const LowPrecisionGemms h100 = low_precision_gemms_for(90);
  EXPECT_TRUE(h100.int8 && h100.float8 && h100.weight_nk);
  EXPECT_EQ(h100.int8_multiple, 4);
  EXPECT_EQ(h100.float8_multiple, 16);
}

// x [M, K] (input) @ transpose(w [N, K]) (constant) -> out [M, N] of `out`.
Program quantized_program(DType operand, DType out, bool transpose_rhs) {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kConst, 32}, {ShapeInstr::Op::kConst, 64}, {ShapeInstr::Op::kConst, 16}};
  p.buffers = {{BufferDesc::Kind::kInput, 0, operand, {0, 1}},
               {BufferDesc::Kind::kConstant, 0, operand, transpose_rhs ? std::vector<Slot>{2, 1} : std::vector<Slot>{1, 2}},
               {BufferDesc::Kind::kOutput, 0, out, {0, 2}}};
  Kernel k;
  k.kind = KernelKind::kDot;
  k.name = "dot";
  k.inputs = {0, 1};
  k.outputs = {2};
  k.dot.transpose_rhs = transpose_rhs;
  p.kernels = {k};
  return p;
}

TEST(CudaQuantizedGemm, Int8AndFloat8DotsAreTnProblemsWritingTheAccumulator) {
  const std::vector<int64_t> slots = {32, 64, 16};
  for (DType operand : {DType::kInt8, DType::kFloat8E4M3}) {
    SCOPED_TRACE(std::string(dtype_name(operand)));
    const Program p = quantized_program(operand, dot_accumulator_dtype(operand), true);
    auto pr = dot_problem(p, p.kernels[0], slots);
    ASSERT_TRUE(pr.ok()) << pr.status().message();
    EXPECT_TRUE(pr->quantized());
    EXPECT_EQ(pr->operand, operand);
    EXPECT_EQ(pr->dtype, dot_accumulator_dtype(operand));
    EXPECT_TRUE(pr->trans_a);  // cuBLASLt's A is the weight, transposed: "TN"
    EXPECT_FALSE(pr->trans_b);
    EXPECT_EQ(pr->m, 16);
    EXPECT_EQ(pr->n, 32);
    EXPECT_EQ(pr->k, 64);
    EXPECT_TRUE(row_phase_calls(*pr).empty());
    EXPECT_NE(pr->key(), dot_problem(quantized_program(DType::kFloat32, DType::kFloat32, true), p.kernels[0], slots)
                             ->key());
  }
}

TEST(CudaQuantizedGemm, OtherLayoutsAndResultDtypesAreRefused) {
  const std::vector<int64_t> slots = {32, 64, 16};
  const Program nn = quantized_program(DType::kInt8, DType::kInt32, false);
  auto pr = dot_problem(nn, nn.kernels[0], slots);
  ASSERT_FALSE(pr.ok());
  EXPECT_NE(pr.status().message().find("[N, K]"), std::string::npos) << pr.status().message();
  const Program f16 = quantized_program(DType::kInt8, DType::kFloat16, true);
  pr = dot_problem(f16, f16.kernels[0], slots);
  ASSERT_FALSE(pr.ok());
  EXPECT_NE(pr.status().message().find("accumulator"), std::string::npos) << pr.status().message();
  const Program f8 = quantized_program(DType::kFloat8E4M3, DType::kFloat8E4M3, true);
  pr = dot_problem(f8, f8.kernels[0], slots);
  ASSERT_FALSE(pr.ok());  // float8 sums are not stored as float8
  EXPECT_NE(pr.status().message().find("accumulator"), std::string::npos) << pr.status().message();
}

TEST(CudaQuantizedGemm, Float8WritesItsScaledSumInFloat16AndBFloat16WithTheScaleAsAlpha) {
  // The rescale fusion folds into the GEMM (DotAttrs::scale): cuBLASLt's alpha, the output written
  // in the dequantized dtype.
  const std::vector<int64_t> slots = {32, 64, 16};
  for (DType out : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    SCOPED_TRACE(std::string(dtype_name(out)));
    Program p = quantized_program(DType::kFloat8E4M3, out, true);
    p.kernels[0].dot.scale = 0.125;
    auto pr = dot_problem(p, p.kernels[0], slots);
    ASSERT_TRUE(pr.ok()) << pr.status().message();
    EXPECT_EQ(pr->dtype, out);
    EXPECT_EQ(pr->operand, DType::kFloat8E4M3);
    EXPECT_EQ(pr->scale, 0.125);
  }
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

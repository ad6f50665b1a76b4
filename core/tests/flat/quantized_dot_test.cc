// quantized_dot, text in and text out: dequantize -> dot becomes a dot of the quantized values that
// accumulates wide, rescaled once by the folded scales; what must not match stays as it was.
#include <gtest/gtest.h>

#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

std::string rewritten(const std::string& text, const QuantizedDotRules& rules = {}) {
  return pass_on_text(text, [&](const Graph& g) { return quantized_dot(g, rules); });
}

// x (int8, per-tensor 0.5) @ w (int8, per-tensor 0.25), as tp.dequantize lowers them.
constexpr const char* kPerTensor = R"(sym m [1, 4, 8]
%0 : i8[m, 4] = parameter() {index = 0}
%1 : i8[4, 8] = parameter() {index = 1}
%2 : f16[m, 4] = convert(%0)
%3 : f16[] = constant() {value = [0.5]}
%4 : f16[m, 4] = broadcast(%3) {dims = []}
%5 : f16[m, 4] = mul(%2, %4)
%6 : f16[4, 8] = convert(%1)
%7 : f16[] = constant() {value = [0.25]}
%8 : f16[4, 8] = broadcast(%7) {dims = []}
%9 : f16[4, 8] = mul(%8, %6)
%10 : f16[m, 8] = dot(%5, %9)
return %10
)";

TEST(QuantizedDot, PerTensorScalesLeaveTheSumAsOneRescale) {
  EXPECT_EQ(rewritten(kPerTensor), R"(sym m [1, 4, 8]
%0 : i8[m, 4] = parameter() {index = 0}
%1 : i8[4, 8] = parameter() {index = 1}
%2 : i32[m, 8] = dot(%0, %1)
%3 : f32[m, 8] = convert(%2)
%4 : f32[] = constant() {value = [0.125]}
%5 : f32[m, 8] = broadcast(%4) {dims = []}
%6 : f32[m, 8] = mul(%3, %5)
%7 : f16[m, 8] = convert(%6)
return %7
)");
}

TEST(QuantizedDot, TheBackendCanDeclineEachDtype) {
  QuantizedDotRules no_int8;
  no_int8.int8 = false;
  EXPECT_EQ(rewritten(kPerTensor, no_int8), "unchanged");
}

TEST(QuantizedDot, FewRowsOfInt8WithAConstantWeightAreLeftToTheWeightOnlyProduct) {
  // kPerTensor with the weight a constant: at most 8 rows (m's bound) against a limit of 8 (or any
  // rows) stays; a limit of 4 (or none) rewrites it, and a weight that is a parameter is rewritten
  // whatever the rows.
  const std::string parameter = "%1 : i8[4, 8] = parameter() {index = 1}";
  std::string constant_weight = kPerTensor;
  constant_weight.replace(constant_weight.find(parameter), parameter.size(),
                          "%1 : i8[4, 8] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, "
                          "1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]}");
  QuantizedDotRules rules;
  rules.int8_weight_only_rows = 8;
  EXPECT_EQ(rewritten(constant_weight, rules), "unchanged");
  rules.int8_weight_only_rows = 4;
  EXPECT_NE(rewritten(constant_weight, rules), "unchanged");
  EXPECT_NE(rewritten(constant_weight), "unchanged");
  rules.int8_weight_only_rows = 8;
  EXPECT_NE(rewritten(kPerTensor, rules), "unchanged");
  rules.int8_weight_only_rows = -1;  // any rows
  EXPECT_EQ(rewritten(constant_weight, rules), "unchanged");
  EXPECT_NE(rewritten(kPerTensor, rules), "unchanged");
}

TEST(QuantizedDot, PerColumnWeightScalesThroughLinearsTranspose) {
  // tp.Linear: x @ transpose(dequantize(W[N, K], s[N], dim = 0)); float8, float32 result.
  EXPECT_EQ(rewritten(R"(%0 : f8[2, 4] = parameter() {index = 0}
%1 : f8[3, 4] = parameter() {index = 1}
%2 : f32[2, 4] = convert(%0)
%3 : f32[] = constant() {value = [2]}
%4 : f32[2, 4] = broadcast(%3) {dims = []}
%5 : f32[2, 4] = mul(%2, %4)
%6 : f32[3, 4] = convert(%1)
%7 : f32[3, 1] = constant() {value = [1, 0.5, 0.25]}
%8 : f32[3, 4] = broadcast(%7) {dims = [0, 1]}
%9 : f32[3, 4] = mul(%6, %8)
%10 : f32[4, 3] = transpose(%9) {dims = [1, 0]}
%11 : f32[2, 3] = dot(%5, %10)
return %11
)"),
            R"(%0 : f8[2, 4] = parameter() {index = 0}
%1 : f8[3, 4] = parameter() {index = 1}
%2 : f8[4, 3] = transpose(%1) {dims = [1, 0]}
%3 : f32[2, 3] = dot(%0, %2)
%4 : f32[3] = constant() {value = [2, 1, 0.5]}
%5 : f32[2, 3] = broadcast(%4) {dims = [1]}
%6 : f32[2, 3] = mul(%3, %5)
return %6
)");
}

TEST(QuantizedDot, ScalesThatAreNotConstantsDoNotMatch) {
  EXPECT_EQ(rewritten(R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 3] = parameter() {index = 1}
%2 : f32[] = parameter() {index = 2}
%3 : f32[2, 4] = convert(%0)
%4 : f32[2, 4] = broadcast(%2) {dims = []}
%5 : f32[2, 4] = mul(%3, %4)
%6 : f32[4, 3] = convert(%1)
%7 : f32[4, 3] = broadcast(%2) {dims = []}
%8 : f32[4, 3] = mul(%6, %7)
%9 : f32[2, 3] = dot(%5, %8)
return %9
)"),
            "unchanged");
}

TEST(QuantizedDot, AWeightScaleAlongTheContractedAxisDoesNotMatch) {
  // w [K = 4, N = 3] scaled per row (dim 0, K): it cannot leave the sum.
  EXPECT_EQ(rewritten(R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 3] = parameter() {index = 1}
%2 : f32[2, 4] = convert(%0)
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[2, 4] = broadcast(%3) {dims = []}
%5 : f32[2, 4] = mul(%2, %4)
%6 : f32[4, 3] = convert(%1)
%7 : f32[4, 1] = constant() {value = [1, 2, 3, 4]}
%8 : f32[4, 3] = broadcast(%7) {dims = [0, 1]}
%9 : f32[4, 3] = mul(%6, %8)
%10 : f32[2, 3] = dot(%5, %9)
return %10
)"),
            "unchanged");
}

TEST(QuantizedDot, WeightOnlyQuantizationIsLeftToTheFloatGemm) {
  EXPECT_EQ(rewritten(R"(%0 : f32[2, 4] = parameter() {index = 0}
%1 : i8[4, 3] = parameter() {index = 1}
%2 : f32[4, 3] = convert(%1)
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[4, 3] = broadcast(%3) {dims = []}
%5 : f32[4, 3] = mul(%2, %4)
%6 : f32[2, 3] = dot(%0, %5)
return %6
)"),
            "unchanged");
}

TEST(QuantizedDot, TheGpuLayoutStoresAConstantWeightTransposed) {
  // cuBLASLt reads the weight [N, K]: a [K, N] constant is stored transposed and read through a
  // transpose (which the dot takes as a flag); K and N must be aligned.
  QuantizedDotRules gpu;
  gpu.weight_nk = true;
  gpu.int8_multiple = 4;
  const std::string text = R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 4] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}
%2 : f32[2, 4] = convert(%0)
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[2, 4] = broadcast(%3) {dims = []}
%5 : f32[2, 4] = mul(%2, %4)
%6 : f32[4, 4] = convert(%1)
%7 : f32[4, 4] = broadcast(%3) {dims = []}
%8 : f32[4, 4] = mul(%6, %7)
%9 : f32[2, 4] = dot(%5, %8)
return %9
)";
  EXPECT_EQ(rewritten(text, gpu), R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 4] = constant() {value = [1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 4, 8, 12, 16]}
%2 : i8[4, 4] = transpose(%1) {dims = [1, 0]}
%3 : i32[2, 4] = dot(%0, %2)
%4 : f32[2, 4] = convert(%3)
%5 : f32[] = constant() {value = [0.25]}
%6 : f32[2, 4] = broadcast(%5) {dims = []}
%7 : f32[2, 4] = mul(%4, %6)
return %7
)");
  gpu.int8_multiple = 8;  // K = N = 4 is not aligned enough: the float GEMM stays
  EXPECT_EQ(rewritten(text, gpu), "unchanged");
}

TEST(QuantizedDot, TheVerifierTakesOnlyTheAccumulatorAsAWiderResult) {
  const std::string error = verify_error(R"(%0 : i8[2, 4] = parameter() {index = 0}
%1 : i8[4, 3] = parameter() {index = 1}
%2 : f32[2, 3] = dot(%0, %1)
return %2
)");
  EXPECT_TRUE(has(error, "accumulator")) << error;
}

}  // namespace
}  // namespace tripy::flat

// Fusion planning: which ops share a kernel, over which domain, and what a dot absorbs.
#include <gtest/gtest.h>

#include "flat/passes/fusion.h"
#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

TEST(Fusion, ElementwiseChainWithBroadcastsIsOneKernel) {
  EXPECT_EQ(plan_of(R"(%0 : f32[2, 3] = parameter() {index = 0}
%1 : f32[3] = parameter() {index = 1}
%2 : f32[2, 3] = broadcast(%1) {dims = [1]}
%3 : f32[2, 3] = add(%0, %2)
%4 : f32[] = constant() {value = [2]}
%5 : f32[2, 3] = broadcast(%4) {dims = []}
%6 : f32[2, 3] = mul(%3, %5)
%7 : f32[2, 3] = tanh(%6)
%8 : i32[2, 3] = iota() {dims = [1]}
%9 : f32[2, 3] = convert(%8)
%10 : f32[2, 3] = add(%7, %9)
return %10
)"),
            "%10 = fused(%0, %1) {domain = (2, 3), ops = 5}\n");
}

TEST(Fusion, SoftmaxIsOneRowKernel) {
  EXPECT_EQ(plan_of(R"(sym n [1, 2, 8]
%0 : f32[n, 4] = parameter() {index = 0}
%1 : f32[n] = reduce_max(%0) {dims = [1]}
%2 : f32[n, 4] = broadcast(%1) {dims = [0]}
%3 : f32[n, 4] = sub(%0, %2)
%4 : f32[n, 4] = exp(%3)
%5 : f32[n] = reduce_sum(%4) {dims = [1]}
%6 : f32[n, 4] = broadcast(%5) {dims = [0]}
%7 : f32[n, 4] = div(%4, %6)
return %7
)"),
            "%7 = fused(%0) {domain = (n, 4), reduce_from = 1, ops = 5}\n");
}

TEST(Fusion, LayerNormIsOneRowKernel) {
  EXPECT_EQ(plan_of(R"(%0 : f32[3, 5, 8] = parameter() {index = 0}
%1 : f32[8] = parameter() {index = 1}
%2 : f32[8] = parameter() {index = 2}
%3 : f32[3, 5] = reduce_sum(%0) {dims = [2]}
%4 : f32[] = constant() {value = [8]}
%5 : f32[3, 5] = broadcast(%4) {dims = []}
%6 : f32[3, 5] = div(%3, %5)
%7 : f32[3, 5, 8] = broadcast(%6) {dims = [0, 1]}
%8 : f32[3, 5, 8] = sub(%0, %7)
%9 : f32[3, 5, 8] = mul(%8, %8)
%10 : f32[3, 5] = reduce_sum(%9) {dims = [2]}
%11 : f32[3, 5] = div(%10, %5)
%12 : f32[] = constant() {value = [1e-05]}
%13 : f32[3, 5] = broadcast(%12) {dims = []}
%14 : f32[3, 5] = add(%11, %13)
%15 : f32[3, 5] = rsqrt(%14)
%16 : f32[3, 5, 8] = broadcast(%15) {dims = [0, 1]}
%17 : f32[3, 5, 8] = mul(%8, %16)
%18 : f32[3, 5, 8] = broadcast(%1) {dims = [2]}
%19 : f32[3, 5, 8] = mul(%17, %18)
%20 : f32[3, 5, 8] = broadcast(%2) {dims = [2]}
%21 : f32[3, 5, 8] = add(%19, %20)
return %21
)"),
            "%21 = fused(%0, %1, %2) {domain = (3, 5, 8), reduce_from = 2, ops = 11}\n");
}

TEST(Fusion, LinearWithGeluIsOneDot) {
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[32, 16] = parameter() {index = 1}
%2 : f32[32] = parameter() {index = 2}
%3 : f32[16, 32] = transpose(%1) {dims = [1, 0]}
%4 : f32[4, 32] = dot(%0, %3)
%5 : f32[4, 32] = broadcast(%2) {dims = [1]}
%6 : f32[4, 32] = add(%4, %5)
%7 : f32[4, 32] = gelu(%6)
return %7
)"),
            "%7 = dot(%0, %1, %2) {transpose_rhs, bias, gelu}\n");
}

TEST(Fusion, Float16GeluJoinsTheDot) {
  EXPECT_EQ(plan_of(R"(%0 : f16[4, 16] = parameter() {index = 0}
%1 : f16[16, 32] = parameter() {index = 1}
%2 : f16[4, 32] = dot(%0, %1)
%3 : f16[4, 32] = gelu(%2)
return %3
)"),
            "%3 = dot(%0, %1) {gelu}\n");
}

TEST(Fusion, AHandWrittenGeluExpansionIsNotMatched) {
  // GELU is recognised by what it is (the primitive lowering keeps), not by matching the chain it
  // expands to: this chain stays a fused kernel of its own after the dot.
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 32] = parameter() {index = 1}
%4 : f32[4, 32] = dot(%0, %1)
%7 : f32[] = constant() {value = [0.707106781]}
%8 : f32[4, 32] = broadcast(%7) {dims = []}
%9 : f32[4, 32] = mul(%8, %4)
%10 : f32[4, 32] = erf(%9)
%11 : f32[] = constant() {value = [1]}
%12 : f32[4, 32] = broadcast(%11) {dims = []}
%13 : f32[4, 32] = add(%12, %10)
%14 : f32[] = constant() {value = [0.5]}
%15 : f32[4, 32] = broadcast(%14) {dims = []}
%16 : f32[4, 32] = mul(%4, %15)
%17 : f32[4, 32] = mul(%13, %16)
return %17
)"),
            "%2 = dot(%0, %1)\n%13 = fused(%2) {domain = (4, 32), ops = 5}\n");
}

TEST(Fusion, SiluIsNotADotEpilogue) {
  // cuBLASLt has no SiLU epilogue: after a dot it is a fused kernel (convolutions take it).
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 32] = parameter() {index = 1}
%2 : f32[4, 32] = dot(%0, %1)
%3 : f32[4, 32] = silu(%2)
return %3
)"),
            "%2 = dot(%0, %1)\n%3 = fused(%2) {domain = (4, 32), ops = 1}\n");
}

TEST(Fusion, GeluFeedingOneElementwiseOpStaysInItsKernel) {
  // GEGLU's x * gelu(gate): the GELU costs nothing in the multiply's kernel.
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 32] = parameter() {index = 1}
%2 : f32[4, 32] = parameter() {index = 2}
%3 : f32[4, 32] = dot(%0, %1)
%4 : f32[4, 32] = gelu(%3)
%5 : f32[4, 32] = mul(%2, %4)
return %5
)"),
            "%3 = dot(%0, %1)\n"
            "%5 = fused(%3, %2) {domain = (4, 32), ops = 2}\n");
}

TEST(Fusion, ConvertOfAConstantIsReadInline) {
  EXPECT_EQ(plan_of(R"(%0 : f16[4, 8] = parameter() {index = 0}
%1 : f16[8] = constant() {value = [1, 2, 3, 4, 5, 6, 7, 8]}
%2 : f32[8] = convert(%1)
%3 : f32[4, 8] = broadcast(%2) {dims = [1]}
%4 : f32[4, 8] = convert(%0)
%5 : f32[4, 8] = mul(%4, %3)
return %5
)"),
            "%5 = fused(%0, %1) {domain = (4, 8), ops = 2}\n");
}

TEST(Fusion, OpsJoinEarlierKernelsThroughReshapes) {
  // BatchNorm's x * reshape(scale): the multiply joins neg's kernel, and the reshape of exp's
  // result is ordered right after exp's kernel.
  EXPECT_EQ(plan_of(R"(%0 : f32[1, 2] = parameter() {index = 0}
%1 : f32[2] = parameter() {index = 1}
%2 : f32[2] = exp(%1)
%3 : f32[1, 2] = neg(%0)
%4 : f32[1, 2] = reshape(%2)
%5 : f32[1, 2] = mul(%3, %4)
return %5
)"),
            "%2 = fused(%1) {domain = (2,), ops = 1}\n"
            "%4 = alias(%2)\n"
            "%5 = fused(%0, %4) {domain = (1, 2), ops = 2}\n");
}

TEST(Fusion, DotEpilogueNeedsSingleUse) {
  // The biased value is also an output, so the add cannot disappear into the GEMM.
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 16] = parameter() {index = 0}
%1 : f32[16, 8] = parameter() {index = 1}
%2 : f32[8] = parameter() {index = 2}
%3 : f32[4, 8] = dot(%0, %1)
%4 : f32[4, 8] = broadcast(%2) {dims = [1]}
%5 : f32[4, 8] = add(%3, %4)
%6 : f32[] = constant() {value = [0]}
%7 : f32[4, 8] = broadcast(%6) {dims = []}
%8 : f32[4, 8] = max(%5, %7)
return %8, %5
)"),
            "%5 = dot(%0, %1, %2) {bias}\n"
            "%8 = fused(%5) {domain = (4, 8), ops = 1}\n");
}

TEST(Fusion, DifferentDomainsStartNewKernels) {
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[4, 8] = exp(%0)
%2 : f32[8, 4] = transpose(%1) {dims = [1, 0]}
%3 : f32[8, 4] = neg(%2)
%4 : f32[32] = reshape(%3)
%5 : f32[32] = abs(%4)
return %5, %1
)"),
            "%1 = fused(%0) {domain = (4, 8), ops = 1}\n"
            "%2 = transpose(%1)\n"
            "%3 = fused(%2) {domain = (8, 4), ops = 1}\n"
            "%4 = alias(%3)\n"
            "%5 = fused(%4) {domain = (32,), ops = 1}\n");
}

TEST(Fusion, ReductionOverLeadingDimGetsATranspose) {
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[8] = reduce_sum(%0) {dims = [0]}
return %1
)"),
            "%1 = transpose(%0)\n"
            "%2 = fused(%1) {domain = (8, 4), reduce_from = 1, ops = 1}\n");
}

TEST(Fusion, BroadcastReadByADotIsMaterialised) {
  EXPECT_EQ(plan_of(R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[3, 4] = broadcast(%0) {dims = [1]}
%2 : f32[4, 5] = parameter() {index = 1}
%3 : f32[3, 5] = dot(%1, %2)
return %3, %1
)"),
            "%1 = fused(%0) {domain = (3, 4), ops = 1}\n"
            "%3 = dot(%1, %2)\n");
}

TEST(Fusion, RowResultUsedElsewhereIsAnOutput) {
  EXPECT_EQ(plan_of(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[4] = reduce_max(%0) {dims = [1]}
%2 : f32[4, 8] = broadcast(%1) {dims = [0]}
%3 : f32[4, 8] = sub(%0, %2)
return %3, %1
)"),
            "%1, %3 = fused(%0) {domain = (4, 8), reduce_from = 1, ops = 2}\n");
}

TEST(Fusion, AnOpOfConstantsAloneWithALargeResultJoinsOnlyTheLastKernel) {
  // Two layers' dequantized weights (4 KiB each), of one shape: the second is computed after the
  // first layer's product (joining the first weight's kernel would hold both from the start).
  EXPECT_EQ(plan_of(R"(%0 : f32[2, 32] = parameter() {index = 0}
%1 : i32[32, 32] = iota() {dims = [0]}
%2 : f32[32, 32] = convert(%1)
%3 : f32[] = constant() {value = [0.5]}
%4 : f32[32, 32] = broadcast(%3) {dims = []}
%5 : f32[32, 32] = mul(%2, %4)
%6 : f32[2, 32] = dot(%0, %5)
%7 : i32[32, 32] = iota() {dims = [1]}
%8 : f32[32, 32] = convert(%7)
%9 : f32[32, 32] = mul(%8, %4)
%10 : f32[2, 32] = dot(%6, %9)
return %10
)"),
            "%5 = fused() {domain = (32, 32), ops = 2}\n"
            "%6 = dot(%0, %5)\n"
            "%9 = fused() {domain = (32, 32), ops = 2}\n"
            "%10 = dot(%6, %9)\n");
}

TEST(Fusion, AnOpOfInputsAloneWithASmallResultJoinsAnEarlierKernel) {
  // A decode step's position arithmetic (a few bytes) rides along in the first kernel of its
  // domain instead of a launch of its own.
  EXPECT_EQ(plan_of(R"(%0 : f32[2] = parameter() {index = 0}
%1 : i32[2] = parameter() {index = 1}
%2 : f32[2] = exp(%0)
%3 : f32[2, 2] = parameter() {index = 2}
%4 : f32[2, 2] = dot(%3, %3)
%5 : f32[2] = convert(%1)
return %2, %4, %5
)"),
            "%2, %5 = fused(%0, %1) {domain = (2,), ops = 2}\n"
            "%4 = dot(%3, %3)\n");
}

}  // namespace
}  // namespace tripy::flat

// weight_only_dot, text in and text out: a tp.Linear's x @ dequantize(W).T over packed int4 bytes
// (unpack_int4's lowering) or an int8 [N, K] weight becomes one weight_only_dot kernel whose
// constants are the graph's own tensors (the same memory: executables share a model's weights);
// other layouts are repacked, and forms that only look alike stay as they were.
#include <gtest/gtest.h>

#include <string>

#include "flat/passes/passes.h"
#include "pass_text.h"

namespace tripy::flat {
namespace {

// x [2, 16] @ transpose(dequantize(unpack_int4(P [2, 8]), s [2, 2])) (groups of 8 input features),
// as tp.Linear lowers it after simplify.
constexpr const char* kPacked = R"(%0 : f32[2, 16] = parameter() {index = 0}
%1 : i8[2, 8] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38, 48, -106, -4, 82, -72, 30, 116, -38]}
%2 : i32[2, 8] = convert(%1)
%3 : i32[2, 8, 2] = broadcast(%2) {dims = [0, 1]}
%4 : i32[2] = constant() {value = [1, 16]}
%5 : i32[2, 8, 2] = broadcast(%4) {dims = [2]}
%6 : i32[2, 8, 2] = floordiv(%3, %5)
%7 : i32[] = constant() {value = [8]}
%8 : i32[2, 8, 2] = broadcast(%7) {dims = []}
%9 : i32[2, 8, 2] = add(%6, %8)
%10 : i4[2, 8, 2] = convert(%9)
%11 : i4[2, 16] = reshape(%10)
%12 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%13 : f32[2, 2, 8] = broadcast(%12) {dims = [0, 1]}
%14 : f32[2, 16] = reshape(%13)
%15 : f32[2, 16] = convert(%11)
%16 : f32[2, 16] = mul(%15, %14)
%17 : f32[16, 2] = transpose(%16) {dims = [1, 0]}
%18 : f32[2, 2] = dot(%0, %17)
return %18
)";

const Op* kernel_of(const Graph& g) {
  for (const Op& op : g.ops)
    if (op.kind == OpKind::kKernel) return &op;
  return nullptr;
}

const Tensor& constant_of(const Graph& g, ValueId v) { return g.def(v).constant; }

TEST(WeightOnlyDot, PackedInt4BytesAndScalesAreTheKernelsOperandsAsTheyAre) {
  StatusOr<Graph> g = parse_graph(kPacked);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok());
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[2, 16] = parameter() {index = 0}
%1 : i8[2, 8] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38, 48, -106, -4, 82, -72, 30, 116, -38]}
%2 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%3 : f32[2, 2] = weight_only_dot(%0, %1, %2) {bits = 4, group_size = 8}
return %3
)");
  const Op* k = kernel_of(*out);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(constant_of(*out, k->operands[1]).data(), constant_of(*g, 1).data());
  EXPECT_EQ(constant_of(*out, k->operands[2]).data(), constant_of(*g, 12).data());
}

// kPacked's bytes read through a window [rows, cols] of unpack_int4's view (a tensor-parallel
// rank's share), dequantized with the window's scales [rows, groups] (groups of 8) and multiplied
// by x [2, cols].
std::string windowed(const std::string& starts, const std::string& limits, int rows, int cols,
                     const std::string& scale_values) {
  const std::string text = kPacked;
  const size_t from = text.find("%1 :"), to = text.find("%12 :");
  const std::string shape = std::to_string(rows) + ", " + std::to_string(cols);
  const std::string scales = std::to_string(rows) + ", " + std::to_string(cols / 8);
  return "%0 : f32[2, " + std::to_string(cols) + "] = parameter() {index = 0}\n" + text.substr(from, to - from) +
         "%12 : i4[" + shape + "] = slice(%11) {starts = [" + starts + "], limits = [" + limits + "], steps = [1, 1]}\n" +
         "%13 : f32[" + scales + "] = constant() {value = [" + scale_values + "]}\n" +
         "%14 : f32[" + scales + ", 8] = broadcast(%13) {dims = [0, 1]}\n" +
         "%15 : f32[" + shape + "] = reshape(%14)\n" +
         "%16 : f32[" + shape + "] = convert(%12)\n" +
         "%17 : f32[" + shape + "] = mul(%16, %15)\n" +
         "%18 : f32[" + std::to_string(cols) + ", " + std::to_string(rows) + "] = transpose(%17) {dims = [1, 0]}\n" +
         "%19 : f32[2, " + std::to_string(rows) + "] = dot(%0, %18)\n" + "return %19\n";
}

TEST(WeightOnlyDot, AWindowOfWholeRowsOfPackedInt4IsAViewOfItsBytes) {
  const std::string text = windowed("1, 0", "2, 16", 1, 16, "1, 2");
  StatusOr<Graph> g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[2, 16] = parameter() {index = 0}
%1 : i8[1, 8] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38]}
%2 : f32[1, 2] = constant() {value = [1, 2]}
%3 : f32[2, 1] = weight_only_dot(%0, %1, %2) {bits = 4, group_size = 8}
return %3
)");
  const Op* k = kernel_of(*out);
  ASSERT_NE(k, nullptr);
  // Row 1 of the graph's bytes, not a copy.
  EXPECT_EQ(constant_of(*out, k->operands[1]).data(), static_cast<const char*>(constant_of(*g, 1).data()) + 8);
}

TEST(WeightOnlyDot, AByteAlignedRangeOfTheInputFeaturesIsCopiedAsItsBytes) {
  const std::string text = windowed("0, 8", "2, 16", 2, 8, "0.25, 2");
  StatusOr<Graph> g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  // Bytes 4..7 of each row: values 8..15.
  EXPECT_EQ(out->str(), R"(%0 : f32[2, 8] = parameter() {index = 0}
%1 : i8[2, 4] = constant() {value = [-72, 30, 116, -38, -72, 30, 116, -38]}
%2 : f32[2, 1] = constant() {value = [0.25, 2]}
%3 : f32[2, 2] = weight_only_dot(%0, %1, %2) {bits = 4, group_size = 8}
return %3
)");
}

TEST(WeightOnlyDot, AWindowStartingInsideAByteIsNotRead) {
  const std::string text = windowed("0, 1", "2, 9", 2, 8, "0.25, 2");
  StatusOr<Graph> g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  EXPECT_FALSE(weight_only_dot(*g).has_value());
}

// x [2, 4] @ W.T of a tp.Linear whose [3, 4] weight (`weight`: the line of its constant, %1) has
// one scale a row; and the weight-only product it becomes, the weight read as it is stored.
std::string per_row_linear(const std::string& weight) {
  return "%0 : f32[2, 4] = parameter() {index = 0}\n" + weight + R"(
%2 : f32[3] = constant() {value = [1, 0.5, 0.25]}
%3 : f32[3, 4] = broadcast(%2) {dims = [0]}
%4 : f32[3, 4] = convert(%1)
%5 : f32[3, 4] = mul(%4, %3)
%6 : f32[4, 3] = transpose(%5) {dims = [1, 0]}
%7 : f32[2, 3] = dot(%0, %6)
return %7
)";
}
std::string per_row_product(const std::string& weight) {
  return "%0 : f32[2, 4] = parameter() {index = 0}\n" + weight + R"(
%2 : f32[3, 1] = constant() {value = [1, 0.5, 0.25]}
%3 : f32[2, 3] = weight_only_dot(%0, %1, %2) {group_size = 4}
return %3
)";
}

TEST(WeightOnlyDot, PerChannelInt8ScalesAreViewedAsOneGroupPerRow) {
  const std::string weight = "%1 : i8[3, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12]}";
  StatusOr<Graph> g = parse_graph(per_row_linear(weight));
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), per_row_product(weight));
  const Op* k = kernel_of(*out);
  EXPECT_EQ(constant_of(*out, k->operands[1]).data(), constant_of(*g, 1).data());
  EXPECT_EQ(constant_of(*out, k->operands[2]).data(), constant_of(*g, 2).data());
}

TEST(WeightOnlyDot, Float8WeightsAreReadAsStoredOrTransposedAsFloat8) {
  // [N, K] under a transpose (a tp.Linear): the constant itself; [K, N] (x @ W): transposed on the host.
  const std::string weight =
      "%1 : f8[3, 4] = constant() {value = [1, -2, 0.5, 448, 0, -0.015625, 3, -4, 0.001953125, 6, -7, 8]}";
  StatusOr<Graph> g = parse_graph(per_row_linear(weight));
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), per_row_product(weight));
  EXPECT_EQ(constant_of(*out, kernel_of(*out)->operands[1]).data(), constant_of(*g, 1).data());

  StatusOr<Graph> kn = parse_graph(R"(%0 : f32[2, 4] = parameter() {index = 0}
%1 : f8[4, 3] = constant() {value = [1, -2, 0.5, 448, 0, -0.015625, 3, -4, 0.001953125, 6, -7, 8]}
%2 : f32[3] = constant() {value = [1, 0.5, 0.25]}
%3 : f32[4, 3] = broadcast(%2) {dims = [1]}
%4 : f32[4, 3] = convert(%1)
%5 : f32[4, 3] = mul(%4, %3)
%6 : f32[2, 3] = dot(%0, %5)
return %6
)");
  ASSERT_TRUE(kn.ok()) << kn.status().message();
  out = weight_only_dot(*kn);
  ASSERT_TRUE(out.has_value());
  EXPECT_NE(out->str().find("f8[3, 4] = constant() {value = [1, 448, 3, 6, -2, 0, -4, -7, 0.5, -0.015625, 0.001953125, 8]}"),
            std::string::npos)
      << out->str();
}

TEST(WeightOnlyDot, PackedBytesOfAKByNWeightAreRepackedAlongK) {
  // x [1, 4] @ dequantize(unpack_int4(P [4, 1]) [4, 2]): the bytes pack along N, the kernel wants K.
  StatusOr<Graph> g = parse_graph(R"(%0 : f32[1, 4] = parameter() {index = 0}
%1 : i8[4, 1] = constant() {value = [16, 50, 84, 118]}
%2 : i32[4, 1] = convert(%1)
%3 : i32[4, 1, 2] = broadcast(%2) {dims = [0, 1]}
%4 : i32[2] = constant() {value = [1, 16]}
%5 : i32[4, 1, 2] = broadcast(%4) {dims = [2]}
%6 : i32[4, 1, 2] = floordiv(%3, %5)
%7 : i32[] = constant() {value = [8]}
%8 : i32[4, 1, 2] = broadcast(%7) {dims = []}
%9 : i32[4, 1, 2] = add(%8, %6)
%10 : i4[4, 1, 2] = convert(%9)
%11 : i4[4, 2] = reshape(%10)
%12 : f32[] = constant() {value = [0.5]}
%13 : f32[4, 2] = broadcast(%12) {dims = []}
%14 : f32[4, 2] = convert(%11)
%15 : f32[4, 2] = mul(%14, %13)
%16 : f32[1, 2] = dot(%0, %15)
return %16
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = weight_only_dot(*g);
  ASSERT_TRUE(out.has_value());
  // W [K = 4, N = 2] from the bytes 0x10, 0x32, 0x54, 0x76: column n = 0 takes the low nibbles
  // (-8, -6, -4, -2), n = 1 the high ones (-7, -5, -3, -1); each column packed along K.
  EXPECT_EQ(out->str(), R"(%0 : f32[1, 4] = parameter() {index = 0}
%1 : i8[2, 2] = constant() {value = [32, 100, 49, 117]}
%2 : f32[2, 1] = constant() {value = [0.5, 0.5]}
%3 : f32[1, 2] = weight_only_dot(%0, %1, %2) {bits = 4, group_size = 4}
return %3
)");
}

TEST(WeightOnlyDot, AnotherArithmeticOnTheBytesIsNotUnpacking) {
  // Divisors 1 and 8 are not the nibble layout: dequantize and the GEMM stay.
  std::string text = kPacked;
  text.replace(text.find("[1, 16]"), 7, "[1, 8]");
  StatusOr<Graph> g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE(weight_only_dot(*g).has_value());
}

TEST(WeightOnlyDot, ADequantizeForTheGemmIsComputedByGroupsInOneKernel) {
  // Two rows of x over a kernel that takes one: dequantize stays for the GEMM, computed over [N,
  // groups, group / 2, 2] (each byte's two values along the last axis, the scales broadcast along
  // the trailing two), then reshaped to [N, K]: one fused kernel reads the bytes and the [N, groups]
  // scales and writes the weight. As tp.dequantize lowers it, the scales' broadcast [N, groups,
  // group] and the unpacked int4 values would each be a temporary of their own, reshaped for a
  // third kernel.
  const std::string out = pass_on_text(kPacked, [](const Graph& g) { return weight_only_dot(g, 1); });
  EXPECT_EQ(out, R"(%0 : f32[2, 16] = parameter() {index = 0}
%1 : i8[2, 2, 4] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38, 48, -106, -4, 82, -72, 30, 116, -38]}
%2 : i32[2, 2, 4] = convert(%1)
%3 : i32[2, 2, 4, 2] = broadcast(%2) {dims = [0, 1, 2]}
%4 : i32[2] = constant() {value = [1, 16]}
%5 : i32[2, 2, 4, 2] = broadcast(%4) {dims = [3]}
%6 : i32[2, 2, 4, 2] = floordiv(%3, %5)
%7 : i32[] = constant() {value = [8]}
%8 : i32[2, 2, 4, 2] = broadcast(%7) {dims = []}
%9 : i32[2, 2, 4, 2] = add(%6, %8)
%10 : i4[2, 2, 4, 2] = convert(%9)
%11 : f32[2, 2, 4, 2] = convert(%10)
%12 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%13 : f32[2, 2, 4, 2] = broadcast(%12) {dims = [0, 1]}
%14 : f32[2, 2, 4, 2] = mul(%11, %13)
%15 : f32[2, 16] = reshape(%14)
%16 : f32[16, 2] = transpose(%15) {dims = [1, 0]}
%17 : f32[2, 2] = dot(%0, %16)
return %17
)");
  EXPECT_EQ(plan_of(out),
            "%14 = fused(%1, %4, %12) {domain = (2, 2, 4, 2), ops = 5}\n"
            "%15 = alias(%14)\n"
            "%17 = dot(%0, %15) {transpose_rhs}\n");
  // The constants are the graph's own bytes and scales, viewed in the block shape.
  StatusOr<Graph> g = parse_graph(kPacked);
  ASSERT_TRUE(g.ok());
  std::optional<Graph> blocked = weight_only_dot(*g, 1);
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(constant_of(*blocked, 1).data(), constant_of(*g, 1).data());
  EXPECT_EQ(constant_of(*blocked, 12).data(), constant_of(*g, 12).data());
}

TEST(WeightOnlyDot, ADequantizeForTheGemmKeepsItsZeroPointsAndAKByNLayout) {
  // x @ dequantize(q [K = 16, N = 2] int8, scale and zero point [2 groups, N]) with more rows than
  // the kernel takes: by groups [groups, group, N], the parameters along axes 0 and 2.
  const std::string out = pass_on_text(R"(%0 : f32[3, 16] = parameter() {index = 0}
%1 : i8[16, 2] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8, -1, 2, -3, 4, -5, 6, -7, 8, 1, -2, 3, -4, 5, -6, 7, -8, -1, 2, -3, 4, -5, 6, -7, 8]}
%2 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%3 : f32[2, 8, 2] = broadcast(%2) {dims = [0, 2]}
%4 : f32[16, 2] = reshape(%3)
%5 : f32[2, 2] = constant() {value = [1, -1, 2, -2]}
%6 : f32[2, 8, 2] = broadcast(%5) {dims = [0, 2]}
%7 : f32[16, 2] = reshape(%6)
%8 : f32[16, 2] = convert(%1)
%9 : f32[16, 2] = sub(%8, %7)
%10 : f32[16, 2] = mul(%9, %4)
%11 : f32[3, 2] = dot(%0, %10)
return %11
)", [](const Graph& g) { return weight_only_dot(g, 2); });
  EXPECT_EQ(out, R"(%0 : f32[3, 16] = parameter() {index = 0}
%1 : i8[2, 8, 2] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8, -1, 2, -3, 4, -5, 6, -7, 8, 1, -2, 3, -4, 5, -6, 7, -8, -1, 2, -3, 4, -5, 6, -7, 8]}
%2 : f32[2, 8, 2] = convert(%1)
%3 : f32[2, 2] = constant() {value = [1, -1, 2, -2]}
%4 : f32[2, 8, 2] = broadcast(%3) {dims = [0, 2]}
%5 : f32[2, 8, 2] = sub(%2, %4)
%6 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%7 : f32[2, 8, 2] = broadcast(%6) {dims = [0, 2]}
%8 : f32[2, 8, 2] = mul(%5, %7)
%9 : f32[16, 2] = reshape(%8)
%10 : f32[3, 2] = dot(%0, %9)
return %10
)");
  EXPECT_EQ(plan_of(out),
            "%8 = fused(%1, %3, %6) {domain = (2, 8, 2), ops = 2}\n"
            "%9 = alias(%8)\n"
            "%10 = dot(%0, %9)\n");
}

// A SwiGLU's down projection: x = silu(y[:, :16]) * y[:, 16:] of one [rows, 32] value y. The
// product reads y itself (gated) where x's rows are within the rule, and the SiLU, the product and
// the slices are gone; past the rows, with other halves or another function, x stays.
std::string swiglu(const std::string& rows, const std::string& gate, const std::string& up, const char* fn = "silu") {
  return "%0 : f32[" + rows + ", 32] = parameter() {index = 0}\n"
         "%1 : f32[" + rows + ", 16] = slice(%0) {starts = [0, " + gate + "], limits = [" + rows + ", " +
         std::to_string(std::stoi(gate) + 16) + "], steps = [1, 1]}\n"
         "%2 : f32[" + rows + ", 16] = slice(%0) {starts = [0, " + up + "], limits = [" + rows + ", " +
         std::to_string(std::stoi(up) + 16) + "], steps = [1, 1]}\n"
         "%3 : f32[" + rows + ", 16] = " + fn + "(%1)\n"
         "%4 : f32[" + rows + ", 16] = mul(%3, %2)\n"
         "%5 : i8[2, 8] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38, 48, -106, -4, 82, -72, 30, 116, -38]}\n"
         "%6 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}\n"
         "%7 : f32[" + rows + ", 2] = weight_only_dot(%4, %5, %6) {bits = 4, group_size = 8}\n"
         "return %7\n";
}

// A backend's rule for gates, by x's rows alone (the pass asks it about a gate).
WeightOnlyFoldRule gates_up_to(int64_t rows) {
  return [rows](const rt::WeightOnlyFold& f) {
    EXPECT_TRUE(f.gated);
    return f.rows <= rows;
  };
}

TEST(GatedWeightOnlyDot, ASwigluDownProductReadsTheGateAndUpHalves) {
  StatusOr<Graph> g = parse_graph(swiglu("3", "0", "16"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok());
  std::optional<Graph> out = gated_weight_only_dot(*g, gates_up_to(47));
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[3, 32] = parameter() {index = 0}
%1 : i8[2, 8] = constant() {value = [48, -106, -4, 82, -72, 30, 116, -38, 48, -106, -4, 82, -72, 30, 116, -38]}
%2 : f32[2, 2] = constant() {value = [0.5, 0.25, 1, 2]}
%3 : f32[3, 2] = weight_only_dot(%0, %1, %2) {bits = 4, group_size = 8, gated = true}
return %3
)");
  EXPECT_TRUE(gated_weight_only_dot(*g).has_value());  // everywhere
  // A rule that takes norms and residuals but no gate (the GPU's).
  EXPECT_FALSE(gated_weight_only_dot(*g, [](const rt::WeightOnlyFold& f) { return !f.gated; }).has_value());
}

TEST(GatedWeightOnlyDot, OtherHalvesMoreRowsOrAnotherFunctionKeepX) {
  for (const std::string& text : {swiglu("3", "16", "0"),              // up first: not silu(first half)
                                  swiglu("3", "0", "16", "gelu")}) {   // not SiLU
    StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_FALSE(gated_weight_only_dot(*g).has_value()) << text;
  }
  StatusOr<Graph> many = parse_graph(swiglu("48", "0", "16"));
  ASSERT_TRUE(many.ok());
  EXPECT_FALSE(gated_weight_only_dot(*many, gates_up_to(47)).has_value());  // past the rule's rows
  EXPECT_FALSE(gated_weight_only_dot(*many, gates_up_to(0)).has_value());   // the rule off
  EXPECT_TRUE(gated_weight_only_dot(*many, gates_up_to(48)).has_value());
}

// A backend's rule: products of x with at most `rows` rows, of float32 x, 4 features, one group.
WeightOnlyFoldRule up_to_rows(int64_t rows) {
  return [rows](const rt::WeightOnlyFold& f) {
    EXPECT_EQ(f.dtype, DType::kFloat32);
    EXPECT_EQ(f.K, 4);
    EXPECT_EQ(f.group, 4);
    EXPECT_EQ(f.bits, 8);
    return f.rows <= rows;
  };
}

// x [1, 4] -> RMSNorm (eps 1e-5, weight g) as tp.RMSNorm lowers it after the passes before the
// product's (the overflow guard's rows at 2^-96; `eps_line` the plain root's add), then the
// weight-only product of a [2, 4] int8 weight.
std::string rms_product(const std::string& eps_line = "%16 : f32[1] = add(%12, %15)\n", const char* root = "%16") {
  return std::string("%0 : f32[1, 4] = parameter() {index = 0}\n"
                     "%1 : f32[4] = constant() {value = [1, 0.5, 2, 1.5]}\n"
                     "%2 : f32[1, 4] = mul(%0, %0)\n"
                     "%3 : f32[1] = reduce_sum(%2) {dims = [1]}\n"
                     "%4 : f32[] = constant() {value = [4]}\n"
                     "%5 : f32[1] = broadcast(%4) {dims = []}\n"
                     "%12 : f32[1] = div(%3, %5)\n"
                     "%13 : f32[] = constant() {value = [1]}\n"
                     "%14 : f32[1] = broadcast(%13) {dims = []}\n"
                     "%6 : f32[] = constant() {value = [9.99999975e-06]}\n"
                     "%15 : f32[1] = broadcast(%6) {dims = []}\n") +
         eps_line +
         "%17 : f32[] = constant() {value = [inf]}\n"
         "%18 : f32[1] = broadcast(%17) {dims = []}\n"
         "%19 : i1[1] = ge(%12, %18)\n"
         "%20 : f32[] = constant() {value = [3.55271368e-15]}\n"
         "%21 : f32[1] = broadcast(%20) {dims = []}\n"
         "%22 : f32[1] = select(%19, %21, %14)\n"
         "%23 : f32[] = constant() {value = [1.26217745e-29]}\n"
         "%24 : f32[1, 4] = broadcast(%23) {dims = []}\n"
         "%25 : f32[1, 4] = mul(%0, %24)\n"
         "%26 : f32[1, 4] = mul(%25, %25)\n"
         "%27 : f32[1] = reduce_sum(%26) {dims = [1]}\n"
         "%28 : f32[1] = div(%27, %5)\n"
         "%29 : f32[1] = rsqrt(%28)\n"
         "%30 : f32[1] = mul(%29, %21)\n"
         "%31 : f32[1] = rsqrt(" + root + ")\n"
         "%32 : f32[1] = select(%19, %30, %31)\n"
         "%33 : f32[1, 4] = broadcast(%22) {dims = [0]}\n"
         "%34 : f32[1, 4] = mul(%0, %33)\n"
         "%35 : f32[1, 4] = broadcast(%32) {dims = [0]}\n"
         "%36 : f32[1, 4] = mul(%34, %35)\n"
         "%37 : f32[1, 4] = broadcast(%1) {dims = [1]}\n"
         "%38 : f32[1, 4] = mul(%36, %37)\n"
         "%39 : i8[2, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8]}\n"
         "%40 : f32[2, 1] = constant() {value = [0.5, 0.25]}\n"
         "%41 : f32[1, 2] = weight_only_dot(%38, %39, %40) {group_size = 4}\n"
         "return %41\n";
}

TEST(NormedWeightOnlyDot, AnRmsNormBeforeTheProductIsItsOwn) {
  StatusOr<Graph> g = parse_graph(rms_product());
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok());
  std::optional<Graph> out = normed_weight_only_dot(*g, up_to_rows(1));
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[1, 4] = parameter() {index = 0}
%1 : f32[4] = constant() {value = [1, 0.5, 2, 1.5]}
%2 : i8[2, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8]}
%3 : f32[2, 1] = constant() {value = [0.5, 0.25]}
%4 : f32[1, 2] = weight_only_dot(%0, %2, %3, %1) {group_size = 4, norm = true, norm_eps = 9.999999747378752e-06}
return %4
)");
  EXPECT_FALSE(normed_weight_only_dot(*g, up_to_rows(0)).has_value());  // the rule off
}

TEST(NormedWeightOnlyDot, ARootOfAnotherValueOrAMissingGuardKeepsX) {
  // The plain root of another row value than the mean square.
  StatusOr<Graph> g = parse_graph(rms_product("%16 : f32[1] = add(%14, %15)\n"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE(normed_weight_only_dot(*g).has_value());
  // eps 0 without the underflow guard lower_rmsnorm adds for it.
  g = parse_graph(rms_product("", "%12"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE(normed_weight_only_dot(*g).has_value());
}

// x [rows, 4] times a [2, 4] int8 weight, plus r; the product read by the add alone, or also
// returned.
std::string product_plus(const std::string& rows, bool returned) {
  return "%0 : f32[" + rows + ", 4] = parameter() {index = 0}\n"
         "%1 : f32[" + rows + ", 2] = parameter() {index = 1}\n"
         "%2 : i8[2, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8]}\n"
         "%3 : f32[2, 1] = constant() {value = [0.5, 0.25]}\n"
         "%4 : f32[" + rows + ", 2] = weight_only_dot(%0, %2, %3) {group_size = 4}\n"
         "%5 : f32[" + rows + ", 2] = add(%1, %4)\n"
         "return %5" + (returned ? ", %4" : "") + "\n";
}

TEST(ResidualWeightOnlyDot, AnAddAfterTheProductIsItsOwn) {
  StatusOr<Graph> g = parse_graph(product_plus("3", false));
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::optional<Graph> out = residual_weight_only_dot(*g, up_to_rows(3));
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[3, 4] = parameter() {index = 0}
%1 : f32[3, 2] = parameter() {index = 1}
%2 : i8[2, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8]}
%3 : f32[2, 1] = constant() {value = [0.5, 0.25]}
%4 : f32[3, 2] = weight_only_dot(%0, %2, %3, %1) {group_size = 4, residual = true}
return %4
)");
  EXPECT_FALSE(residual_weight_only_dot(*g, up_to_rows(2)).has_value());  // past the rule's rows
  StatusOr<Graph> both = parse_graph(product_plus("3", true));
  ASSERT_TRUE(both.ok());
  EXPECT_FALSE(residual_weight_only_dot(*both).has_value());  // the product is also an output
}

// A SwiGLU's gate_up product y = x [rows, 4] times a [4, 4] int8 weight, then silu(y[:, :2]) *
// y[:, 2:] (`gate` and `up` the halves' starts, `fn` the function); with `y_out`, y is an output too.
std::string gate_up(const std::string& rows, const std::string& gate = "0", const std::string& up = "2",
                    const char* fn = "silu", bool y_out = false) {
  auto half = [&](const std::string& start) {
    return "slice(%3) {starts = [0, " + start + "], limits = [" + rows + ", " + std::to_string(std::stoi(start) + 2) +
           "], steps = [1, 1]}\n";
  };
  return "%0 : f32[" + rows + ", 4] = parameter() {index = 0}\n"
         "%1 : i8[4, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8, 2, 4, 6, 8, -1, -3, -5, -7]}\n"
         "%2 : f32[4, 1] = constant() {value = [0.5, 0.25, 1, 2]}\n"
         "%3 : f32[" + rows + ", 4] = weight_only_dot(%0, %1, %2) {group_size = 4}\n"
         "%4 : f32[" + rows + ", 2] = " + half(gate) +
         "%5 : f32[" + rows + ", 2] = " + half(up) +
         "%6 : f32[" + rows + ", 2] = " + fn + "(%4)\n"
         "%7 : f32[" + rows + ", 2] = mul(%6, %5)\n"
         "return %7" + (y_out ? ", %3" : "") + "\n";
}

TEST(GateWeightOnlyOutput, AGateUpProductWritesSiluOfItsGateTimesItsUp) {
  StatusOr<Graph> g = parse_graph(gate_up("1"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_TRUE(verify(*g).ok());
  std::optional<Graph> out = gate_weight_only_output(*g, [](const rt::WeightOnlyFold& f) {
    EXPECT_TRUE(f.gate_output);
    EXPECT_EQ(f.K, 4);
    return f.rows == 1;
  });
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(verify(*out).ok());
  EXPECT_EQ(out->str(), R"(%0 : f32[1, 4] = parameter() {index = 0}
%1 : i8[4, 4] = constant() {value = [1, -2, 3, -4, 5, -6, 7, -8, 2, 4, 6, 8, -1, -3, -5, -7]}
%2 : f32[4, 1] = constant() {value = [0.5, 0.25, 1, 2]}
%3 : f32[1, 2] = weight_only_dot(%0, %1, %2) {group_size = 4, gate_output = true}
return %3
)");
  // A rule that takes no gated output.
  EXPECT_FALSE(gate_weight_only_output(*g, [](const rt::WeightOnlyFold& f) { return !f.gate_output; }).has_value());
}

TEST(GateWeightOnlyOutput, OtherHalvesAnotherFunctionOrAProductReadElsewhereKeepTheirKernels) {
  for (const std::string& text : {gate_up("1", "2", "0"),                  // up first
                                  gate_up("1", "0", "2", "gelu"),          // not SiLU
                                  gate_up("1", "0", "2", "silu", true)}) {  // y is an output too
    StatusOr<Graph> g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_FALSE(gate_weight_only_output(*g).has_value()) << text;
  }
}

}  // namespace
}  // namespace tripy::flat

// FlatIR text form: parse -> str round trips, parse errors name the line, verify catches bad IR.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "flat/ir.h"
#include "flat/ir_text.h"
#include "runtime/fields.h"
#include "../runtime/perturb_fields.h"

namespace tripy::flat {
namespace {

const char* kSample = R"(sym batch [1, 2, 8]
%0 : f32[batch, 4] = parameter() {index = 0, name = "x"}
%1 : f32[4] = constant() {value = [1, 2.5, -3, 0.125]}
%2 : f32[batch, 4] = broadcast(%1) {dims = [1]}
%3 : f32[batch, 4] = add(%0, %2)
%4 : f32[batch] = reduce_sum(%3) {dims = [1]}
%5 : f32[4, batch] = transpose(%3) {dims = [1, 0]}
%6 : f32[(batch * 4)] = reshape(%3)
%7 : f32[batch, 2] = slice(%3) {starts = [0, 1], limits = [batch, 4], steps = [1, 2]}
%8 : i1[batch, 4] = lt(%0, %2)
%9 : f32[batch, 4] = select(%8, %0, %2)
%10 : f16[batch, 4] = convert(%9)
%11 : i32[batch, 4] = iota() {dims = [1]}
%12 : f32[4, 20] = constant() {value = <80 elements>}
%13 : f32[batch, 20] = dot(%3, %12)
%14 : f32[batch, 24] = concatenate(%3, %13) {dims = [1]}
assert_eq(batch, 4) "batch must be 4"
return %4, %5, %6, %7, %10, %11, %14
)";

TEST(FlatText, RoundTrips) {
  auto g = parse_graph(kSample);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->str(), kSample);
  Status st = verify(*g);
  EXPECT_TRUE(st.ok()) << st.message();
  auto again = parse_graph(g->str());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->str(), g->str());
  EXPECT_EQ(g->input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(g->symbols.symbols[0].max, 8);
}

TEST(FlatText, DimExpressionsRoundTrip) {
  const char* text = "sym a [1, 2, 8]\nsym b [1, 3, 8]\n"
                     "%0 : f32[a, b] = parameter() {index = 0}\n"
                     "%1 : f32[max(a, b), ceildiv(a, 2), (a % 3), (b // 2), (4 - a), min(a, 5)] = parameter() {index = 1}\n"
                     "return %1\n";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->str(), text);
  // The frontend names dims after their input ("x.shape[0]").
  const char* indexed = "sym x.shape[0] [1, 2, 4]\n%0 : f32[x.shape[0], 3] = parameter() {index = 0}\nreturn %0\n";
  auto i = parse_graph(indexed);
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_EQ(i->str(), indexed);
  // Sums are canonical whatever order the text used.
  auto h = parse_graph("sym a [1, 2, 8]\nsym b [1, 3, 8]\n%0 : f32[(b + a + 1)] = parameter() {index = 0}\nreturn %0\n");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_NE(h->str().find("f32[((a + b) + 1)]"), std::string::npos) << h->str();
}

TEST(FlatText, LargeConstantsGetADeterministicPattern) {
  auto a = parse_graph("%0 : f32[100] = constant() {value = <100 elements>}\nreturn %0\n");
  auto b = parse_graph("%0 : f32[100] = constant() {value = <100 elements>}\nreturn %0\n");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(0, std::memcmp(a->ops[0].constant.data(), b->ops[0].constant.data(), 400));
}

TEST(FlatText, NarrowDtypesPrintTheirValues) {
  const char* text = "%0 : bf16[3] = constant() {value = [1, -2, 0.5]}\n"
                     "%1 : f8[2] = constant() {value = [448, -0.25]}\n"
                     "%2 : i1[2] = constant() {value = [1, 0]}\n"
                     "%3 : f16[1] = constant() {value = [0.00100040436]}\n"
                     "return %0, %1, %2, %3\n";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->str(), text);
}

TEST(FlatText, ParseErrorsNameTheLine) {
  auto g = parse_graph("%0 : f32[2] = parameter() {index = 0}\n%1 : f32[2] = frobnicate(%0)\n");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("line 2"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("frobnicate"), std::string::npos);
  auto h = parse_graph("%0 : f32[n] = parameter() {index = 0}\n");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("unknown symbol 'n'"), std::string::npos);
  auto u = parse_graph("%1 : f32[2] = neg(%0)\n");
  EXPECT_FALSE(u.ok());
}

TEST(FlatText, DeeplyNestedDimsParseWithoutRecursion) {
  // 100000 parentheses or calls (a recursive parser overflowed its stack), and a chain of 700
  // subtractions that do not fold, whose printed form nests 700 parentheses and must read back.
  auto graph_of = [](const std::string& dim) {
    return "sym T [1, 8, 64]\nsym U [1, 2, 4]\n%0 : f32[" + dim + "] = parameter() {index = 0}\nreturn %0\n";
  };
  std::string parens(100000, '('), calls;
  parens += "2" + std::string(100000, ')');
  for (int i = 0; i < 100000; ++i) calls += "max(";
  calls += "T";
  for (int i = 0; i < 100000; ++i) calls += ", T)";
  for (const std::string& dim : {parens, calls}) {
    auto g = parse_graph(graph_of(dim));
    ASSERT_TRUE(g.ok()) << g.status().message();
  }
  std::string chain = "T";
  for (int i = 0; i < 700; ++i) chain += " % U - 1";
  auto g = parse_graph(graph_of(chain));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(g->str().find(std::string(700, '(')), std::string::npos);
  auto again = parse_graph(g->str());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->str(), g->str());
  EXPECT_FALSE(parse_graph(graph_of("max(T, (T + 1)")).ok());
  EXPECT_FALSE(parse_graph(graph_of("((T)")).ok());
}

TEST(FlatText, NumbersPrintWhateverTheirValue) {
  EXPECT_EQ(number_text(3.0), "3");
  EXPECT_EQ(number_text(-0.5), "-0.5");
  EXPECT_EQ(number_text(1e300), "1e+300");
  EXPECT_EQ(number_text(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(number_text(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(number_text(std::nan("")), "nan");
}

TEST(FlatVerify, RejectsMismatchedShapes) {
  auto g = parse_graph("%0 : f32[2, 3] = parameter() {index = 0}\n"
                       "%1 : f32[3, 2] = parameter() {index = 1}\n"
                       "%2 : f32[2, 3] = add(%0, %1)\n"
                       "return %2\n");
  ASSERT_TRUE(g.ok());
  Status st = verify(*g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("add"), std::string::npos) << st.message();
}

TEST(FlatVerify, AcceptsNegativeSliceStepsButNotZero) {
  auto g = parse_graph("%0 : f32[2, 5] = parameter() {index = 0}\n"
                       "%1 : f32[2, 5] = slice(%0) {starts = [0, 4], limits = [2, -1], steps = [1, -1]}\n"
                       "return %1\n");
  ASSERT_TRUE(g.ok()) << g.status().message();
  Status st = verify(*g);
  EXPECT_TRUE(st.ok()) << st.message();
  auto z = parse_graph("%0 : f32[2] = parameter() {index = 0}\n"
                       "%1 : f32[2] = slice(%0) {starts = [0], limits = [2], steps = [0]}\nreturn %1\n");
  ASSERT_TRUE(z.ok());
  EXPECT_FALSE(verify(*z).ok());
}

// Attributes past the range the size rule's arithmetic is exact in are rejected before it runs
// (found by fuzz_flat_ir: a padding of 2^63 - 1 overflowed the output size's sum).
TEST(FlatVerify, ConvolutionAttributesAndWeightDimsOutOfRangeAreRejected) {
  auto graph = [](const std::string& weight, const std::string& pad_after, const std::string& dilation,
                  const std::string& more = "") {
    return parse_graph("%0 : f32[1, 2, 5, 5] = parameter() {index = 0}\n%1 : f32" + weight +
                       " = parameter() {index = 1}\n%2 : f32[1, 3, 4, 3] = convolution(%0, %1) {stride = [1, 1], "
                       "pad_before = [1, 0], pad_after = " + pad_after + ", dilation = " + dilation +
                       ", output_padding = [0, 0]" + more + "}\nreturn %2\n");
  };
  auto good = graph("[3, 2, 3, 3]", "[0, 0]", "[1, 1]");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_TRUE(verify(*good).ok()) << verify(*good).message();
  for (auto g : {graph("[3, 2, 3, 3]", "[1444444444444444444444, 0]", "[1, 1]"),
                 graph("[3, 2, 3, 3]", "[0, 0]", "[1, 1073741825]"),
                 graph("[3, 2, 3, 3]", "[0, 0]", "[1, 1]", ", groups = 4611686018427387904")}) {
    ASSERT_TRUE(g.ok()) << g.status().message();
    Status st = verify(*g);
    EXPECT_FALSE(st.ok()) << g->str();
    EXPECT_NE(st.message().find("out of range"), std::string::npos) << st.message();
  }
  auto wide = graph("[3, 2, 3, 4611686018427387904]", "[0, 0]", "[1, 1]");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_NE(verify(*wide).message().find("weight dim over 2^30"), std::string::npos) << verify(*wide).message();
}

// A range that runs against its step is empty (Python's x[5:2]), never a negative size.
TEST(FlatVerify, ReversedSliceRangesAreEmpty) {
  auto g = parse_graph("%0 : f32[10] = parameter() {index = 0}\n"
                       "%1 : f32[0] = slice(%0) {starts = [5], limits = [2], steps = [1]}\n"
                       "%2 : f32[0] = slice(%0) {starts = [2], limits = [8], steps = [-1]}\n"
                       "return %1, %2\n");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(verify(*g).ok()) << verify(*g).message();
  auto bad = parse_graph("%0 : f32[10] = parameter() {index = 0}\n"
                         "%1 : f32[1] = slice(%0) {starts = [5], limits = [2], steps = [1]}\nreturn %1\n");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(verify(*bad).ok());
}

TEST(FlatVerify, RejectsBadDot) {
  auto g = parse_graph("%0 : f32[2, 3] = parameter() {index = 0}\n"
                       "%1 : f32[4, 2] = parameter() {index = 1}\n"
                       "%2 : f32[2, 2] = dot(%0, %1)\n"
                       "return %2\n");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(verify(*g).ok());
}

TEST(FlatVerify, ChecksBatchBroadcastOfDot) {
  auto g = parse_graph("%0 : f32[5, 2, 3] = parameter() {index = 0}\n"
                       "%1 : f32[3, 4] = parameter() {index = 1}\n"
                       "%2 : f32[5, 2, 4] = dot(%0, %1)\n"
                       "return %2\n");
  ASSERT_TRUE(g.ok());
  Status st = verify(*g);
  EXPECT_TRUE(st.ok()) << st.message();
}

// A shape value (tp.DimensionInputInfo): the parameter names the symbol its run-time value is.
const char* kShapeValue = R"(sym n [0, 4, 8]
%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : i64[] = parameter() {index = 1, name = "n", value_of = n}
%2 : f32[] = constant() {value = [1]}
%3 : f32[n, 3] = broadcast(%2) {dims = []}
return %3
)";

TEST(FlatText, ShapeValueParametersRoundTrip) {
  auto g = parse_graph(kShapeValue);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->str(), kShapeValue);
  EXPECT_EQ(g->def(g->inputs[1]).shape_symbol, 0);
  EXPECT_EQ(g->def(g->inputs[0]).shape_symbol, -1);
  Status st = verify(*g);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_FALSE(parse_graph("%0 : i64[] = parameter() {index = 0, value_of = 3}\nreturn %0\n").ok());
}

TEST(FlatVerify, ShapeValueParametersAreI64ScalarsThatNoOpReads) {
  auto read = parse_graph("sym n [1, 2, 4]\n%0 : i64[] = parameter() {index = 0, value_of = n}\n"
                          "%1 : i64[] = neg(%0)\nreturn %1\n");
  ASSERT_TRUE(read.ok()) << read.status().message();
  Status st = verify(*read);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("shape value"), std::string::npos) << st.message();
  auto returned = parse_graph("sym n [1, 2, 4]\n%0 : i64[] = parameter() {index = 0, value_of = n}\nreturn %0\n");
  ASSERT_TRUE(returned.ok());
  EXPECT_FALSE(verify(*returned).ok());
  auto wrong_type = parse_graph("sym n [1, 2, 4]\n%0 : i32[] = parameter() {index = 0, value_of = n}\n"
                                "%1 : f32[n] = iota() {dims = [0]}\nreturn %1\n");
  ASSERT_TRUE(wrong_type.ok());
  EXPECT_FALSE(verify(*wrong_type).ok());
}

TEST(FlatGraph, UseCountsIncludeOutputs) {
  auto g = parse_graph("%0 : f32[2] = parameter() {index = 0}\n%1 : f32[2] = mul(%0, %0)\nreturn %1, %1\n");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->use_counts(), (std::vector<int32_t>{2, 2}));
}

}  // namespace
}  // namespace tripy::flat

namespace tripy::flat {
namespace {

using rt::testing::perturb;

// The kinds whose attributes are a kernel's attribute struct print and parse every field of it
// (the struct's field list), except what its text leaves out (a plugin's device code).
TEST(FlatText, KernelAttributeFieldsRoundTripThroughText) {
  Graph g;
  const ValueId x = g.add(Op{OpKind::kParameter}, DType::kFloat32, {Dim(2)});
  g.inputs = {x};
  g.input_names = {"x"};
  for (OpKind kind : {OpKind::kAttention, OpKind::kConvolution, OpKind::kPooling, OpKind::kPlugin}) {
    Op op;
    op.kind = kind;
    op.operands = {x};
    perturb(op.attention);
    perturb(op.convolution);
    perturb(op.pooling);
    perturb(op.plugin);
    g.outputs.push_back(g.add(op, DType::kFloat32, {Dim(2)}));
  }
  auto back = parse_graph(g.str());
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << g.str();
  ASSERT_EQ(back->ops.size(), g.ops.size());
  EXPECT_TRUE(rt::fields_equal(back->ops[1].attention, g.ops[1].attention)) << g.str();
  EXPECT_TRUE(rt::fields_equal(back->ops[2].convolution, g.ops[2].convolution)) << g.str();
  EXPECT_TRUE(rt::fields_equal(back->ops[3].pooling, g.ops[3].pooling)) << g.str();
  rt::PluginAttrs plugin = g.ops[4].plugin;
  plugin.cuda_source.clear();  // left out of the text
  plugin.cuda_entry.clear();
  EXPECT_TRUE(rt::fields_equal(back->ops[4].plugin, plugin)) << g.str();
  EXPECT_EQ(back->str(), g.str());
}

}  // namespace
}  // namespace tripy::flat

// Fused elementwise kernels on the CPU backend: every EwOp against a reference loop, for the
// float, integer and bool compute types, plus broadcasting loads, iota and narrow-float stores.
#include <cmath>
#include <functional>

#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;
constexpr DType I32 = DType::kInt32;
constexpr DType I64 = DType::kInt64;
constexpr DType B8 = DType::kBool;

// out = op(load x[, load y]) elementwise over `shape`; operands share `in` dtype.
Tensor run_op(EwOp op, DType in, DType out_dtype, const std::vector<Tensor>& args) {
  ProgramBuilder b;
  const auto& shape = args[0].shape();
  std::vector<int32_t> ins_ids;
  for (const Tensor& t : args) ins_ids.push_back(b.input(t.dtype(), t.shape()));
  int32_t o = b.output(out_dtype, shape);
  Kernel& k = b.kernel(KernelKind::kFused, std::string("fused_") + ew_op_name(op), ins_ids, {o});
  k.fused.domain = b.dims(shape);
  k.fused.reduce_from = static_cast<int32_t>(shape.size());
  std::vector<int32_t> axes;
  for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int32_t>(d));
  for (size_t i = 0; i < args.size(); ++i) {
    k.fused.input_axes.push_back(axes);
    k.fused.instrs.push_back(ins(EwOp::kLoad, args[i].dtype(), static_cast<int32_t>(i)));
  }
  k.fused.instrs.push_back(ins(op, out_dtype, 0, args.size() > 1 ? 1 : -1, args.size() > 2 ? 2 : -1));
  k.fused.output_regs = {static_cast<int32_t>(args.size())};
  auto r = b.run(args);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], rtol * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(CpuFused, AddsTwoMatrices) {
  Tensor out = run_op(EwOp::kAdd, F, F, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {10, 20, 30, 40, 50, 60})});
  EXPECT_EQ(values<float>(out), (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

TEST(CpuFused, FloatUnaryOpsMatchLibm) {
  const std::vector<float> x = {-3.7f, -1.5f, -0.5f, -0.0f, 0.25f, 0.5f, 1.5f, 2.5f, 3.3f, 20.0f, -90.0f};
  const std::vector<float> pos = {0.001f, 0.25f, 0.5f, 1.0f, 2.0f, 9.0f, 100.0f, 1e6f};
  struct Case {
    EwOp op;
    std::function<double(double)> ref;
    bool positive;
  };
  const std::vector<Case> cases = {
      {EwOp::kNeg, [](double v) { return -v; }, false},
      {EwOp::kAbs, [](double v) { return std::fabs(v); }, false},
      {EwOp::kExp, [](double v) { return std::exp(v); }, false},
      {EwOp::kLog, [](double v) { return std::log(v); }, true},
      {EwOp::kSqrt, [](double v) { return std::sqrt(v); }, true},
      {EwOp::kRsqrt, [](double v) { return 1 / std::sqrt(v); }, true},
      {EwOp::kTanh, [](double v) { return std::tanh(v); }, false},
      {EwOp::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, false},
      {EwOp::kErf, [](double v) { return std::erf(v); }, false},
      {EwOp::kSin, [](double v) { return std::sin(v); }, false},
      {EwOp::kCos, [](double v) { return std::cos(v); }, false},
      {EwOp::kFloor, [](double v) { return std::floor(v); }, false},
      {EwOp::kCeil, [](double v) { return std::ceil(v); }, false},
      {EwOp::kRound, [](double v) { return std::nearbyint(v); }, false},  // half to even
      {EwOp::kSign, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }, false},
  };
  for (const Case& c : cases) {
    const auto& in = c.positive ? pos : x;
    Tensor out = run_op(c.op, F, F, {f32({static_cast<int64_t>(in.size())}, in)});
    std::vector<double> want;
    for (float v : in) want.push_back(c.ref(v));
    expect_near_all(values<float>(out), want, 2e-6, ew_op_name(c.op));
  }
  // Round is half-to-even, not half-away-from-zero.
  Tensor r = run_op(EwOp::kRound, F, F, {f32({4}, {0.5f, 1.5f, 2.5f, -2.5f})});
  EXPECT_EQ(values<float>(r), (std::vector<float>{0, 2, 2, -2}));
}

TEST(CpuFused, ExpHandlesExtremes) {
  Tensor out = run_op(EwOp::kExp, F, F, {f32({5}, {100.0f, -200.0f, NAN, INFINITY, -INFINITY})});
  auto v = values<float>(out);
  EXPECT_TRUE(std::isinf(v[0]));
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_TRUE(std::isinf(v[3]));
  EXPECT_EQ(v[4], 0.0f);
}

TEST(CpuFused, FloatBinaryOpsFollowNumpy) {
  const std::vector<float> a = {7.5f, -7.5f, 7.5f, -7.5f, 3.0f, 0.0f, 2.0f, -1.0f, NAN};
  const std::vector<float> c = {2.0f, 2.0f, -2.0f, -2.0f, 3.0f, 5.0f, 0.5f, 4.0f, 1.0f};
  const int64_t n = static_cast<int64_t>(a.size());
  auto run = [&](EwOp op) { return values<float>(run_op(op, F, F, {f32({n}, a), f32({n}, c)})); };
  std::vector<double> add, sub, mul, div, pw, mx, mn, rem, fdiv;
  for (int64_t i = 0; i < n; ++i) {
    double x = a[i], y = c[i];
    add.push_back(x + y);
    sub.push_back(x - y);
    mul.push_back(x * y);
    div.push_back(x / y);
    pw.push_back(std::pow(x, y));
    mx.push_back(std::isnan(x) ? NAN : std::max(x, y));
    mn.push_back(std::isnan(x) ? NAN : std::min(x, y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    rem.push_back(r);
    fdiv.push_back(std::floor(x / y));
  }
  expect_near_all(run(EwOp::kAdd), add, 1e-6, "add");
  expect_near_all(run(EwOp::kSub), sub, 1e-6, "sub");
  expect_near_all(run(EwOp::kMul), mul, 1e-6, "mul");
  expect_near_all(run(EwOp::kDiv), div, 1e-6, "div");
  expect_near_all(run(EwOp::kPow), pw, 1e-6, "pow");
  expect_near_all(run(EwOp::kMax), mx, 0, "max");
  expect_near_all(run(EwOp::kMin), mn, 0, "min");
  expect_near_all(run(EwOp::kRem), rem, 1e-6, "rem");
  expect_near_all(run(EwOp::kFloorDiv), fdiv, 0, "floordiv");
  // np.remainder(7.5, -2) == -0.5, np.floor_divide(-7.5, 2) == -4.
  EXPECT_FLOAT_EQ(run(EwOp::kRem)[2], -0.5f);
  EXPECT_FLOAT_EQ(run(EwOp::kFloorDiv)[1], -4.0f);
}

TEST(CpuFused, ComparisonsGiveBool) {
  const std::vector<float> a = {1, 2, 3, NAN}, c = {2, 2, 2, 1};
  struct Case {
    EwOp op;
    std::vector<uint8_t> want;
  };
  for (const Case& t : std::vector<Case>{{EwOp::kEq, {0, 1, 0, 0}}, {EwOp::kNe, {1, 0, 1, 1}},
                                         {EwOp::kLt, {1, 0, 0, 0}}, {EwOp::kLe, {1, 1, 0, 0}},
                                         {EwOp::kGt, {0, 0, 1, 0}}, {EwOp::kGe, {0, 1, 1, 0}}}) {
    Tensor out = run_op(t.op, F, B8, {f32({4}, a), f32({4}, c)});
    EXPECT_EQ(values<uint8_t>(out), t.want) << ew_op_name(t.op);
    Tensor iout = run_op(t.op, I32, B8, {make_tensor<int32_t>(I32, {3}, {1, 2, 3}),
                                          make_tensor<int32_t>(I32, {3}, {2, 2, 2})});
    EXPECT_EQ(values<uint8_t>(iout), std::vector<uint8_t>(t.want.begin(), t.want.begin() + 3));
  }
}

template <class T>
void check_int_binary(DType dt) {
  const std::vector<T> a = {7, -7, 7, -7, 0, 5, 3, -8, 6};
  const std::vector<T> c = {2, 2, -2, -2, 3, 0, 4, 3, 3};
  const int64_t n = static_cast<int64_t>(a.size());
  auto run = [&](EwOp op) {
    return values<T>(run_op(op, dt, dt, {make_tensor<T>(dt, {n}, a), make_tensor<T>(dt, {n}, c)}));
  };
  std::vector<T> add, sub, mul, mx, mn, rem, fdiv, band, bor, bxor, pw;
  for (int64_t i = 0; i < n; ++i) {
    T x = a[i], y = c[i];
    add.push_back(x + y);
    sub.push_back(x - y);
    mul.push_back(x * y);
    mx.push_back(std::max(x, y));
    mn.push_back(std::min(x, y));
    // Python semantics: floor division and modulo take the divisor's sign; /0 gives 0 (numpy).
    if (y == 0) {
      rem.push_back(0);
      fdiv.push_back(0);
    } else {
      T q = static_cast<T>(std::floor(static_cast<double>(x) / y));
      fdiv.push_back(q);
      rem.push_back(x - q * y);
    }
    band.push_back(x & y);
    bor.push_back(x | y);
    bxor.push_back(x ^ y);
    T p = 1;
    for (T e = 0; e < y; ++e) p *= x;
    pw.push_back(y < 0 ? (x == 1 ? 1 : 0) : p);
  }
  EXPECT_EQ(run(EwOp::kAdd), add);
  EXPECT_EQ(run(EwOp::kSub), sub);
  EXPECT_EQ(run(EwOp::kMul), mul);
  EXPECT_EQ(run(EwOp::kMax), mx);
  EXPECT_EQ(run(EwOp::kMin), mn);
  EXPECT_EQ(run(EwOp::kRem), rem);
  EXPECT_EQ(run(EwOp::kFloorDiv), fdiv);
  EXPECT_EQ(run(EwOp::kAnd), band);
  EXPECT_EQ(run(EwOp::kOr), bor);
  EXPECT_EQ(run(EwOp::kXor), bxor);
  EXPECT_EQ(run(EwOp::kPow), pw);
  EXPECT_EQ(run(EwOp::kRem)[1], 1);       // -7 % 2 == 1 in Python
  EXPECT_EQ(run(EwOp::kFloorDiv)[1], -4);  // -7 // 2 == -4
}

TEST(CpuFused, Int32BinaryOpsFollowPython) { check_int_binary<int32_t>(I32); }
TEST(CpuFused, Int64BinaryOpsFollowPython) { check_int_binary<int64_t>(I64); }

TEST(CpuFused, IntUnaryOps) {
  Tensor x = make_tensor<int64_t>(I64, {4}, {-5, 0, 3, -1});
  EXPECT_EQ(values<int64_t>(run_op(EwOp::kNeg, I64, I64, {x})), (std::vector<int64_t>{5, 0, -3, 1}));
  EXPECT_EQ(values<int64_t>(run_op(EwOp::kAbs, I64, I64, {x})), (std::vector<int64_t>{5, 0, 3, 1}));
  EXPECT_EQ(values<int64_t>(run_op(EwOp::kSign, I64, I64, {x})), (std::vector<int64_t>{-1, 0, 1, -1}));
  EXPECT_EQ(values<int64_t>(run_op(EwOp::kNot, I64, I64, {x})), (std::vector<int64_t>{4, -1, -4, 0}));
}

TEST(CpuFused, BoolLogic) {
  Tensor p = make_tensor<uint8_t>(B8, {4}, {0, 0, 1, 1});
  Tensor q = make_tensor<uint8_t>(B8, {4}, {0, 1, 0, 1});
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kAnd, B8, B8, {p, q})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kOr, B8, B8, {p, q})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kXor, B8, B8, {p, q})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kNot, B8, B8, {p})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kEq, B8, B8, {p, q})), (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(CpuFused, SelectPicksPerElement) {
  Tensor c = make_tensor<uint8_t>(B8, {4}, {1, 0, 1, 0});
  Tensor out = run_op(EwOp::kSelect, F, F, {c, f32({4}, {1, 2, 3, 4}), f32({4}, {-1, -2, -3, -4})});
  EXPECT_EQ(values<float>(out), (std::vector<float>{1, -2, 3, -4}));
  Tensor iout = run_op(EwOp::kSelect, I64, I64,
                       {c, make_tensor<int64_t>(I64, {4}, {1, 2, 3, 4}), make_tensor<int64_t>(I64, {4}, {9, 9, 9, 9})});
  EXPECT_EQ(values<int64_t>(iout), (std::vector<int64_t>{1, 9, 3, 9}));
}

TEST(CpuFused, ConvertUsesCppSemantics) {
  Tensor x = f32({5}, {-2.7f, -0.5f, 0.0f, 1.9f, 3.5f});
  EXPECT_EQ(values<int32_t>(run_op(EwOp::kConvert, F, I32, {x})), (std::vector<int32_t>{-2, 0, 0, 1, 3}));
  EXPECT_EQ(values<int64_t>(run_op(EwOp::kConvert, F, I64, {x})), (std::vector<int64_t>{-2, 0, 0, 1, 3}));
  EXPECT_EQ(values<uint8_t>(run_op(EwOp::kConvert, F, B8, {x})), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  Tensor i = make_tensor<int32_t>(I32, {3}, {-3, 0, 300});
  EXPECT_EQ(values<float>(run_op(EwOp::kConvert, I32, F, {i})), (std::vector<float>{-3, 0, 300}));
  EXPECT_EQ(values<int8_t>(run_op(EwOp::kConvert, I32, DType::kInt8, {i})), (std::vector<int8_t>{-3, 0, 44}));
  Tensor bo = make_tensor<uint8_t>(B8, {2}, {1, 0});
  EXPECT_EQ(values<float>(run_op(EwOp::kConvert, B8, F, {bo})), (std::vector<float>{1, 0}));
}

TEST(CpuFused, BroadcastLoadsUseStrideZero) {
  // out[i, j] = x[i, j] + row[j] * col[i, 0]
  ProgramBuilder b;
  const int64_t R = 37, C = 700;  // more than one tile per row, rows not a multiple of a tile
  int32_t x = b.input(F, {R, C}), row = b.input(F, {C}), col = b.input(F, {R, 1}), o = b.output(F, {R, C});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_bcast", {x, row, col}, {o});
  k.fused.domain = b.dims({R, C});
  k.fused.reduce_from = 2;
  k.fused.input_axes = {{0, 1}, {1}, {0, 1}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kLoad, F, 2),
                    ins(EwOp::kMul, F, 1, 2), ins(EwOp::kAdd, F, 0, 3)};
  k.fused.output_regs = {4};
  auto xv = random_floats(R * C, -1, 1, 1), rv = random_floats(C, -1, 1, 2), cv = random_floats(R, -1, 1, 3);
  auto out = b.run({f32({R, C}, xv), f32({C}, rv), f32({R, 1}, cv)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto got = values<float>((*out)[0]);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j)
      ASSERT_FLOAT_EQ(got[i * C + j], xv[i * C + j] + rv[j] * cv[i]) << i << "," << j;
}

TEST(CpuFused, TransposedInputAxesGather) {
  // out[i, j] = x[j, i]: the input's dims run along domain axes (1, 0).
  ProgramBuilder b;
  int32_t x = b.input(F, {3, 2}), o = b.output(F, {2, 3});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_t", {x}, {o});
  k.fused.domain = b.dims({2, 3});
  k.fused.reduce_from = 2;
  k.fused.input_axes = {{1, 0}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0)};
  k.fused.output_regs = {0};
  auto out = b.run({f32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST(CpuFused, IotaAlongEachAxis) {
  ProgramBuilder b;
  int32_t o0 = b.output(I64, {3, 4}), o1 = b.output(F, {3, 4});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_iota", {}, {o0, o1});
  k.fused.domain = b.dims({3, 4});
  k.fused.reduce_from = 2;
  k.fused.instrs = {ins(EwOp::kIota, I64, 0), ins(EwOp::kIota, F, 1)};
  k.fused.output_regs = {0, 1};
  auto out = b.run({});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(values<float>((*out)[1]), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(CpuFused, ConstOutputIsSplat) {
  ProgramBuilder b;
  int32_t o = b.output(DType::kInt32, {2, 2});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_fill", {}, {o});
  k.fused.domain = b.dims({2, 2});
  k.fused.reduce_from = 2;
  k.fused.instrs = {ins(EwOp::kConst, I32, -1, -1, -1, 7)};
  k.fused.output_regs = {0};
  auto out = b.run({});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<int32_t>((*out)[0]), (std::vector<int32_t>{7, 7, 7, 7}));
}

// An integer constant past its type (a hostile file's, or int64's largest value, which no double
// holds) saturates at the type's bounds instead of converting out of range (undefined behaviour).
TEST(CpuFused, IntegerConstantsPastTheirTypeSaturate) {
  for (auto [imm, want] : std::vector<std::pair<double, int32_t>>{
           {2.14774e9, INT32_MAX}, {-1e300, INT32_MIN}, {NAN, 0}, {-7.0, -7}}) {
    ProgramBuilder b;
    int32_t o = b.output(DType::kInt32, {2});
    Kernel& k = b.kernel(KernelKind::kFused, "fused_fill", {}, {o});
    k.fused.domain = b.dims({2});
    k.fused.reduce_from = 1;
    k.fused.instrs = {ins(EwOp::kConst, I32, -1, -1, -1, imm)};
    k.fused.output_regs = {0};
    auto out = b.run({});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(values<int32_t>((*out)[0]), (std::vector<int32_t>{want, want})) << imm;
  }
}

TEST(CpuFused, LargeKernelRunsInParallelAndMatches) {
  const int64_t n = 1 << 20;
  auto xv = random_floats(n, -4, 4, 7);
  Tensor out = run_op(EwOp::kTanh, F, F, {f32({n}, xv)});
  auto got = values<float>(out);
  for (int64_t i = 0; i < n; i += 997) ASSERT_NEAR(got[i], std::tanh(xv[i]), 1e-6);
}

TEST(CpuFused, RejectsFloatOnlyOpOnIntegers) {
  ProgramBuilder b;
  int32_t x = b.input(I32, {2}), o = b.output(I32, {2});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_bad_exp", {x}, {o});
  k.fused.domain = b.dims({2});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0}};
  k.fused.instrs = {ins(EwOp::kLoad, I32, 0), ins(EwOp::kExp, I32, 0)};
  k.fused.output_regs = {1};
  auto out = b.run({make_tensor<int32_t>(I32, {2}, {1, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("fused_bad_exp"), std::string::npos) << out.status().message();
}

TEST(CpuFused, RejectsForwardOperandReference) {
  ProgramBuilder b;
  int32_t o = b.output(F, {2});
  Kernel& k = b.kernel(KernelKind::kFused, "fused_bad_ssa", {}, {o});
  k.fused.domain = b.dims({2});
  k.fused.reduce_from = 1;
  k.fused.instrs = {ins(EwOp::kNeg, F, 0)};
  k.fused.output_regs = {0};
  EXPECT_FALSE(b.run({}).ok());
}

}  // namespace
}  // namespace tripy::cpu::testing

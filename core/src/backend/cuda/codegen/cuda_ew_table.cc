// Code emission as a table: one row per EwOp giving its CUDA C++ expression for float, integer
// and bool operands (semantics identical to the CPU backend's fused_ops.cc: numpy's). Which cells
// are filled is checked at compile time against the primitive table, ew_ops.def.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/cuda/codegen/cuda_sources.h"

namespace tripy::rt::cuda {
namespace {

struct OpRow {
  EwOp op;
  const char* f;  // float operands (compute kind kF32)
  const char* i;  // int32/int64 operands
  const char* b;  // bool operands
};

// {a}, {b}, {c} are operand expressions. "" = undefined for that kind. Prelude helpers: wadd,
// wsub, wmul, wneg (wrap-around), ifloordiv, irem, ipow, ffloordiv, frem, fmaxn/fminn (NaN-
// propagating), fsign, and the activations act_gelu, act_silu (also the epilogues').
constexpr OpRow kRows[] = {
    {EwOp::kLoad, "", "", ""},
    {EwOp::kConst, "", "", ""},
    {EwOp::kIota, "", "", ""},
    {EwOp::kNeg, "(-{a})", "wneg({a})", ""},
    {EwOp::kAbs, "fabsf({a})", "({a} < 0 ? wneg({a}) : {a})", "{a}"},
    {EwOp::kExp, "expf({a})", "", ""},
    {EwOp::kLog, "logf({a})", "", ""},
    {EwOp::kSqrt, "sqrtf({a})", "", ""},
    {EwOp::kRsqrt, "(1.0f / sqrtf({a}))", "", ""},
    {EwOp::kTanh, "tanhf({a})", "", ""},
    {EwOp::kSigmoid, "(1.0f / (1.0f + expf(-{a})))", "", ""},
    {EwOp::kErf, "erff({a})", "", ""},
    {EwOp::kSin, "sinf({a})", "", ""},
    {EwOp::kCos, "cosf({a})", "", ""},
    {EwOp::kFloor, "floorf({a})", "{a}", "{a}"},
    {EwOp::kCeil, "ceilf({a})", "{a}", "{a}"},
    {EwOp::kRound, "rintf({a})", "{a}", "{a}"},
    {EwOp::kSign, "fsign({a})", "(({a} > 0) - ({a} < 0))", "{a}"},
    {EwOp::kNot, "", "(~{a})", "(!{a})"},
    {EwOp::kAdd, "({a} + {b})", "wadd({a}, {b})", "({a} | {b})"},
    {EwOp::kSub, "({a} - {b})", "wsub({a}, {b})", ""},
    {EwOp::kMul, "({a} * {b})", "wmul({a}, {b})", "({a} & {b})"},
    {EwOp::kDiv, "({a} / {b})", "", ""},
    {EwOp::kPow, "powf({a}, {b})", "ipow({a}, {b})", ""},
    {EwOp::kMax, "fmaxn({a}, {b})", "({a} > {b} ? {a} : {b})", "({a} | {b})"},
    {EwOp::kMin, "fminn({a}, {b})", "({a} < {b} ? {a} : {b})", "({a} & {b})"},
    {EwOp::kRem, "frem({a}, {b})", "irem({a}, {b})", ""},
    {EwOp::kFloorDiv, "ffloordiv({a}, {b})", "ifloordiv({a}, {b})", ""},
    {EwOp::kAnd, "", "({a} & {b})", "({a} & {b})"},
    {EwOp::kOr, "", "({a} | {b})", "({a} | {b})"},
    {EwOp::kXor, "", "({a} ^ {b})", "({a} ^ {b})"},
    {EwOp::kEq, "({a} == {b})", "({a} == {b})", "({a} == {b})"},
    {EwOp::kNe, "({a} != {b})", "({a} != {b})", "({a} != {b})"},
    {EwOp::kLt, "({a} < {b})", "({a} < {b})", "({a} < {b})"},
    {EwOp::kLe, "({a} <= {b})", "({a} <= {b})", "({a} <= {b})"},
    {EwOp::kGt, "({a} > {b})", "({a} > {b})", "({a} > {b})"},
    {EwOp::kGe, "({a} >= {b})", "({a} >= {b})", "({a} >= {b})"},
    {EwOp::kSelect, "({a} ? {b} : {c})", "({a} ? {b} : {c})", "({a} ? {b} : {c})"},
    {EwOp::kConvert, "", "", ""},
    {EwOp::kReduceSum, "", "", ""},
    {EwOp::kReduceProd, "", "", ""},
    {EwOp::kReduceMax, "", "", ""},
    {EwOp::kReduceMin, "", "", ""},
    {EwOp::kGelu, "act_gelu({a})", "", ""},
    {EwOp::kSilu, "act_silu({a})", "", ""},
    {EwOp::kExpm1, "expm1f({a})", "", ""},
};
static_assert(sizeof(kRows) / sizeof(kRows[0]) == static_cast<size_t>(EwOp::kNumOps),
              "every EwOp needs a row in the CUDA emission table");

// In EwOp order, with an expression exactly for the kinds the primitive table (ew_ops.def) allows:
// a new op, or a new kind for an old one, cannot miss its CUDA emitter.
constexpr bool rows_match_table() {
  for (size_t i = 0; i < kNumEwOps; ++i) {
    const OpRow& r = kRows[i];
    const EwOpInfo& info = kEwOps[i];
    if (static_cast<size_t>(r.op) != i) return false;
    const bool emitted = info.form == EwForm::kUnary || info.form == EwForm::kBinary ||
                         info.form == EwForm::kCompare || info.form == EwForm::kSelect;
    if ((r.f[0] != 0) != (emitted && (info.kinds & ew_kinds::F)) ||
        (r.i[0] != 0) != (emitted && (info.kinds & ew_kinds::I)) ||
        (r.b[0] != 0) != (emitted && (info.kinds & ew_kinds::B)))
      return false;
  }
  return true;
}
static_assert(rows_match_table(), "the CUDA table must define each op exactly on the kinds ew_ops.def allows");

std::string substitute(const char* pattern, const std::string& a, const std::string& b,
                       const std::string& c) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '{' && p[1] && p[2] == '}') {
      out += p[1] == 'a' ? a : p[1] == 'b' ? b : c;
      p += 2;
    } else {
      out += *p;
    }
  }
  return out;
}

std::string float_literal(float v) {
  if (std::isnan(v)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%af", static_cast<double>(v));  // hex float: exact
  return std::string("(") + buf + ")";
}

}  // namespace

const char* ctype(CKind k) {
  switch (k) {
    case CKind::kF32: return "float";
    case CKind::kI32: return "int";
    case CKind::kI64: return "long long";
    case CKind::kBool: return "bool";
  }
  return "float";
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::kFloat32: return "float";
    case DType::kFloat16: case DType::kBFloat16: return "unsigned short";
    case DType::kFloat8E4M3: case DType::kBool: return "unsigned char";
    case DType::kInt4: case DType::kInt8: return "signed char";
    case DType::kInt32: return "int";
    case DType::kInt64: return "long long";
  }
  return "float";
}

std::string load_expr(DType t, const std::string& x) {
  switch (t) {
    case DType::kFloat16: return "h2f(" + x + ")";
    case DType::kBFloat16: return "b2f(" + x + ")";
    case DType::kFloat8E4M3: return "f82f(" + x + ")";
    case DType::kInt4: case DType::kInt8: return "(int)(" + x + ")";
    case DType::kBool: return "(" + x + " != 0)";
    default: return x;
  }
}

std::string store_expr(DType t, const std::string& x) {
  switch (t) {
    case DType::kFloat16: return "f2h(" + x + ")";
    case DType::kBFloat16: return "f2b(" + x + ")";
    case DType::kFloat8E4M3: return "f2f8(" + x + ")";
    case DType::kInt4: return "(signed char)wrap4(" + x + ")";
    case DType::kInt8: return "(signed char)(" + x + ")";
    case DType::kBool: return "(unsigned char)(" + x + ")";
    default: return x;
  }
}

std::string narrow_expr(DType t, const std::string& x) {
  switch (t) {
    case DType::kFloat16: return "h2f(f2h(" + x + "))";
    case DType::kBFloat16: return "b2f(f2b(" + x + "))";
    case DType::kFloat8E4M3: return "f82f(f2f8(" + x + "))";
    case DType::kInt8: return "(int)(signed char)(" + x + ")";
    case DType::kInt4: return "wrap4(" + x + ")";
    default: return x;
  }
}

std::string ew_expr(const Instr& in, CKind operand, const std::string& a, const std::string& b,
                    const std::string& c) {
  if (in.op == EwOp::kConvert) {
    if (in.dtype == DType::kBool) return "(" + a + " != 0)";
    std::string cast = std::string("(") + ctype(compute_kind(in.dtype)) + ")(" + a + ")";
    return narrow_expr(in.dtype, cast);
  }
  if (!ew_valid(in.op)) return "";
  const OpRow& row = kRows[static_cast<size_t>(in.op)];
  const char* pattern = operand == CKind::kF32 ? row.f : operand == CKind::kBool ? row.b : row.i;
  if (!*pattern) return "";
  return substitute(pattern, a, b, c);
}

std::string const_literal(DType dtype, double imm) {
  switch (compute_kind(dtype)) {
    case CKind::kF32: return narrow_expr(dtype, float_literal(static_cast<float>(imm)));
    case CKind::kI32: {
      const int32_t v = saturated_immediate<int32_t>(imm);
      std::string lit = v == INT32_MIN ? "(-2147483647 - 1)" : "(" + std::to_string(v) + ")";
      return narrow_expr(dtype, lit);
    }
    case CKind::kI64: {
      const int64_t v = saturated_immediate<int64_t>(imm);
      return v == INT64_MIN ? "(-9223372036854775807LL - 1)" : "(" + std::to_string(v) + "LL)";
    }
    case CKind::kBool: return imm != 0 ? "true" : "false";
  }
  return "0";
}

}  // namespace tripy::rt::cuda

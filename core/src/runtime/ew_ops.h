// The instruction set of fused kernels (and FlatIR's elementwise and reduce functions), read from
// the one primitive table, ew_ops.def. Code that needs to know what kind of op it has asks the
// row's properties here (form, kinds, commutative, reduce) rather than comparing enum ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "tripy/dtype.h"

namespace tripy::rt {

enum class EwOp : uint8_t {
#define TRIPY_EW_OP(Enum, ...) k##Enum,
#include "runtime/ew_ops.def"
#undef TRIPY_EW_OP
  kNumOps
};
inline constexpr size_t kNumEwOps = static_cast<size_t>(EwOp::kNumOps);

// The type fused kernels compute a storage dtype in: narrow floats in float32, small ints in
// int32. Every backend follows it, so they agree on rounding and overflow.
enum class ComputeKind : uint8_t { kF32, kI32, kI64, kBool };
ComputeKind compute_kind(DType dtype);

// The operands an instruction reads, and what its result is:
//   kLoad: a = fused input index   kConst: imm   kIota: a = domain axis   (no operands)
//   kUnary: a                      kBinary: a, b (one dtype, the result's)
//   kCompare: a, b -> bool         kSelect: a (bool) ? b : c   kConvert: a -> `dtype`
//   kReduce: a, over the domain axes [reduce_from, rank); the result is per row
enum class EwForm : uint8_t { kLoad, kConst, kIota, kUnary, kBinary, kCompare, kSelect, kConvert, kReduce };
enum class ReduceKind : uint8_t { kNone, kSum, kProd, kMax, kMin };
// The Trace op's dtype rule (trace/op_def.h turns it into a DTypeSet).
enum class ApiDTypes : uint8_t { kNone, kFloats, kNumbers, kBool, kAny };

// Bits of the compute kinds an op is defined on (of its operands; of the result for the forms
// without operands; of the branches for kSelect).
namespace ew_kinds {
inline constexpr uint8_t F = 1, I = 2, B = 4, FI = F | I, IB = I | B, FIB = F | I | B;
}  // namespace ew_kinds
constexpr uint8_t kind_bit(ComputeKind k) {
  return k == ComputeKind::kF32 ? ew_kinds::F : k == ComputeKind::kBool ? ew_kinds::B : ew_kinds::I;
}

struct EwOpInfo {
  EwOp op;
  const char* name;  // the file format's and FlatIR text's spelling
  EwForm form;
  uint8_t kinds;     // ew_kinds bits
  bool commutative;
  ReduceKind reduce;
  const char* api;      // Trace op name, or nullptr
  const char* display;  // how errors name the Trace op
  ApiDTypes api_dtypes;
};

inline constexpr EwOpInfo kEwOps[] = {
#define TRIPY_EW_OP(Enum, name, form, kinds, comm, reduce, api, display, api_dtypes)                          \
  {EwOp::k##Enum, name,       EwForm::k##form, ew_kinds::kinds, comm, ReduceKind::k##reduce, api, display, \
   ApiDTypes::k##api_dtypes},
#include "runtime/ew_ops.def"
#undef TRIPY_EW_OP
};
static_assert(sizeof(kEwOps) / sizeof(kEwOps[0]) == kNumEwOps);

constexpr bool ew_valid(EwOp op) { return static_cast<size_t>(op) < kNumEwOps; }
// The row of a valid op (callers check ew_valid on untrusted input first).
constexpr const EwOpInfo& ew_info(EwOp op) { return kEwOps[static_cast<size_t>(op)]; }
// "add", ...; "invalid" past the end.
constexpr const char* ew_op_name(EwOp op) { return ew_valid(op) ? ew_info(op).name : "invalid"; }
constexpr EwForm ew_form(EwOp op) { return ew_info(op).form; }
constexpr bool is_reduction(EwOp op) { return ew_valid(op) && ew_info(op).form == EwForm::kReduce; }
// How many registers an instruction reads: a, then b, then c (unused ones are -1).
constexpr int ew_num_operands(EwOp op) {
  switch (ew_form(op)) {
    case EwForm::kLoad: case EwForm::kConst: case EwForm::kIota: return 0;
    case EwForm::kUnary: case EwForm::kConvert: case EwForm::kReduce: return 1;
    case EwForm::kBinary: case EwForm::kCompare: return 2;
    case EwForm::kSelect: return 3;
  }
  return 0;
}
// Whether the op is defined on operands of compute kind `k` (see ew_kinds).
constexpr bool ew_defined_on(EwOp op, ComputeKind k) { return (ew_info(op).kinds & kind_bit(k)) != 0; }

// The rows are in enum order, so ew_info(op).op == op.
constexpr bool ew_rows_in_order() {
  for (size_t i = 0; i < kNumEwOps; ++i)
    if (static_cast<size_t>(kEwOps[i].op) != i) return false;
  return true;
}
static_assert(ew_rows_in_order());

// An integer register's value from an immediate (Instr::imm, a double): saturated at T's bounds,
// NaN as 0. A loaded file's immediate may be anything, and int64's largest value has no double
// (it reads back as 2**63), so a plain conversion would be undefined; both backends use this.
template <class T>
T saturated_immediate(double v) {
  if (!(v == v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace tripy::rt

// Names used by the FlatIR text form: dtype short names and op names (kinds, or the fn of
// elementwise and reduce ops, spelled as rt::ew_op_name spells them).
#include "flat/ir_text.h"

#include <array>

namespace tripy::flat {
namespace {

constexpr std::array<const char*, kNumDTypes> kShortNames = {"f32", "f16", "bf16", "f8", "i4",
                                                              "i8",  "i32", "i64",  "i1"};

// EwOps that are not elementwise FlatIR fns (they exist only inside fused kernels).
bool is_kernel_only(EwOp fn) {
  const rt::EwForm form = rt::ew_form(fn);
  return form == rt::EwForm::kLoad || form == rt::EwForm::kConst || form == rt::EwForm::kIota;
}

}  // namespace

const char* dtype_short_name(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kShortNames.size() ? kShortNames[i] : "?";
}

std::optional<DType> dtype_from_short_name(std::string_view name) {
  for (size_t i = 0; i < kShortNames.size(); ++i) {
    if (name == kShortNames[i]) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::string op_text_name(const Op& op) {
  if (op.kind == OpKind::kElementwise || op.kind == OpKind::kReduce) return rt::ew_op_name(op.fn);
  if (op.kind == OpKind::kKernel) return rt::kernel_kind_name(op.kernel.kind);
  return op_kind_name(op.kind);
}

bool op_from_text_name(std::string_view name, Op& op) {
  // Every kind with a name (the name table ends where op_kind_name says "invalid").
  for (int k = 0; std::string_view(op_kind_name(static_cast<OpKind>(k))) != "invalid"; ++k) {
    auto kind = static_cast<OpKind>(k);
    if (kind == OpKind::kElementwise || kind == OpKind::kReduce || kind == OpKind::kKernel) continue;
    if (name == op_kind_name(kind)) {
      op.kind = kind;
      return true;
    }
  }
  for (int f = 0; f < static_cast<int>(EwOp::kNumOps); ++f) {
    auto fn = static_cast<EwOp>(f);
    if (is_kernel_only(fn) || name != rt::ew_op_name(fn)) continue;
    op.kind = rt::is_reduction(fn) ? OpKind::kReduce : OpKind::kElementwise;
    op.fn = fn;
    return true;
  }
  // A kernel kind that no FlatIR op shares a name with is a kernel op of that kind.
  for (size_t k = 0; k < rt::kNumKernelKinds; ++k) {
    if (name != rt::kKernelKindNames[k]) continue;
    op.kind = OpKind::kKernel;
    op.kernel.kind = static_cast<rt::KernelKind>(k);
    return true;
  }
  return false;
}

}  // namespace tripy::flat

// analyze_fused_program: the checks and per-register facts shared by validate_program, the CPU
// fused planner and the CUDA code generator. What each op accepts comes from the primitive table
// (ew_ops.def): its form says which operands it reads and how their dtypes relate, its kinds which
// compute kinds it is defined on.
#include "runtime/fused_analysis.h"

#include <algorithm>

namespace tripy::rt {
namespace {

bool in_range(int64_t i, size_t n) { return i >= 0 && static_cast<uint64_t>(i) < n; }
bool valid(DType t) { return static_cast<int>(t) < kNumDTypes; }
std::string str(DType t) { return valid(t) ? std::string(dtype_name(t)) : "<invalid dtype>"; }

// Where a register's value varies: kEither (constants: usable per row or per element), kRow,
// kElement.
enum Level : uint8_t { kEither, kRow, kElement };

class Analyzer {
 public:
  Analyzer(const Program& p, const Kernel& k) : p_(p), k_(k), f_(k.fused) {}

  StatusOr<FusedAnalysis> run() {
    TRIPY_RETURN_IF_ERROR(check_interface());
    const size_t n = f_.instrs.size();
    an_.kind.resize(n);
    an_.operand_kind.resize(n);
    an_.row_level.assign(n, 0);
    an_.phase.assign(n, 0);
    level_.assign(n, kEither);
    for (size_t i = 0; i < n; ++i) TRIPY_RETURN_IF_ERROR(check_instr(static_cast<int32_t>(i)));
    const size_t rank = f_.domain.size();
    if (an_.has_reduction && static_cast<size_t>(f_.reduce_from) == rank)
      return bad("has a reduction but reduce_from == rank: a reduction needs reduce_from < rank");
    if (!an_.has_reduction && static_cast<size_t>(f_.reduce_from) != rank)
      return bad("has reduce_from < rank but no reduction");
    TRIPY_RETURN_IF_ERROR(check_outputs());
    return std::move(an_);
  }

 private:
  static Status bad(const std::string& what) { return invalid_argument(what); }
  size_t rank_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].shape.size(); }
  DType dtype_of(int32_t buffer) const { return p_.buffers[static_cast<size_t>(buffer)].dtype; }

  // Domain, inputs, windows and outputs: everything but the instructions. (Whether their slots
  // exist is the validator's question: backends are handed the slot values.)
  Status check_interface() {
    const size_t rank = f_.domain.size();
    if (f_.reduce_from < 0 || static_cast<size_t>(f_.reduce_from) > rank) return bad("has reduce_from out of range");
    for (int32_t b : k_.inputs)
      if (!in_range(b, p_.buffers.size())) return bad("reads missing buffer " + std::to_string(b));
    for (int32_t b : k_.outputs)
      if (!in_range(b, p_.buffers.size())) return bad("writes missing buffer " + std::to_string(b));
    if (f_.input_axes.size() != k_.inputs.size()) return bad("has input_axes for a different number of inputs");
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      an_.input_dtype.push_back(dtype_of(k_.inputs[i]));
      if (f_.input_axes[i].size() != rank_of(k_.inputs[i])) return bad("maps input " + std::to_string(i) + " with the wrong rank");
      for (int32_t axis : f_.input_axes[i])
        if (!in_range(axis, rank)) return bad("maps input " + std::to_string(i) + " to missing axis " + std::to_string(axis));
    }
    if (!f_.input_windows.empty() && f_.input_windows.size() != k_.inputs.size())
      return bad("has input_windows for a different number of inputs");
    for (size_t i = 0; i < f_.input_windows.size(); ++i) {
      const FusedProgram::Window& w = f_.input_windows[i];
      if (w.starts.empty() && w.sizes.empty()) continue;
      if (w.starts.size() != rank_of(k_.inputs[i]) || w.sizes.size() != w.starts.size())
        return bad("has a window of input " + std::to_string(i) + " with the wrong rank");
    }
    if (f_.output_regs.size() != k_.outputs.size() || k_.outputs.empty()) return bad("needs one register per output");
    return ok_status();
  }

  // Registers are SSA: each instruction reads only earlier ones, with the dtypes its form needs,
  // of a kind its row allows.
  Status check_instr(int32_t i) {
    const Instr& in = f_.instrs[static_cast<size_t>(i)];
    if (!ew_valid(in.op)) return bad("instruction " + std::to_string(i) + " has an invalid opcode");
    const std::string at = "instruction " + std::to_string(i) + " (" + ew_op_name(in.op) + ")";
    if (!valid(in.dtype)) return bad(at + " has an invalid dtype");
    const int used = ew_num_operands(in.op);
    const int32_t operands[3] = {in.a, in.b, in.c};
    for (int j = 0; j < 3; ++j) {
      if (j < used && !in_range(operands[j], static_cast<size_t>(i)))
        return bad(at + " reads register " + std::to_string(operands[j]) + ", which is not an earlier one");
      // Operand fields the form does not use must be -1, so no backend can trip over them.
      if (j >= used && operands[j] != -1 && !(j == 0 && takes_index(in.op)))
        return bad(at + " sets operands it does not use (they must be -1)");
    }
    auto dt = [&](int32_t r) { return f_.instrs[static_cast<size_t>(r)].dtype; };
    const size_t u = static_cast<size_t>(i);
    an_.kind[u] = compute_kind(in.dtype);
    // What the op's kinds constrain: its operands (kSelect: the branches), or its result.
    const DType operand_dtype = used == 0 ? in.dtype : dt(ew_form(in.op) == EwForm::kSelect ? in.b : in.a);
    an_.operand_kind[u] = compute_kind(operand_dtype);
    Level level = kEither;
    switch (ew_form(in.op)) {
      case EwForm::kLoad:
        if (!in_range(in.a, k_.inputs.size())) return bad(at + " loads missing input " + std::to_string(in.a));
        if (an_.input_dtype[static_cast<size_t>(in.a)] != in.dtype)
          return bad(at + " loads a " + str(in.dtype) + " register from a " +
                     str(an_.input_dtype[static_cast<size_t>(in.a)]) + " input");
        level = kElement;
        break;
      case EwForm::kConst: break;
      case EwForm::kIota:
        if (!in_range(in.a, f_.domain.size())) return bad(at + " counts along missing axis " + std::to_string(in.a));
        an_.has_iota = true;
        level = kElement;
        break;
      case EwForm::kUnary:
      case EwForm::kReduce:
        if (dt(in.a) != in.dtype)
          return bad(at + " gives a " + str(in.dtype) + " result from a " + str(dt(in.a)) + " operand");
        break;
      case EwForm::kBinary:
      case EwForm::kCompare: {
        if (dt(in.a) != dt(in.b))
          return bad(at + " reads operands of different dtypes: " + str(dt(in.a)) + " and " + str(dt(in.b)));
        const DType want = ew_form(in.op) == EwForm::kCompare ? DType::kBool : dt(in.a);
        if (in.dtype != want) return bad(at + " gives a " + str(in.dtype) + " result, not " + str(want));
        break;
      }
      case EwForm::kSelect:
        if (dt(in.a) != DType::kBool || dt(in.b) != in.dtype || dt(in.c) != in.dtype)
          return bad(at + " needs a bool condition and two operands of the result's dtype");
        break;
      case EwForm::kConvert: break;
    }
    if (!ew_defined_on(in.op, an_.operand_kind[u]))
      return bad(at + " is not defined on " + str(operand_dtype) + (used == 0 ? " values" : " operands"));
    if (ew_form(in.op) == EwForm::kReduce) {
      an_.has_reduction = true;
      level = kRow;
      an_.phase[u] = an_.phase[static_cast<size_t>(in.a)] + 1;
      an_.num_phases = std::max(an_.num_phases, an_.phase[u]);
    } else {
      for (int j = 0; j < used; ++j) {
        level = std::max(level, level_[static_cast<size_t>(operands[j])]);
        an_.phase[u] = std::max(an_.phase[u], an_.phase[static_cast<size_t>(operands[j])]);
      }
    }
    level_[u] = level;
    an_.row_level[u] = level != kElement;
    return ok_status();
  }

  // kLoad and kIota keep an index (not a register) in `a`.
  static bool takes_index(EwOp op) { return ew_form(op) == EwForm::kLoad || ew_form(op) == EwForm::kIota; }

  Status check_outputs() {
    const size_t rank = f_.domain.size();
    for (size_t o = 0; o < f_.output_regs.size(); ++o) {
      const int32_t r = f_.output_regs[o];
      if (!in_range(r, f_.instrs.size())) return bad("stores missing register " + std::to_string(r));
      const size_t out_rank = rank_of(k_.outputs[o]);
      const Level lvl = level_[static_cast<size_t>(r)];
      const bool row = an_.has_reduction && out_rank == static_cast<size_t>(f_.reduce_from);
      const bool rank_ok = lvl == kElement ? out_rank == rank : lvl == kRow ? row : row || out_rank == rank;
      if (!rank_ok)
        return bad("stores register " + std::to_string(r) + " into output " + std::to_string(o) + " of the wrong rank");
      const DType dt = f_.instrs[static_cast<size_t>(r)].dtype;
      if (dt != dtype_of(k_.outputs[o]))
        return bad("stores a " + str(dt) + " register into a " + str(dtype_of(k_.outputs[o])) + " buffer");
      an_.output_row_level.push_back(row);
    }
    return ok_status();
  }

  const Program& p_;
  const Kernel& k_;
  const FusedProgram& f_;
  FusedAnalysis an_;
  std::vector<Level> level_;
};

}  // namespace

StatusOr<FusedAnalysis> analyze_fused_program(const Program& p, const Kernel& k) { return Analyzer(p, k).run(); }

}  // namespace tripy::rt

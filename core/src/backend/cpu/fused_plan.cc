// Builds a FusedPlan at load time, rejecting malformed or unsupported instructions with a Status
// that names the kernel (a loaded file must never make the interpreter misbehave).
#include <algorithm>

#include "backend/cpu/fused_plan.h"

namespace tripy::cpu {
namespace {

using rt::EwOp;

// Linear-scan slot allocation within one pass; a result never shares a slot with its operands.
int32_t allocate_slots(const rt::FusedProgram& f, FusedPass& pass,
                       const std::vector<int32_t>& live_out, int32_t first_slot) {
  std::vector<int32_t>& slot = pass.slot;
  const int32_t n = static_cast<int32_t>(f.instrs.size());
  std::vector<int32_t> last_use(n, -1);
  std::vector<uint8_t> in_pass(n, 0);
  for (int32_t r : pass.instrs) in_pass[r] = 1;
  for (size_t p = 0; p < pass.instrs.size(); ++p) {
    const rt::Instr& in = f.instrs[pass.instrs[p]];
    if (rt::ew_num_operands(in.op) == 0) continue;
    for (int32_t o : {in.a, in.b, in.c})
      if (o >= 0 && in_pass[o]) last_use[o] = static_cast<int32_t>(p);
  }
  for (int32_t r : live_out)
    if (r >= 0 && in_pass[r]) last_use[r] = static_cast<int32_t>(pass.instrs.size());
  std::vector<int32_t> free_slots;
  int32_t used = 0;
  for (size_t p = 0; p < pass.instrs.size(); ++p) {
    int32_t r = pass.instrs[p];
    if (free_slots.empty()) {
      slot[r] = first_slot + used++;
    } else {
      slot[r] = free_slots.back();
      free_slots.pop_back();
    }
    const rt::Instr& in = f.instrs[r];
    if (rt::ew_num_operands(in.op) > 0)
      for (int32_t o : {in.a, in.b, in.c})
        if (o >= 0 && in_pass[o] && last_use[o] == static_cast<int32_t>(p)) {
          free_slots.push_back(slot[o]);
          last_use[o] = -2;  // freed once even if used twice by this instruction
        }
    if (last_use[r] == -1) free_slots.push_back(slot[r]);  // dead result
  }
  return used;
}

}  // namespace

StatusOr<std::unique_ptr<KernelState>> prepare_fused(const rt::Program& program,
                                                     const rt::Kernel& kernel, SourceRef where) {
  auto plan = std::make_unique<FusedPlan>();
  const rt::FusedProgram& f = kernel.fused;
  auto fail = [&](int32_t r, const std::string& msg) {
    return kernel_error(kernel, where,
                        (r >= 0 ? "instruction %" + std::to_string(r) + " (" +
                                      rt::ew_op_name(f.instrs[r].op) + "): "
                                : std::string()) + msg,
                        StatusCode::kInternal);
  };
  const int32_t n = static_cast<int32_t>(f.instrs.size());
  plan->fused = &f;
  plan->rank = static_cast<int32_t>(f.domain.size());
  plan->num_inputs = static_cast<int32_t>(kernel.inputs.size());
  if (f.reduce_from < 0 || f.reduce_from > plan->rank) return fail(-1, "reduce_from out of range");
  if (f.input_axes.size() != kernel.inputs.size())
    return fail(-1, "input_axes has " + std::to_string(f.input_axes.size()) + " entries for " +
                        std::to_string(kernel.inputs.size()) + " inputs");
  for (const auto& axes : f.input_axes)
    for (int32_t ax : axes)
      if (ax < 0 || ax >= plan->rank) return fail(-1, "input axis out of the domain");
  if (f.output_regs.size() != kernel.outputs.size())
    return fail(-1, "output_regs does not match the kernel's outputs");

  plan->kind.resize(n);
  plan->operand_kind.resize(n);
  plan->row_level.assign(n, 0);
  plan->stream_of.assign(n, -1);
  for (int32_t r = 0; r < n; ++r) {
    const rt::Instr& in = f.instrs[r];
    if (in.op >= EwOp::kNumOps) return fail(-1, "unknown op at instruction " + std::to_string(r));
    plan->kind[r] = compute_kind(in.dtype);
    const int ops = rt::ew_num_operands(in.op);
    for (int k = 0; k < ops; ++k) {
      int32_t o = k == 0 ? in.a : k == 1 ? in.b : in.c;
      if (o < 0 || o >= r) return fail(r, "operand does not refer to an earlier register");
    }
    CKind ok = plan->kind[r];
    if (ops > 0) ok = plan->kind[in.op == EwOp::kSelect ? in.b : in.a];
    plan->operand_kind[r] = ok;
    if (in.op == EwOp::kSelect &&
        (plan->kind[in.a] != CKind::kBool || plan->kind[in.c] != ok || plan->kind[r] != ok))
      return fail(r, "kSelect needs a bool condition and two operands of the result's type");
    if (ops == 2 && plan->kind[in.b] != ok) return fail(r, "operands have different types");
    bool compare = in.op >= EwOp::kEq && in.op <= EwOp::kGe;
    if (compare && plan->kind[r] != CKind::kBool) return fail(r, "a comparison gives bool");
    if (!compare && in.op != EwOp::kConvert && ops > 0 && in.op != EwOp::kSelect &&
        !rt::is_reduction(in.op) && plan->kind[r] != ok)
      return fail(r, "result type differs from the operands'");
    if (rt::is_reduction(in.op) && (ok == CKind::kF32) != (plan->kind[r] == CKind::kF32))
      return fail(r, "a reduction cannot change between float and integer");
    std::string why = check_op(in, ok);
    if (!why.empty()) return fail(r, why);
    if (in.op == EwOp::kLoad) {
      if (in.a < 0 || in.a >= plan->num_inputs) return fail(r, "loads a missing input");
      plan->stream_of[r] = in.a;
    }
    if (in.op == EwOp::kIota) {
      if (in.a < 0 || in.a >= plan->rank) return fail(r, "iota axis out of the domain");
      auto it = std::find(plan->iota_axes.begin(), plan->iota_axes.end(), in.a);
      plan->stream_of[r] = plan->num_inputs + static_cast<int32_t>(it - plan->iota_axes.begin());
      if (it == plan->iota_axes.end()) plan->iota_axes.push_back(static_cast<int32_t>(in.a));
    }
    if (rt::is_reduction(in.op)) {
      plan->has_reduction = true;
      plan->row_level[r] = 1;
    } else if (in.op == EwOp::kConst) {
      plan->row_level[r] = 1;
    } else if (ops > 0) {
      bool all_row = true;
      for (int k = 0; k < ops; ++k) all_row &= plan->row_level[k == 0 ? in.a : k == 1 ? in.b : in.c] != 0;
      plan->row_level[r] = all_row;
    }
  }
  if (plan->has_reduction && f.reduce_from == plan->rank)
    return fail(-1, "a reduction needs reduce_from < rank");

  // Outputs: row-level when the buffer has the row shape.
  for (size_t o = 0; o < f.output_regs.size(); ++o) {
    int32_t r = f.output_regs[o];
    if (r < 0 || r >= n) return fail(-1, "output register out of range");
    const rt::BufferDesc& buf = program.buffers[kernel.outputs[o]];
    bool row = plan->has_reduction && static_cast<int32_t>(buf.shape.size()) == f.reduce_from;
    if (row && !plan->row_level[r]) return fail(r, "a per-row output needs a per-row register");
    if (compute_kind(buf.dtype) != plan->kind[r] || buf.dtype != f.instrs[r].dtype)
      return fail(r, "output buffer dtype differs from the register's");
    plan->outputs.push_back({r, row});
  }

  // Passes and slots. Row-level registers read by element code get fixed slots first.
  std::vector<uint8_t> needs_splat(n, 0);
  plan->row_slot.assign(n, -1);
  auto mark_row_use = [&](int32_t o) {
    if (o >= 0 && plan->row_level[o]) needs_splat[o] = 1;
  };
  for (int32_t r = 0; r < n; ++r) {
    const rt::Instr& in = f.instrs[r];
    if (rt::is_reduction(in.op)) mark_row_use(in.a);
    else if (!plan->row_level[r] && rt::ew_num_operands(in.op) > 0)
      for (int32_t o : {in.a, in.b, in.c}) mark_row_use(o);
  }
  for (const FusedOutput& o : plan->outputs)
    if (!o.row_level) mark_row_use(o.reg);
  int32_t row_slots = 0;
  for (int32_t r = 0; r < n; ++r)
    if (needs_splat[r]) plan->row_slot[r] = row_slots++;

  plan->pass_of.assign(n, -1);
  int32_t max_pass = 0;
  int64_t cost = 0;
  for (int32_t r = 0; r <= n; ++r) {
    bool final_pass = r == n;
    if (!final_pass && !rt::is_reduction(f.instrs[r].op)) continue;
    std::vector<int32_t> roots;
    if (final_pass) {
      for (const FusedOutput& o : plan->outputs)
        if (!o.row_level) roots.push_back(o.reg);
    } else {
      roots.push_back(f.instrs[r].a);
      plan->pass_of[r] = static_cast<int32_t>(plan->passes.size());
    }
    FusedPass pass;
    pass.instrs = rt::element_closure(f, plan->row_level, roots);
    pass.slot = plan->row_slot;
    pass.num_slots = allocate_slots(f, pass, roots, row_slots);
    max_pass = std::max(max_pass, pass.num_slots);
    cost += static_cast<int64_t>(pass.instrs.size()) + 1;
    plan->passes.push_back(std::move(pass));
  }
  plan->num_slots = row_slots + max_pass;
  plan->cost_per_element = std::max<int64_t>(1, cost);
  return std::unique_ptr<KernelState>(std::move(plan));
}

}  // namespace tripy::cpu

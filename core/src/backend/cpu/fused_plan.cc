// Builds a FusedPlan at load time: the shared analysis (runtime/fused_analysis.h) rejects malformed
// or unsupported instructions with a Status that names the kernel; this adds the interpreter's own
// plan (streams, passes over rows, tile slots).
#include <algorithm>

#include "backend/cpu/fused_plan.h"
#include "runtime/fused_analysis.h"

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
  // The checks and per-register facts every consumer of fused programs shares.
  StatusOr<rt::FusedAnalysis> analysed = rt::analyze_fused_program(program, kernel);
  if (!analysed.ok()) return kernel_error(kernel, where, analysed.status().message(), StatusCode::kInternal);
  rt::FusedAnalysis& an = analysed.value();
  const int32_t n = static_cast<int32_t>(f.instrs.size());
  plan->fused = &f;
  plan->rank = static_cast<int32_t>(f.domain.size());
  plan->num_inputs = static_cast<int32_t>(kernel.inputs.size());
  plan->has_reduction = an.has_reduction;
  plan->kind = std::move(an.kind);
  plan->operand_kind = std::move(an.operand_kind);
  plan->row_level = std::move(an.row_level);
  plan->stream_of.assign(n, -1);
  for (int32_t r = 0; r < n; ++r) {
    const rt::Instr& in = f.instrs[r];
    if (in.op == EwOp::kLoad) plan->stream_of[r] = in.a;
    if (in.op == EwOp::kIota) {
      auto it = std::find(plan->iota_axes.begin(), plan->iota_axes.end(), in.a);
      plan->stream_of[r] = plan->num_inputs + static_cast<int32_t>(it - plan->iota_axes.begin());
      if (it == plan->iota_axes.end()) plan->iota_axes.push_back(static_cast<int32_t>(in.a));
    }
  }
  for (size_t o = 0; o < f.output_regs.size(); ++o)
    plan->outputs.push_back({f.output_regs[o], an.output_row_level[o] != 0});

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

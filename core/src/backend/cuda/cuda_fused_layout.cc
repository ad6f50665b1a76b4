// A fused kernel's argument layout (cuda_codegen.h), from the analysis the CPU backend shares
// (runtime/fused_analysis.h): load() fills the words of the kernel the compiler side generated
// (codegen/cuda_codegen_fused.cc) by it.
#include <algorithm>

#include "backend/cuda/cuda_codegen.h"
#include "runtime/fused_analysis.h"

namespace tripy::rt::cuda {
namespace {

// The shared per-register facts (runtime/fused_analysis.h) plus the launch layout.
struct Analysis : FusedAnalysis {
  FusedLayout layout;
};

StatusOr<Analysis> analyze(const Program& p, const Kernel& k) {
  auto fail = [&](const std::string& msg) { return Status(StatusCode::kInternal, "kernel '" + k.name + "': " + msg); };
  StatusOr<FusedAnalysis> shared = analyze_fused_program(p, k);
  if (!shared.ok()) return fail(shared.status().message());
  Analysis an;
  static_cast<FusedAnalysis&>(an) = std::move(shared.value());
  const FusedProgram& f = k.fused;
  FusedLayout& L = an.layout;
  L.num_inputs = static_cast<int32_t>(k.inputs.size());
  L.num_outputs = static_cast<int32_t>(k.outputs.size());
  L.rank = static_cast<int32_t>(f.domain.size());
  L.reduce_from = f.reduce_from;
  L.has_reduction = an.has_reduction;
  L.has_iota = an.has_iota;
  L.output_row_level = an.output_row_level;
  if (L.rank > 8) return fail("the CUDA backend supports fused domains of rank <= 8");
  int max_size = 1;
  for (DType t : an.input_dtype) max_size = std::max(max_size, dtype_size(t));
  for (int32_t b : k.outputs) max_size = std::max(max_size, dtype_size(p.buffers[b].dtype));
  if (!L.has_iota) L.vec_width = std::min(8, 16 / max_size);
  return an;
}

}  // namespace

StatusOr<FusedLayout> analyze_fused(const Program& program, const Kernel& kernel) {
  TRIPY_ASSIGN_OR_RETURN(Analysis an, analyze(program, kernel));
  return an.layout;
}

}  // namespace tripy::rt::cuda

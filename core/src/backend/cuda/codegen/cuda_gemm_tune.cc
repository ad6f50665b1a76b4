// GEMM tactic timing at build time: cuBLASLt's top candidates (and the row-phase plans where
// output rows are unaligned) timed on scratch operands; the runtime replays the stored choice.
#include <algorithm>

#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/cuda_gemm.h"

namespace tripy::rt::cuda {

StatusOr<AlgoBytes> tune_dot(const DotProblem& pr, const TuningKernels& kernels, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(std::vector<AlgoBytes> cands, DotPlan::candidates(pr, kDotWorkspaceBytes, 8));
  // Unaligned output rows: the row-phase plans compete with the direct ones (tagged 'P').
  const size_t direct = cands.size();
  if (!row_phase_calls(pr).empty()) {
    auto phases = DotPlan::phase_candidates(pr, kDotWorkspaceBytes, 4);
    if (phases.ok())
      for (AlgoBytes& a : phases.value()) {
        a.push_back('P');
        cands.push_back(std::move(a));
      }
  }
  if (cands.size() == 1) return cands[0];
  const int64_t es = dtype_size(pr.dtype);
  // Operand extents: the last call's offsets plus one strided batch.
  auto extent = [&](const std::vector<int64_t>& offs, int64_t stride, int64_t mat) {
    int64_t mx = 0;
    for (int64_t o : offs) mx = std::max(mx, o);
    return mx + stride * (pr.batch - 1) + mat;
  };
  const int64_t na = extent(pr.offset_a, pr.stride_a, pr.m * pr.k), nb = extent(pr.offset_b, pr.stride_b, pr.k * pr.n);
  const int64_t nc = extent(pr.offset_c, pr.stride_c, pr.m * pr.n);
  std::vector<Tensor> keep;
  TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> ptrs,
                         tuning_scratch(pr.dtype, {na, nb, nc, pr.m, int64_t(kDotWorkspaceBytes) / es}, kernels.fill,
                                        stream, keep));
  CallTimer timer(kernels.spin);
  float best = 1e30f;
  size_t best_i = 0;
  // Enough repetitions to pass ~2 ms per candidate, within 3..50.
  const double flops = 2.0 * pr.m * pr.n * pr.k * pr.batch * pr.offset_a.size();
  const int reps = static_cast<int>(std::clamp(2e-3 / std::max(flops / 4e14, 1e-6), 3.0, 50.0));
  for (size_t i = 0; i < cands.size(); ++i) {
    auto plan_or = DotPlan::create(pr, &cands[i], 256, kDotWorkspaceBytes);
    if (!plan_or.ok()) continue;
    const DotPlan& plan = *plan_or.value();
    if (i >= direct && !plan.row_phases()) continue;  // the phases did not apply after all
    auto run = [&] { return plan.run(ptrs[0], ptrs[1], ptrs[3], ptrs[2], ptrs[4], kDotWorkspaceBytes, stream); };
    if (!run().ok()) continue;  // this candidate does not run here: skip it
    TRIPY_ASSIGN_OR_RETURN(float ms, timer.time(run, reps, stream));
    if (ms < best) {
      best = ms;
      best_i = i;
    }
  }
  return cands[best_i];
}

}  // namespace tripy::rt::cuda

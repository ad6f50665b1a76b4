// GEMM tactic timing at build time: cuBLASLt's top candidates (and the row-phase plans where
// output rows are unaligned), and our GEMV kernel's tactics for few-row products, timed on scratch
// operands, each call behind a short kernel it may overlap as in a step (launch_lead; the GEMV's
// early reads of a constant weight overlap it, cuBLASLt's kernels wait for it); the runtime
// replays the stored choice.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_gemv.h"

namespace tripy::rt::cuda {
namespace {

// More than the L2 of the GPUs we tune on (50 MB on an H100, 60 MB on an H200).
constexpr int64_t kL2FlushBytes = int64_t{192} << 20;

// TRIPY_GEMV: 1 forces the GEMV where it applies, "tma" its TMA form where that applies (tests of
// one path), "notma" leaves the TMA form out (A/B timings), 0 forbids it, unset lets the timing
// decide.
int gemv_override() {
  const char* v = std::getenv("TRIPY_GEMV");
  if (!v) return -1;
  if (std::strcmp(v, "notma") == 0) return 3;
  return std::strcmp(v, "1") == 0 ? 1 : std::strcmp(v, "tma") == 0 ? 2 : std::strcmp(v, "0") == 0 ? 0 : -1;
}

}  // namespace

StatusOr<AlgoBytes> tune_dot(const DotProblem& pr, const TuningKernels& kernels, CUstream stream) {
  const int force = gemv_override();
  const bool gemv = !kernels.gemv.empty() && force != 0 && gemv_applies(pr);
  std::vector<AlgoBytes> cands;
  if (!(gemv && (force == 1 || force == 2))) {
    TRIPY_ASSIGN_OR_RETURN(cands, DotPlan::candidates(pr, kDotWorkspaceBytes, 8));
  }
  // Unaligned output rows: the row-phase plans compete with the direct ones (tagged 'P').
  const size_t direct = cands.size();
  if (!cands.empty() && !row_phase_calls(pr).empty()) {
    auto phases = DotPlan::phase_candidates(pr, kDotWorkspaceBytes, 4);
    if (phases.ok())
      for (AlgoBytes& a : phases.value()) {
        a.push_back('P');
        cands.push_back(std::move(a));
      }
  }
  const size_t library = cands.size();
  if (gemv) {
    const StatusOr<const DeviceInfo*> dev = device();
    std::vector<GemvTactic> tactics = gemv_tactics(pr, dev.ok() ? dev.value()->arch : 0);
    const bool any_tma = std::any_of(tactics.begin(), tactics.end(), [](GemvTactic t) { return t.tma; });
    if (force == 2 && any_tma)
      tactics.erase(std::remove_if(tactics.begin(), tactics.end(), [](GemvTactic t) { return !t.tma; }), tactics.end());
    if (force == 3)
      tactics.erase(std::remove_if(tactics.begin(), tactics.end(), [](GemvTactic t) { return t.tma; }), tactics.end());
    for (GemvTactic t : tactics) cands.push_back(gemv_choice_bytes(t));
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
  // Each call reads its own copy of the larger operand, enough copies to overflow the L2 together:
  // a decode step streams every weight from memory once, and a weight left in the L2 between
  // timed calls would favour the kernel that is fastest from the L2 instead. (A decode product's
  // weight is A: x @ W.T is C^T = W x^T to cuBLASLt, W's rows its m.)
  const bool rotate_a = na >= nb;
  std::vector<CUdeviceptr> copies_of{ptrs[rotate_a ? 0 : 1]};
  const int64_t rotated = rotate_a ? na : nb;
  const int64_t copies = std::clamp<int64_t>(kL2FlushBytes / std::max<int64_t>(rotated * es, 1), 1, 16);
  if (copies > 1) {
    TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> more,
                           tuning_scratch(pr.dtype, std::vector<int64_t>(copies - 1, rotated), kernels.fill, stream, keep));
    copies_of.insert(copies_of.end(), more.begin(), more.end());
  }
  // The operands of the next call: (a, b), one of them the next copy.
  size_t call = 0;
  auto next = [&] {
    const CUdeviceptr c = copies_of[call++ % copies_of.size()];
    return std::make_pair(rotate_a ? c : ptrs[0], rotate_a ? ptrs[1] : c);
  };
  CallTimer timer(kernels.spin);
  float best = 1e30f;
  size_t best_i = 0;
  // Enough repetitions to pass ~2 ms per candidate, within 3..50; a weight-bound product (few
  // rows) by its bytes instead of its flops.
  const double flops = 2.0 * pr.m * pr.n * pr.k * pr.batch * pr.offset_a.size();
  const double bytes = double(na) * dtype_size(pr.operand_dtype());
  const double seconds = std::max({flops / 4e14, bytes / 3e12, 1e-6});
  const int reps = static_cast<int>(std::clamp(2e-3 / seconds, 3.0, 50.0));
  for (size_t i = 0; i < cands.size(); ++i) {
    std::function<Status()> run;
    std::unique_ptr<DotPlan> plan;
    if (i >= library) {
      const GemvTactic t = *gemv_choice(cands[i]);
      CUfunction fn = nullptr;
      const std::string name = gemv_function_for(pr, t);
      for (CUmodule m : kernels.gemv)
        if (!fn && api().cuModuleGetFunction(&fn, m, name.c_str()) != CUDA_SUCCESS) fn = nullptr;
      if (!fn) continue;
      run = [&pr, t, fn, &ptrs, &next, &kernels, stream] {
        TRIPY_RETURN_IF_ERROR(launch_lead(kernels.lead, stream));
        const auto [w, x] = next();
        return run_gemv(pr, t, fn, ptrs[2], x, w, ptrs[3], stream);
      };
    } else {
      auto plan_or = DotPlan::create(pr, &cands[i], 256, kDotWorkspaceBytes);
      if (!plan_or.ok()) continue;
      plan = std::move(plan_or.value());
      if (i >= direct && !plan->row_phases()) continue;  // the phases did not apply after all
      const DotPlan* p = plan.get();
      run = [p, &ptrs, &next, &kernels, stream] {
        TRIPY_RETURN_IF_ERROR(launch_lead(kernels.lead, stream));
        const auto [a, b] = next();
        return p->run(a, b, ptrs[3], ptrs[2], ptrs[4], kDotWorkspaceBytes, stream);
      };
    }
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

// An all-reduce folded into the kernel that reads it. A row-parallel layer's all-reduce is followed
// by a fused row reduction (the residual add and the next RMSNorm); at a decode step's sizes that
// kernel is one block, and a second launch costs more than its work. Where the all-reduce's only
// reader is the next kernel, that kernel's module has a second entry point (<name>_fold) that first
// exchanges the ranks' inputs itself, with epoch words (kernels/one_shot_collective.cuh,
// fold_all_reduce), and writes the sum where the all-reduce would have. When a signature's launch
// of it is one block and the ranks' memory is mapped, the plan launches that entry point and the
// collective's own step only checks the communicator. The CPU runs both kernels as they are.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/cuda/cuda_kinds.h"

namespace tripy::rt::cuda {

struct FoldedAllReduce {
  int32_t collective = -1;  // the all-reduce's kernel (the one before)
  int input = -1;           // the fused kernel's input that reads its sum
};

// Whether fused kernel `kernel` of `p` may do the all-reduce before it: a row reduction right
// after an all-reduce of floats over several ranks, whose sum (a temp nothing else reads or
// aliases) it alone reads.
std::optional<FoldedAllReduce> folded_all_reduce(const Program& p, int32_t kernel);

// The fold's launch of fused kernel `k` (step.launches as planned), where this rank and these sizes
// allow it (see above); the collective's step is marked by the caller (cuda_program.cc).
StatusOr<std::optional<Launch>> plan_fold(PlanContext& c, const Kernel& k, const Step& step, CUfunction fold_fn);

}  // namespace tripy::rt::cuda

// kWeightOnlyDot on the GPU (the kernel: codegen/kernels/weight_only_dot.cuh): which entry point a
// kernel compiles (the tile of rows of x it holds in registers, from the most rows the program's
// ranges allow) and its launch at one signature's sizes.
#pragma once

#include <string>

#include "backend/cuda/cuda_kinds.h"

namespace tripy::rt::cuda {

// Rows of x an entry point holds (MT), and the weight rows a warp group sums for it (R): MT * R
// sums per lane at most 32.
inline constexpr int kWeightOnlyRowTiles[] = {1, 2, 4, 8, 16, 32};
inline constexpr int kWeightOnlyBlock = 256;  // threads (weight_only_dot.cuh's WO_BLOCK)
inline int weight_only_weight_rows(int row_tile) { return row_tile <= 2 ? 4 : row_tile <= 8 ? 2 : 1; }
// From this tile on, float16 and bfloat16 x run on tensor cores (kernels/weight_only_dot.cuh's
// WO_MMA_ROWS, wo_mma), 16 weight rows a warp group, where K and the group are multiples of the
// values a 16-byte piece holds (32 at 4 bits, 16 at 8) and the addresses 16-byte aligned.
inline constexpr int kWeightOnlyMmaRows = 8;
bool weight_only_mma_applies(DType t, int bits, int row_tile, int64_t K, int64_t group);
// The tile for kernel `k`: the smallest that holds the most rows its x may have (32 where more).
int weight_only_row_tile(const Program& p, const Kernel& k);
// tripy_weight_only_dot_<f32|f16|bf16>_b<bits>_m<MT>.
std::string weight_only_function(DType t, int bits, int row_tile);

// The kind table's plan (cuda_kinds.cc): one launch, none for an empty output.
StatusOr<bool> plan_weight_only_dot_step(PlanContext& c, const Kernel& k, Step& step);

}  // namespace tripy::rt::cuda

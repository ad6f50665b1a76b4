// Weight-only dot tactic timing at build time: the entry points of a kWeightOnlyDot's tiles
// (weight_only_tiles_to_time: its own, and the tensor-core tile at fewer rows) on scratch operands
// of its opt sizes; the builder keeps the winner's module.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda {
namespace {

constexpr int64_t kL2FlushBytes = int64_t{192} << 20;  // more than the L2 of the GPUs we tune on

// TRIPY_WEIGHT_ONLY_MMA: 1 takes the tensor-core tile where it is a candidate, 0 the kernel's own
// tile, unset lets the timing decide (tests of one path; the builder's tuning context records it).
int mma_override() {
  const char* v = std::getenv("TRIPY_WEIGHT_ONLY_MMA");
  return v && std::strcmp(v, "1") == 0 ? 1 : v && std::strcmp(v, "0") == 0 ? 0 : -1;
}

}  // namespace

AlgoBytes weight_only_choice_bytes(int row_tile) { return {'W', static_cast<uint8_t>(row_tile)}; }

int weight_only_choice(const AlgoBytes& stored) { return stored.size() == 2 && stored[0] == 'W' ? stored[1] : 0; }

StatusOr<AlgoBytes> tune_weight_only(const WeightOnlyProblem& pr, const std::vector<int>& tiles,
                                     const TuningKernels& kernels, CUstream stream) {
  const int force = mma_override();
  if (force >= 0) {
    const bool mma = force == 1 && std::find(tiles.begin(), tiles.end(), kWeightOnlyMmaRows) != tiles.end();
    return weight_only_choice_bytes(mma ? kWeightOnlyMmaRows : tiles.at(0));
  }
  if (tiles.size() == 1 || !kernels.entry) return weight_only_choice_bytes(tiles.at(0));
  const int64_t es = dtype_size(pr.dtype), w_bytes = pr.N * pr.row_bytes;
  const int64_t w_elements = (w_bytes + es - 1) / es;
  std::vector<Tensor> keep;
  // x, the output, the scales and zero points; then copies of the packed weight (its bytes are
  // the fill's values of x's dtype: any bytes are valid int8 or int4 values), enough to overflow
  // the L2 together, as a decode step streams every weight from memory.
  const int64_t copies = std::clamp<int64_t>((kL2FlushBytes + w_bytes - 1) / std::max<int64_t>(w_bytes, 1), 1, 64);
  std::vector<int64_t> sizes{pr.rows * pr.K, pr.rows * pr.N, pr.N * pr.groups, pr.N * pr.groups};
  sizes.insert(sizes.end(), copies, w_elements);
  TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> ptrs, tuning_scratch(pr.dtype, sizes, kernels.fill, stream, keep));
  const StatusOr<const DeviceInfo*> dev = device();
  const int sms = dev.ok() ? dev.value()->sm_count : 132;
  const double seconds = std::max(double(w_bytes) / 3e12, 1e-6);
  const int reps = static_cast<int>(std::clamp(2e-3 / seconds, 3.0, 50.0));
  CallTimer timer(kernels.spin);
  float best = 1e30f;
  int best_tile = tiles[0];
  for (int tile : tiles) {
    const CUfunction fn = kernels.entry(weight_only_function(pr.dtype, pr.bits, tile));
    if (!fn) continue;
    StatusOr<Launch> l = weight_only_launch(pr, tile, fn, sms);
    if (!l.ok()) continue;
    Launch& launch = l.value();
    launch.words[kWeightOnlyOutWord] = static_cast<int64_t>(ptrs[1]);
    launch.words[kWeightOnlyXWord] = static_cast<int64_t>(ptrs[0]);
    launch.words[kWeightOnlyScaleWord] = static_cast<int64_t>(ptrs[2]);
    launch.words[kWeightOnlyZeroWord] = pr.zero ? static_cast<int64_t>(ptrs[3]) : 0;
    launch.words[kWeightOnlyVecWord] = 1;  // fresh allocations: 256-byte aligned
    size_t call = 0;
    auto run = [&] {
      launch.words[kWeightOnlyWWord] = static_cast<int64_t>(ptrs[4 + call++ % copies]);
      void* params[] = {launch.words.data()};
      return TRIPY_CUDA(cuLaunchKernel(fn, launch.vector_grid, 1, 1, launch.block_x, 1, 1, 0, stream, params, nullptr));
    };
    if (!run().ok()) continue;  // this entry point does not run here: skip it
    TRIPY_ASSIGN_OR_RETURN(float ms, timer.time(run, reps, stream));
    if (ms < best) {
      best = ms;
      best_tile = tile;
    }
  }
  return weight_only_choice_bytes(best_tile);
}

}  // namespace tripy::rt::cuda

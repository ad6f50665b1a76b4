// Weight-only dot tactic timing at build time: the entry points of a kWeightOnlyDot's tiles
// (weight_only_tiles_to_time: its own, and the tensor-core tile of 8 rows), each with every
// split of a block's warps, on scratch operands of its opt sizes; the builder keeps the winner's
// module, and the split and the aligned form that ran (WeightOnlyForm) as the kernel's stored
// algorithm. Each call is timed as a decode step runs it (sm_90 and later): launched to overlap
// a short kernel before it (tripy_lead), its first weight reads before its wait where the weight
// is a constant. Timed alone, back to back, the forms that read more before the wait lose what
// they gain in the step (the 8B int4 down projection: faster alone on the one-row tile, 8.6 us a
// step's call on the register-fed tile against 15.2 on the one-row one).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>

#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda {
namespace {

constexpr int64_t kL2FlushBytes = int64_t{192} << 20;  // more than the L2 of the GPUs we tune on

// TRIPY_WEIGHT_ONLY_MMA: 1 takes the tensor-core tile of kWeightOnlyMmaRows rows where it is a
// candidate ("ring": with the ring alone in its aligned form; "frag": the register-fed tile alone,
// on the kernel's own tile of 16 rows where it has one; "row": the one-row tile alone where it
// applies, else as "frag"; "slice": the K-sliced one-row tile's shapes alone where they apply,
// else as "frag"; "few": the few-rows tile alone where it applies, else as "frag"; "fewslice":
// the few-rows tile's K-sliced shapes alone where they apply, else as "frag"), 0 the
// kernel's own tile, unset lets the timing decide (tests of one path; the builder's tuning context
// records it).
const char* mma_env() { return std::getenv("TRIPY_WEIGHT_ONLY_MMA"); }
bool env_is(const char* v) { return mma_env() && std::strcmp(mma_env(), v) == 0; }
bool env_form() { return env_is("frag") || env_is("row") || env_is("few") || env_is("slice") || env_is("fewslice"); }
int mma_override() { return env_is("1") || env_is("ring") || env_form() ? 1 : env_is("0") ? 0 : -1; }

}  // namespace

StatusOr<AlgoBytes> tune_weight_only(const WeightOnlyProblem& pr, const std::vector<int>& tiles,
                                     const TuningKernels& kernels, CUstream stream) {
  std::vector<int> tried = tiles;
  // A folded product has the K-sliced shapes of its tile alone: no form to force.
  const int force = pr.fold ? -1 : mma_override();
  if (force >= 0) {
    const bool mma = force == 1 && std::find(tiles.begin(), tiles.end(), kWeightOnlyMmaRows) != tiles.end();
    // The kernel's own tile where it holds the forced form (the register-fed tile, or the few-rows
    // tile of 8-bit weights, which have no register-fed tile).
    const bool own_frag = env_form() && (weight_only_frag_tile(pr.dtype, pr.bits, tiles.at(0)) ||
                                         ((env_is("few") || env_is("fewslice")) &&
                                          weight_only_few_rows_tile(pr.dtype, pr.bits, tiles.at(0))));
    tried = {mma && !own_frag ? kWeightOnlyMmaRows : tiles.at(0)};
  }
  if (!kernels.entry) return Status(StatusCode::kUnavailable, "no weight-only entry points to time");
  const int64_t es = dtype_size(pr.dtype), w_bytes = pr.N * pr.row_bytes;
  const int64_t w_elements = (w_bytes + es - 1) / es;
  std::vector<Tensor> keep;
  // x, the output, the scales and zero points, the few-rows tile's workspace; then copies of the
  // packed weight (its bytes are the fill's values of x's dtype: any bytes are valid int8 or int4
  // values), enough to overflow the L2 together, as a decode step streams every weight from memory.
  const int64_t copies = std::clamp<int64_t>((kL2FlushBytes + w_bytes - 1) / std::max<int64_t>(w_bytes, 1), 1, 64);
  const int64_t few_elements = (weight_only_few_rows_workspace(pr) + es - 1) / es;
  std::vector<int64_t> sizes{pr.rows * pr.K, pr.rows * pr.N, pr.N * pr.groups, pr.N * pr.groups, few_elements};
  sizes.insert(sizes.end(), copies, w_elements);
  TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> ptrs, tuning_scratch(pr.dtype, sizes, kernels.fill, stream, keep));
  const StatusOr<const DeviceInfo*> dev = device();
  const int sms = dev.ok() ? dev.value()->sm_count : 132;
  const double seconds = std::max(double(w_bytes) / 3e12, 1e-6);
  const int reps = static_cast<int>(std::clamp(2e-3 / seconds, 3.0, 50.0));
  CallTimer timer(kernels.spin);
  float best = 1e30f;
  std::optional<WeightOnlyChoice> chosen;
  // Each tile with each split of a block's 8 warps over a group of weight rows (a launch word:
  // timing one costs no compile); the tile of 8 rows with the ring's entry point, then (8 or 16
  // rows) with the register-fed int4 tile's where it applies, then (8 rows, x of one row) the
  // one-row tile's, then (16 rows) the few-rows tile's after its layout of x, then (8 rows, x of
  // one row) the K-sliced tile's shapes with each number of warps a block, then (16 rows) the
  // few-rows tile's K-sliced shapes.
  for (int tile : tried) {
    const CUfunction fn = kernels.entry(weight_only_function(pr.dtype, pr.bits, tile));
    if (!fn) continue;
    const bool mma = tile == kWeightOnlyMmaRows;
    const CUfunction ring = mma ? kernels.entry(weight_only_ring_function(pr.dtype, pr.bits)) : nullptr;
    const CUfunction frag = weight_only_frag_applies(pr.dtype, pr.bits, tile, pr.K, pr.group)
                                ? kernels.entry(weight_only_frag_function(pr.dtype, pr.bits, tile))
                                : nullptr;
    const CUfunction one_row = weight_only_one_row_applies(pr.dtype, pr.bits, tile, pr.rows, pr.K, pr.group)
                                   ? kernels.entry(weight_only_one_row_function(pr.dtype, pr.bits, pr.K))
                                   : nullptr;
    const bool few_applies = weight_only_few_rows_applies(pr.dtype, pr.bits, tile, pr.K, pr.group) && pr.rows <= tile;
    const CUfunction few = few_applies ? kernels.entry(weight_only_few_rows_function(pr.dtype, pr.bits, false)) : nullptr;
    const CUfunction few_x = few ? kernels.entry(weight_only_few_rows_function(pr.dtype, pr.bits, true)) : nullptr;
    CUfunction sliced[std::size(kWeightOnlySliced)] = {}, few_sliced[std::size(kWeightOnlyFewSliced)] = {};
    if (weight_only_sliced_applies(pr.dtype, pr.bits, tile, pr.rows, pr.K, pr.group))
      for (size_t i = 0; i < std::size(kWeightOnlySliced); ++i)
        sliced[i] = kernels.entry(weight_only_sliced_function(pr.dtype, pr.bits, static_cast<int>(i)));
    if (few_x)
      for (size_t i = 0; i < std::size(kWeightOnlyFewSliced); ++i)
        few_sliced[i] = kernels.entry(weight_only_few_sliced_function(pr.dtype, pr.bits, static_cast<int>(i)));
    using F = WeightOnlyForm;
    // A forced form alone where the module has it: "row", "slice" or "fewslice" (their shapes) or
    // "few", else "frag", else the ring.
    const bool force_form = !pr.fold && (env_is("ring") || env_form());
    const F forced = env_is("row") && one_row              ? F::kOneRow
                     : env_is("slice") && sliced[0]       ? F::kSliced
                     : env_is("few") && few && few_x      ? F::kFewRows
                     : env_is("fewslice") && few_sliced[0] ? F::kFewSliced
                     : env_form() && frag                 ? F::kFrag
                                                          : F::kRing;
    // 16 candidates of the four forms' splits, then the one-row and the few-rows K-sliced shapes
    // with 4, 8 and 16 warps.
    constexpr int kWarpCounts = static_cast<int>(std::size(kWeightOnlySlicedWarps));
    constexpr int kShapes = static_cast<int>(std::size(kWeightOnlySliced) + std::size(kWeightOnlyFewSliced));
    for (int candidate = 0; candidate < 16 + kShapes * kWarpCounts; ++candidate) {
      const bool is_sliced = candidate >= 16;
      const int shape = is_sliced ? (candidate - 16) / kWarpCounts : 0;  // kSliced + shape: both tables in turn
      const int split = is_sliced ? kWeightOnlySlicedWarps[(candidate - 16) % kWarpCounts] : 1 << (candidate % 4);
      const F form = is_sliced ? static_cast<F>(static_cast<int>(F::kSliced) + shape) : static_cast<F>(candidate / 4);
      const int few_i = weight_only_sliced_index(form, F::kFewSliced);
      const CUfunction vector = few_i >= 0            ? few_sliced[few_i]
                                : is_sliced           ? sliced[shape]
                                : form == F::kOneRow  ? one_row
                                : form == F::kFrag    ? frag
                                : form == F::kFewRows ? few
                                                      : ring;
      const bool form_forced = few_i >= 0 ? forced == F::kFewSliced : is_sliced ? forced == F::kSliced : form == forced;
      if ((form != F::kRing && !vector) || ((form == F::kFewRows || few_i >= 0) && !few_x) ||
          (force_form && !form_forced))
        continue;
      // A folded product runs on the K-sliced shapes of its tile alone (their fold entry points, the
      // same loops with their prologue and epilogue: timed here without them).
      if (pr.fold && (tile == 2 * kWeightOnlyMmaRows ? few_i < 0 : !is_sliced || few_i >= 0)) continue;
      // The launches: the form's one, or the few-rows tile's (or its K-sliced form's) layout of x
      // and then the tile.
      std::vector<Launch> launches;
      if (form == F::kFewRows || few_i >= 0) {
        launches = few_i >= 0 ? weight_only_few_sliced_launches(pr, vector, few_x, sms, few_i, split)
                              : weight_only_few_rows_launches(pr, few, few_x, sms, split);
        launches[0].words[kWeightOnlyXWord] = static_cast<int64_t>(ptrs[0]);
        launches[0].words[kWeightOnlyOutWord] = launches[1].words[kWeightOnlyXWord] = static_cast<int64_t>(ptrs[4]);
      } else {
        StatusOr<Launch> l = weight_only_launch(pr, tile, fn, sms, split, vector, form);
        if (!l.ok()) continue;
        launches.push_back(std::move(l.value()));
        launches.back().words[kWeightOnlyXWord] = static_cast<int64_t>(ptrs[0]);
      }
      Launch& launch = launches.back();
      launch.words[kWeightOnlyOutWord] = static_cast<int64_t>(ptrs[1]);
      launch.words[kWeightOnlyScaleWord] = static_cast<int64_t>(ptrs[2]);
      launch.words[kWeightOnlyZeroWord] = pr.zero ? static_cast<int64_t>(ptrs[3]) : 0;
      size_t call = 0;
      auto run = [&] {
        TRIPY_RETURN_IF_ERROR(launch_lead(kernels.lead, stream));
        launch.words[kWeightOnlyWWord] = static_cast<int64_t>(ptrs[5 + call++ % copies]);
        // No addresses to patch (fresh allocations: 256-byte aligned, so the aligned form runs),
        // overlapping the lead where launches overlap.
        for (Launch& l : launches) TRIPY_RETURN_IF_ERROR(rt::cuda::launch(l, {}, stream));
        return ok_status();
      };
      if (!run().ok()) continue;  // this entry point does not run here: skip it
      TRIPY_ASSIGN_OR_RETURN(float ms, timer.time(run, reps, stream));
      if (ms < best) {
        best = ms;
        chosen = WeightOnlyChoice{tile, split, form};
      }
    }
  }
  if (!chosen) return Status(StatusCode::kUnavailable, "no weight-only entry point ran");
  return weight_only_choice_bytes(*chosen);
}

}  // namespace tripy::rt::cuda

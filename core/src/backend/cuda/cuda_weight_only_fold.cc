// A weight-only product that computes what comes before and after it (rt::WeightOnlyDotAttrs norm,
// residual and gate_output): the fold entry points' names, where the GPU folds (weight_only_fold_applies), and
// the launches of a folded product: at one row the K-sliced one-row tile's fold entry point, at 9
// to 16 rows the few-rows tile's layout and K-sliced fold, the CUDA-core fold where an address is
// off their vector alignment.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/cuda_weight_only_words.h"

namespace tripy::rt::cuda {
using namespace weight_only_words;

std::string weight_only_fold_rows_function(DType t, int bits, int row_tile) {
  return weight_only_function(t, bits, row_tile) + kFoldRowsSuffix;
}

int weight_only_gated_shape(int i, bool few_rows) {
  const WeightOnlySliced* shapes = few_rows ? kWeightOnlyFewSliced : kWeightOnlySliced;
  const int n = static_cast<int>(few_rows ? std::size(kWeightOnlyFewSliced) : std::size(kWeightOnlySliced));
  if (shapes[i].tiles >= 2) return i;
  for (int j = 0; j < n; ++j)
    if (shapes[j].tiles == 2) return j;
  return i;
}

std::string weight_only_sliced_fold_function(DType t, int bits, int i, WeightOnlySlicedFold fold) {
  using F = WeightOnlySlicedFold;
  const bool gated = fold == F::kGate || fold == F::kNormGate;
  const std::string shape = weight_only_sliced_function(t, bits, gated ? weight_only_gated_shape(i) : i);
  switch (fold) {
    case F::kNorm: return shape + kFoldNormSuffix;
    case F::kResidual: return shape + kFoldResidualSuffix;
    case F::kGate: return shape + kFoldGateSuffix;
    case F::kNormGate: break;
  }
  return shape + kFoldNormSuffix + kFoldGateSuffix;
}

WeightOnlySlicedFold weight_only_sliced_fold(const WeightOnlyDotAttrs& a) {
  using F = WeightOnlySlicedFold;
  return a.gate_output ? (a.norm ? F::kNormGate : F::kGate) : a.norm ? F::kNorm : F::kResidual;
}

std::string weight_only_few_x_fold_function(DType t, int bits) {
  return weight_only_few_rows_function(t, bits, true) + kFoldSuffix;
}

std::string weight_only_few_sliced_fold_function(DType t, int bits, int i, bool gate) {
  return gate ? weight_only_few_sliced_function(t, bits, weight_only_gated_shape(i, true)) + kFoldSuffix + kFoldGateSuffix
              : weight_only_few_sliced_function(t, bits, i) + kFoldSuffix;
}

bool weight_only_fold_format(int bits) { return bits == 4 || bits == 8; }

bool weight_only_row_fold_format(int bits) { return bits == 4 || bits == kWeightOnlyE4M3; }

bool weight_only_gate_format(int bits) { return bits == 4 || bits == 8 || bits == kWeightOnlyE4M3; }

bool weight_only_sliced_fold_entry(int bits, const WeightOnlyDotAttrs& a) {
  if (a.gated || !(a.norm || a.residual || a.gate_output)) return false;
  if (a.gate_output) return weight_only_gate_format(bits) && !a.residual && (!a.norm || weight_only_row_fold_format(bits));
  return weight_only_row_fold_format(bits) && !(a.norm && a.residual);
}

bool weight_only_fold_applies(const WeightOnlyFold& f) {
  if (f.gated || f.K <= 0) return false;
  WeightOnlyDotAttrs a;
  a.norm = f.norm, a.residual = f.residual, a.gate_output = f.gate_output;
  if (f.rows == 1)
    return weight_only_sliced_fold_entry(f.bits, a) &&
           weight_only_sliced_applies(f.dtype, f.bits, kWeightOnlyMmaRows, 1, f.K, f.group);
  return !(f.gate_output && f.residual) && weight_only_fold_format(f.bits) && f.rows > kWeightOnlyMmaRows &&
         f.rows <= 2 * kWeightOnlyMmaRows &&
         weight_only_few_rows_applies(f.dtype, f.bits, 2 * kWeightOnlyMmaRows, f.K, f.group);
}

namespace {

// A folded product's words after WoArgs' (WoFold's, zero until set_fold_words fills them), with
// the gated output's width.
void add_fold_words(const WeightOnlyProblem& pr, std::vector<int64_t>& words) {
  words.resize(kFoldWords, 0);
  words[kWordGate] = pr.gate ? pr.width() : 0;
}

}  // namespace

Launch weight_only_fold_rows_launch(const WeightOnlyProblem& pr, CUfunction fn) {
  Launch l;
  l.fn = fn;
  l.overlaps = true;
  l.block_x = kWeightOnlyBlock;
  const int64_t warps = pr.rows * pr.width(), per_block = kWeightOnlyBlock / 32;
  l.grid = l.vector_grid = l.scalar_grid = static_cast<unsigned>((warps + per_block - 1) / per_block);
  l.words = weight_only_problem_words(pr);
  add_fold_words(pr, l.words);
  return l;
}

StatusOr<Launch> weight_only_fold_launch(const WeightOnlyProblem& pr, CUfunction rows_fn, CUfunction sliced_fn,
                                         int sm_count, int i, int warps) {
  const WeightOnlyForm form = static_cast<WeightOnlyForm>(static_cast<int>(WeightOnlyForm::kSliced) + i);
  TRIPY_ASSIGN_OR_RETURN(Launch l, weight_only_launch(pr, kWeightOnlyMmaRows, rows_fn, sm_count, warps, sliced_fn, form));
  if (!l.vector_fn) return Status(StatusCode::kInvalidArgument, "a folded weight-only product off the K-sliced tile");
  // A gated output: tiles of the gate half and as many of the up half a block (at least one
  // each), a block's outputs half its weight rows.
  if (pr.gate) {
    const int64_t outputs_a_block = int64_t{8} * kWeightOnlySliced[weight_only_gated_shape(i)].tiles;
    l.vector_grid = static_cast<unsigned>((pr.width() + outputs_a_block - 1) / outputs_a_block);
  }
  // The CUDA-core form: a warp an output, 8 a block.
  l.block_x = kWeightOnlyBlock;
  l.grid = l.scalar_grid = static_cast<unsigned>((pr.width() + kWeightOnlyBlock / 32 - 1) / (kWeightOnlyBlock / 32));
  add_fold_words(pr, l.words);
  return l;
}

namespace {

// What a folded product takes on, for the debug lines.
std::string folds_str(const WeightOnlyDotAttrs& a) {
  std::string out;
  for (const auto& [on, name] : {std::pair{a.norm, "RMSNorm"}, {a.residual, "residual"}, {a.gate_output, "SiLU(gate) x up"}})
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// A folded product's pointer and fold words on `l`: out, x, w, the scales (and zero points), gamma
// and the residual where it has them (x, w and gamma read in vectors, the others a value at a time).
void set_fold_words(const Program& p, const Kernel& k, const WeightOnlyProblem& pr, Launch& l) {
  const WeightOnlyDotAttrs& a = k.weight_only_dot;
  l.ptrs = {{kWordOut, k.outputs[0], 0, true}, {kWordX, k.inputs[0], 0}, {kWordW, k.inputs[1], 0},
            {kWordScale, k.inputs[2], 0, true}};
  if (pr.zero) l.ptrs.push_back({kWordZero, k.inputs[3], 0, true});
  if (a.norm) {
    const int32_t gamma = k.inputs[weight_only_gamma_input(a)];
    l.ptrs.push_back({kWordGamma, gamma, 0, false});  // read as x is, in vectors
    l.words[kWordGammaF32] = p.buffers[static_cast<size_t>(gamma)].dtype == DType::kFloat32;
    std::memcpy(&l.words[kWordEps], &a.norm_eps, sizeof(double));
  }
  if (a.residual) l.ptrs.push_back({kWordResidual, k.inputs[weight_only_residual_input(a)], 0, true});
}

// A folded product (normalizing x, adding a residual or gating its output) at one row: shape i of
// the K-sliced one-row tile as the build timed it, its entry point of the product's fold (the
// module of 8 rows); the CUDA-core fold where an address is off its vector alignment.
StatusOr<bool> plan_one_row_fold_step(PlanContext& c, const Kernel& k, Step& step, const WeightOnlyProblem& pr,
                                      const KernelCode& code) {
  const std::optional<WeightOnlyChoice> tuned = weight_only_choice(code.algo);
  const int timed = tuned ? weight_only_sliced_index(tuned->form) : -1, i = timed >= 0 ? timed : 0;
  if (pr.rows != 1 || !weight_only_sliced_applies(pr.dtype, pr.bits, code.row_tile, pr.rows, pr.K, pr.group))
    return kernel_failure(c.program, k,
                          "normalizes x or adds a residual at " + std::to_string(pr.rows) +
                              " rows, where the K-sliced one-row tile does not run",
                          StatusCode::kInternal);
  StatusOr<Launch> l = weight_only_fold_launch(pr, code.fold_rows_fn, code.sliced_fold_fn[i], c.sm_count, i,
                                               timed >= 0 ? tuned->split : 0);
  if (!l.ok()) return kernel_failure(c.program, k, l.status().message(), l.status().code());
  set_fold_words(c.program, k, pr, *l);
  if (debug_level() >= 1)
    std::fprintf(stderr,
                 "tripy: weight-only dot '%s' at 1 row: the K-sliced tile's fold (%s), %d tiles of 16 rows and %u "
                 "warps a block\n",
                 k.name.c_str(), folds_str(k.weight_only_dot).c_str(),
                 kWeightOnlySliced[pr.gate ? weight_only_gated_shape(i) : i].tiles,
                 l->vector_block_x / 32);
  step.launches = {std::move(l.value())};
  return true;
}

}  // namespace

// A folded product (normalizing x, adding a residual or gating its output) at up to 16 rows: the
// fold entry points of the few-rows tile's timed K-sliced shape (the module of 16 rows); the
// CUDA-core fold where an address is off their vector alignment. The compiler's rule
// (weight_only_fold_applies) made sure one of the two applies.
StatusOr<bool> plan_weight_only_fold_step(PlanContext& c, const Kernel& k, Step& step, const WeightOnlyProblem& pr,
                                          const KernelCode& code) {
  if (code.row_tile == kWeightOnlyMmaRows) return plan_one_row_fold_step(c, k, step, pr, code);
  const std::optional<WeightOnlyChoice> tuned = weight_only_choice(code.algo);
  const int timed = tuned ? weight_only_sliced_index(tuned->form, WeightOnlyForm::kFewSliced) : -1;
  const int i = timed >= 0 ? timed : 0, warps = timed >= 0 ? tuned->split : kWeightOnlySlicedWarps[1];
  if (code.row_tile != 2 * kWeightOnlyMmaRows || pr.rows > code.row_tile ||
      !weight_only_few_rows_applies(pr.dtype, pr.bits, code.row_tile, pr.K, pr.group))
    return kernel_failure(c.program, k,
                          "normalizes x or adds a residual at " + std::to_string(pr.rows) +
                              " rows, where the few-rows tile does not run",
                          StatusCode::kInternal);
  std::vector<Launch> l =
      weight_only_few_sliced_launches(pr, code.few_sliced_fold_fn[i], code.few_x_fold_fn, c.sm_count, i, warps);
  for (Launch& one : l) {
    add_fold_words(pr, one.words);
    set_fold_words(c.program, k, pr, one);
  }
  l[0].ptrs.erase(l[0].ptrs.begin(), l[0].ptrs.begin() + 1);  // the layout writes the workspace, not out
  l[1].ptrs.erase(l[1].ptrs.begin() + 1);                     // the tile reads x from the workspace
  if (!always_aligned(c.program, l[1])) {
    Launch rows = weight_only_fold_rows_launch(pr, code.fold_rows_fn);
    set_fold_words(c.program, k, pr, rows);
    step.launches = {std::move(rows)};
    return true;
  }
  if (debug_level() >= 1) {
    const WeightOnlyDotAttrs& a = k.weight_only_dot;
    std::fprintf(stderr,
                 "tripy: weight-only dot '%s' at %lld rows: the few-rows K-sliced tile's fold (%s), %d tiles of 16 "
                 "rows and %u warps a block\n",
                 k.name.c_str(), static_cast<long long>(pr.rows), folds_str(a).c_str(),
                 kWeightOnlyFewSliced[weight_only_gated_shape(i, pr.gate)].tiles, l[1].block_x / 32);
  }
  c.workspace = std::max(c.workspace, static_cast<size_t>(l[0].workspace_bytes));
  step.launches = std::move(l);
  return true;
}

}  // namespace tripy::rt::cuda

// kDot as a matrix-vector product on our own kernel (codegen/kernels/gemv.cuh) for a few rows of
// x: a decode step's x (M rows) @ W.T, bound by reading W once. The build times it beside
// cuBLASLt's candidates (codegen/cuda_gemm_tune.cc) and stores the winner as the dot's AlgoBytes,
// tagged so the runtime knows it from a cuBLASLt algorithm; a signature it does not apply to (more
// rows than the kernel holds, at dynamic shapes) runs cuBLASLt's heuristic choice instead.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_launch.h"

namespace tripy::rt::cuda {

// The entry points' compile-time shapes: rows of x held in registers (MT >= M, the smallest that
// fits) and rows of W one warp group sums at once (R).
inline constexpr int kGemvRowTiles[] = {1, 2, 4, 8, 16};
inline constexpr int kGemvWeightRows[] = {1, 2, 4};
inline constexpr int kGemvMaxRows = 16;  // M
// At most 16 sums per lane (MT * R): more take more registers and NVRTC seconds, so a tactic's R
// shrinks for the larger tiles (gemv_weight_rows).
inline constexpr int kGemvMaxSums = 16;
inline constexpr int kGemvBlock = 256;   // threads (kernels/gemv.cuh's GEMV_BLOCK)
// From this tile on the kernel runs on tensor cores, R tiles of 16 rows of W a group
// (kernels/gemv.cuh's GEMV_MMA_ROWS, gemv_mma).
inline constexpr int kGemvMmaRows = 8;

// One tactic: `rows` (R) rows of W per group of `split` warps, which divide K between them; `tma`:
// the tensor-core tiles with W streamed by the tensor memory accelerator (gemv.cuh's gemv_tma,
// sm_90; R 1), whose launch falls back to gemv_mma where an address is not 16-byte aligned.
struct GemvTactic {
  int rows = 1, split = 1;
  bool tma = false;
};
// The GPU architecture (major * 10 + minor) from which the tuner times the TMA tactics.
inline constexpr int kGemvTmaArch = 90;

// Whether the kernel computes `problem` at these sizes: float16/bfloat16 with float32 sums, W
// stored [N, K] (transpose_rhs), x's rows dense (no transposed lhs, no strided batches), M <= 16,
// bias and relu/gelu epilogues, no residual.
bool gemv_applies(const DotProblem& problem);
// The tactics: every one on CUDA cores, and those the tuner times for `problem` on a GPU of `arch`
// (on tensor cores: gemv_mma's one launch, and from sm_90 the TMA form at each split where W's
// rows are 16-byte multiples).
std::vector<GemvTactic> gemv_tactics();
std::vector<GemvTactic> gemv_tactics(const DotProblem& problem, int arch);
// A tactic as a stored choice ("GEMV", R, split, and 'T' for the TMA form), and back (nullopt: a
// cuBLASLt algorithm).
AlgoBytes gemv_choice_bytes(GemvTactic tactic);
std::optional<GemvTactic> gemv_choice(const AlgoBytes& stored);

// The R a tactic of `rows` runs with at tile MT: rows, or fewer where MT * rows > kGemvMaxSums.
int gemv_weight_rows(int row_tile, int rows);
// The rows of W one warp group covers at tile MT with R = gemv_weight_rows: R, or 16 R on tensor cores.
int gemv_group_rows(int row_tile, int weight_rows);
// Steps of chunks the CUDA-core rows read before they wait for the previous kernel where the
// weight is a constant: 1, or TRIPY_GEMV_AHEAD (1 to 8) to compare deeper ones.
int gemv_ahead_steps();
// Whether the module has an entry point for (MT, R): R = gemv_weight_rows(MT, R), and R = 1 alone
// on tensor cores (their launch takes one tile of 16 rows a block, whatever the tactic).
bool gemv_entry_exists(int row_tile, int weight_rows);
// tripy_gemv_<f16|bf16>_m<MT>_r<R>, and every one of a dtype's module (R = gemv_weight_rows); the
// TMA form's tripy_gemv_<f16|bf16>_m<MT>_tma (MT >= kGemvMmaRows).
std::string gemv_function(DType t, int row_tile, int weight_rows);
std::string gemv_tma_function(DType t, int row_tile);
std::vector<std::string> gemv_functions(DType t);
// The entry point for `problem`'s M, and the one a TMA tactic's launch falls back to (the tactic's
// own where it has none).
std::string gemv_function_for(const DotProblem& problem, GemvTactic tactic);
std::string gemv_fallback_for(const DotProblem& problem, GemvTactic tactic);
// The entry points that runs of `problem`'s dot with M anywhere in [m_lo, m_hi] launch for
// `tactic` (at the Ms gemv_applies to): what an executable holds for a dot that chose it.
std::set<std::string> gemv_functions_for(const DotProblem& problem, int64_t m_lo, int64_t m_hi, GemvTactic tactic);

// The launch of `fn` for `problem` (gemv_applies): words and grid; addresses in `ptrs` for the
// buffers out, x (lhs), w (rhs) and bias (< 0: none). `w_constant`: w is a constant of the program,
// whose first chunks (boxes) the kernels load before waiting for the previous kernel. A TMA tactic
// launches `fn` in the vector form and `fallback` (gemv_fallback_for's) otherwise.
Launch plan_gemv(const DotProblem& problem, GemvTactic tactic, CUfunction fn, CUfunction fallback, int32_t out,
                 int32_t x, int32_t w, int32_t bias, bool w_constant);
// One launch on device addresses (the tuner's), as a step launches it: overlapping the kernel
// before it where launches overlap, its first chunks of w before its wait where the problem's w
// is a constant.
Status run_gemv(const DotProblem& problem, GemvTactic tactic, CUfunction fn, CUdeviceptr out, CUdeviceptr x,
                CUdeviceptr w, CUdeviceptr bias, CUstream stream);

}  // namespace tripy::rt::cuda

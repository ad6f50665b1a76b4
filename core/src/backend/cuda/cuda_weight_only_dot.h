// kWeightOnlyDot on the GPU (the kernel: codegen/kernels/weight_only_dot.cuh): which entry points a
// kernel may run (the tile of rows of x each holds in registers: the one its ranges call for, and
// the tensor-core tile where that may be faster at fewer rows; the builder times them) and its
// launch at one signature's sizes.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <vector>

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
// The weight's format where the functions below take `bits`: 4 or 8 (int4, int8), or this code for
// float8 e4m3 (a byte a value as int8; the kernel's WO_E4M3).
inline constexpr int kWeightOnlyE4M3 = 9;
// Kernel `k`'s format: its bits, or kWeightOnlyE4M3 where the weight holds float8 values.
int weight_only_format(const Program& p, const Kernel& k);
// A kernel whose x may have more rows than the largest tile (a prefill) runs the tensor-core tile
// (its module is a decode step's too: no compile of its own), whose module also dequantizes the
// weight: from this many rows the launch writes the dequantized weight into the program's
// workspace and cuBLASLt multiplies it, as a tile of rows reads the packed weight once each (about
// even at 6 tiles: Llama-3-8B's gate/up product in int4 on an H200, 6 x 28 us against 164 us).
inline constexpr int64_t kWeightOnlyGemmRows = 48;
// Weight rows a warp group of the ring's tile takes (8 H of weight_only_dot.cuh's wo_mma_ring).
inline constexpr int kWeightOnlyRingRows = 32;
bool weight_only_mma_applies(DType t, int bits, int row_tile, int64_t K, int64_t group);
// Whether the tile of `row_tile` rows is the ring's (wo_mma_ring): the tensor-core tile of
// kWeightOnlyMmaRows rows, with K and the group whole steps of 4 pieces.
bool weight_only_ring_applies(DType t, int bits, int row_tile, int64_t K, int64_t group);
// The tile for kernel `k`: the smallest that holds the most rows its x may have (kWeightOnlyMmaRows
// where more: tiles below kWeightOnlyGemmRows rows, the dequantized weight's GEMM from there).
int weight_only_row_tile(const Program& p, const Kernel& k);
// tripy_weight_only_dot_<f32|f16|bf16>_<b4|b8|e4m3>_m<MT>, and the MT such a name holds (0: none).
std::string weight_only_function(DType t, int bits, int row_tile);
// The second entry point of the kWeightOnlyMmaRows module of float16 and bfloat16 x: the
// tensor-core tile through a shared-memory ring (weight_only_dot.cuh's wo_mma_ring), which the
// launch's aligned form runs where K and the group are whole steps of it (weight_only_ring_applies).
std::string weight_only_ring_function(DType t, int bits);
// For int4 weights and bfloat16 x, the modules of the tiles of 8 and 16 rows (weight_only_frag_tile)
// hold one more: the tensor-core tile fed from registers (kernels/weight_only_frag.cuh's wo_frag4,
// one or two tiles of 8 rows of x), which the aligned form runs instead of the ring (8 rows) or of
// the module's own tensor-core tile (16) where the build's timing chose it (WeightOnlyForm::kFrag)
// and K and the group are multiples of 128 values (weight_only_frag_applies). Its warp groups take
// weight_only_frag_rows weight rows: at 16 rows of x two tiles of 16 meet each of x's fragments
// (its entry point named _frag32: a file saved with the 16-row groups before keeps its own tile).
bool weight_only_frag_tile(DType t, int bits, int row_tile);
bool weight_only_frag_applies(DType t, int bits, int row_tile, int64_t K, int64_t group);
inline int weight_only_frag_rows(int row_tile) { return row_tile == 2 * kWeightOnlyMmaRows ? 32 : 16; }
std::string weight_only_frag_function(DType t, int bits, int row_tile);
// For int4, int8 and float8 weights and bfloat16 x, the module of 8 rows (weight_only_one_row_tile)
// holds the one-row tile too (weight_only_frag.cuh's wo_frag_row: x in shared memory as float16,
// the weight's values as float16 subnormals, or float8's as float16 normals), which the aligned
// form runs instead where the build's timing chose it, x has one row, K is at most
// kWeightOnlyOneRowMaxK (its shared memory) and a group is a power-of-two number of its chunks
// (128 int4 values, 64 of a byte) or the whole row (weight_only_one_row_applies). Rows of up to
// kWeightOnlyOneRowShortK int8 values have an entry point of their own, with a deeper weight ring in
// the room of the longer rows' x (weight_only_one_row_short; in the 8B decode step it made int8
// faster and int4 slower); weight_only_one_row_function(t, bits, K) names the one a row of K values
// runs.
inline constexpr int64_t kWeightOnlyOneRowMaxK = 14336;   // WO_ROW_MAX_K
inline constexpr int64_t kWeightOnlyOneRowShortK = 4096;  // WO_ROW_SHORT_K
bool weight_only_one_row_tile(DType t, int bits, int row_tile);
bool weight_only_one_row_applies(DType t, int bits, int row_tile, int64_t rows, int64_t K, int64_t group);
inline bool weight_only_one_row_short(int bits, int64_t K) { return bits == 8 && K <= kWeightOnlyOneRowShortK; }
std::string weight_only_one_row_function(DType t, int bits, int64_t K);
// For int4, int8 and float8 weights and bfloat16 x, the module of 8 rows also holds the K-sliced
// one-row tile (weight_only_frag.cuh's wo_row_sliced: each warp of a block takes every W-th chunk
// of K and meets its x, held in registers, with RT tiles of 16 weight rows), in three shapes, each
// a form of its own that the build times with 4, 8 and 16 warps a block (the choice's split); it
// runs where x has one row, K and the group are multiples of a chunk (128 int4 values, 64 of a
// byte) and a group a power-of-two number of them or the whole row (weight_only_sliced_applies;
// any K).
struct WeightOnlySliced {
  int tiles;  // RT: tiles of 16 weight rows a block
  const char* suffix;
};
inline constexpr WeightOnlySliced kWeightOnlySliced[] = {{4, "_slice4"}, {1, "_slice1"}, {2, "_slice2"}};
inline constexpr int kWeightOnlySlicedWarps[] = {4, 8, 16};
bool weight_only_sliced_applies(DType t, int bits, int row_tile, int64_t rows, int64_t K, int64_t group);
// Shape i's entry point (kWeightOnlySliced[i]).
std::string weight_only_sliced_function(DType t, int bits, int i);
// The entry point of the kWeightOnlyMmaRows module that writes the dequantized weight [N, K] of x's dtype.
std::string weight_only_dequantize_function(DType t, int bits);
// For int4 weights and bfloat16 x, the module of 8 rows (weight_only_frag_tile) also holds the
// many-rows tile (weight_only_frag.cuh's wo_gemm4: the packed weight's values dequantized in
// registers into tensor-core products), in two shapes, 64 rows of x a block (8 warps of 16 weight
// rows) and 32 (and up to 2 warps a group of 16 weight rows: more blocks where N is small), each
// after its layout of x in the workspace (wo_gemm4_x). From kWeightOnlyGemmRows to
// kWeightOnlyTileGemmRows rows, K and the group multiples of 128 and the addresses 16-byte aligned
// (weight_only_many_rows_applies), it runs instead of the dequantized weight's GEMM, which reads
// and writes the weight in bfloat16 once more than the packed bytes; past them that GEMM's
// tensor cores win (Llama-3-8B's int4 products on an H200, timed alone: at 128 rows qkv 42.6 us
// against 44.0, o 32.3 against 32.7, gate/up 122 against 179, down 93.5 against 96.2; at 256 rows
// every one slower).
inline constexpr int64_t kWeightOnlyTileGemmRows = 128;
bool weight_only_many_rows_applies(DType t, int bits, int64_t rows, int64_t K, int64_t group);
// The many-rows tile's entry point of `x_rows` rows of x a block (32 or 64), or its layout of x's.
std::string weight_only_many_rows_function(DType t, int bits, int x_rows, bool layout);
// The many-rows tile's shape for N weight rows and `rows` rows of x: 64 rows of x a block (8 warps
// of 16 weight rows) where that grid covers most of the GPU (Llama-3-8B's qkv and gate/up at 128
// rows on an H200), else 32 with the warps a group (1 or 2) that cover it twice where they can (o
// and down, N 4096); and the grid's blocks.
struct WeightOnlyManyRows {
  int x_rows = 64, split = 1;
  int64_t blocks = 0;
};
WeightOnlyManyRows weight_only_many_rows_shape(int64_t N, int64_t rows, int sm_count);
// For int4, int8 and float8 weights and bfloat16 x, the module of 16 rows also holds the few-rows
// tile (weight_only_frag.cuh's wo_few: the one-row tile's float16 arithmetic with x's 16 rows as
// the mma's columns), after its layout of x in the workspace (wo_few_x), which the build times as
// a form of its own (WeightOnlyForm::kFewRows) where K and the group are multiples of a chunk (128
// int4 or 64 8-bit values), a group a power-of-two number of them or the whole row
// (weight_only_few_rows_applies); it runs where the weight's address is 16-byte aligned.
bool weight_only_few_rows_tile(DType t, int bits, int row_tile);
bool weight_only_few_rows_applies(DType t, int bits, int row_tile, int64_t K, int64_t group);
std::string weight_only_few_rows_function(DType t, int bits, bool layout);
// The module of 16 rows also holds the few-rows tile's K-sliced form (weight_only_frag.cuh's
// wo_few_sliced: each warp of a block takes every W-th chunk of K, loads its x fragments once and
// meets them with RT tiles of 16 weight rows), in two shapes, each a form of its own that the
// build times with 4, 8 and 16 warps a block, after the few-rows tile's layout of x; it runs where
// the few-rows tile would.
inline constexpr WeightOnlySliced kWeightOnlyFewSliced[] = {{1, "_few_slice1"}, {2, "_few_slice2"}};
std::string weight_only_few_sliced_function(DType t, int bits, int i);
// A folded product's entry points in the module of 16 rows (int4 and int8 weights,
// weight_only_fold_format; taking WoFoldArgs): the layout of x times gamma (with each chunk's sums
// of squares), shape i's tile (the rows' norm factors and the residual at the store), or with
// `gate` its tile that writes SiLU(gate) * up of the product's halves (its tiles half of the gate
// half and half of the up half; a shape of one tile runs that of 2, weight_only_gated_shape).
bool weight_only_fold_format(int bits);
std::string weight_only_few_x_fold_function(DType t, int bits);
std::string weight_only_few_sliced_fold_function(DType t, int bits, int i, bool gate = false);
// The CUDA-core fold (wo_fold_rows) of the module of `row_tile` rows, where an address is off the
// K-sliced tiles' vector alignment.
std::string weight_only_fold_rows_function(DType t, int bits, int row_tile);
// The K-sliced one-row tile's fold entry points in the module of 8 rows: shape i's for a product
// that normalizes its x or adds a residual (int4 and float8 weights, weight_only_row_fold_format;
// wo_row_sliced's WO_FOLD_NORM, WO_FOLD_RESIDUAL), and for one that writes SiLU(gate) * up of its
// halves (int4, int8 and float8, weight_only_gate_format; WO_FOLD_GATE, with the norm where the
// format has it), its shape's tiles half of the gate half and half of the up half (a shape of one
// tile runs that of 2: weight_only_gated_shape, of kWeightOnlySliced or kWeightOnlyFewSliced).
bool weight_only_row_fold_format(int bits);
int weight_only_gated_shape(int i, bool few_rows = false);
bool weight_only_gate_format(int bits);
enum class WeightOnlySlicedFold { kNorm, kResidual, kGate, kNormGate };
std::string weight_only_sliced_fold_function(DType t, int bits, int i, WeightOnlySlicedFold fold);
// The entry point a folded product's attributes ask for, and whether the module of 8 rows of
// weights of format `bits` has it.
WeightOnlySlicedFold weight_only_sliced_fold(const WeightOnlyDotAttrs& a);
bool weight_only_sliced_fold_entry(int bits, const WeightOnlyDotAttrs& a);
// The module name (weight_only_function) that holds entry point `function`.
std::string weight_only_module_function(const std::string& function);
int weight_only_function_tile(const std::string& function);
// The tiles the builder times for kernel `k`: its own (weight_only_row_tile); for int4 and float8
// weights, and int8 where the one-row tile applies, the tensor-core tile where its own runs on CUDA
// cores and the tensor-core one applies (a decode step's one row of such values may reach an mma
// in fewer instructions than the CUDA cores dequantize them); and where its own holds 16 or 32
// rows, the ring's tile of 8 where it applies (a tile of rows a group of blocks, the weight read
// from memory once for them all).
std::vector<int> weight_only_tiles_to_time(const Program& p, const Kernel& k);

// One product's sizes, and its launch by an entry point of tile `row_tile` (the words but the
// addresses; the grid where the addresses allow the vector form, and where they do not).
struct WeightOnlyProblem {
  DType dtype = DType::kBFloat16;  // of x, the scales, the zero points and the output
  int bits = 8;  // the format (weight_only_format)
  int64_t rows = 0, N = 0, K = 0, row_bytes = 0, groups = 0, group = 0;
  bool zero = false;
  // The product normalizes or gates x, adds a residual or gates its output (rt::WeightOnlyDotAttrs
  // norm, gated, residual, gate_output): it runs on the K-sliced tiles' fold entry points alone.
  bool fold = false;
  bool gate = false;  // gate_output: N / 2 outputs a row
  int64_t width() const { return gate ? N / 2 : N; }  // the output's
  // No kernel of the program writes the weight: the tiles' first reads of it may go before their
  // wait for the previous kernel (the launch's kMmaSplitEarly), hidden behind that kernel.
  bool constant_weight = false;
};
// Kernel `k`'s problem at the shapes of x, the weight and the scales and its output's elements.
WeightOnlyProblem weight_only_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& x,
                                      const std::vector<int64_t>& w, const std::vector<int64_t>& scale,
                                      int64_t out_elements);
// The aligned form's entry point in the tile of 8 rows: the ring's (32 weight rows a warp group),
// the register-fed int4 tile's (weight_only_frag_rows; also at 16 rows) or the one-row tile's (16);
// at 16 rows also the few-rows tile's (16), two launches (weight_only_few_rows_launches).
// kSliced + i: the K-sliced one-row tile's shape i (kWeightOnlySliced), kFewSliced + i the
// few-rows tile's (kWeightOnlyFewSliced); their split is the warps a block.
enum class WeightOnlyForm : uint8_t { kRing = 0, kFrag = 1, kOneRow = 2, kFewRows = 3, kSliced = 4, kFewSliced = 7 };
static_assert(static_cast<size_t>(WeightOnlyForm::kFewSliced) ==
              static_cast<size_t>(WeightOnlyForm::kSliced) + std::size(kWeightOnlySliced));
inline constexpr int kWeightOnlyForms = static_cast<int>(WeightOnlyForm::kFewSliced) +
                                        static_cast<int>(std::size(kWeightOnlyFewSliced));
// Form f's shape in its table (kSliced: kWeightOnlySliced, kFewSliced: kWeightOnlyFewSliced), or -1.
inline int weight_only_sliced_index(WeightOnlyForm f, WeightOnlyForm first = WeightOnlyForm::kSliced) {
  const int i = static_cast<int>(f) - static_cast<int>(first);
  const size_t n = first == WeightOnlyForm::kSliced ? std::size(kWeightOnlySliced) : std::size(kWeightOnlyFewSliced);
  return i >= 0 && static_cast<size_t>(i) < n ? i : -1;
}
// Whether form f's split is the warps a block (a K-sliced shape's).
inline bool weight_only_split_is_warps(WeightOnlyForm f) {
  return weight_only_sliced_index(f) >= 0 || weight_only_sliced_index(f, WeightOnlyForm::kFewSliced) >= 0;
}
// `split`: 1, 2, 4 or 8 warps to a group of weight rows (the build's timed choice; for the K-sliced
// tile the warps a block), 0: the launch's own (the first whose grid covers the GPU twice).
// `vector`: the module's entry point of `form` (null: none), which the aligned form then runs
// where that form applies.
StatusOr<Launch> weight_only_launch(const WeightOnlyProblem& pr, int row_tile, CUfunction fn, int sm_count,
                                    int split = 0, CUfunction vector = nullptr,
                                    WeightOnlyForm form = WeightOnlyForm::kRing);

// The few-rows tile's two launches at `split` (the layout of x into the workspace, then the tile
// reading it there), their words but the addresses; the workspace bytes they share.
std::vector<Launch> weight_only_few_rows_launches(const WeightOnlyProblem& pr, CUfunction tile, CUfunction layout,
                                                  int sm_count, int split);
// Where the compiler may fold a product's norm and residual (PassRules::weight_only_fold): one row
// of int4 or float8 weights on the K-sliced one-row tile (a norm or a residual, each its own entry
// point; and a SwiGLU's gated output, of int8 weights too, with the norm or alone), 9 to 16 rows of
// int4 or int8 weights on the few-rows tile's K-sliced form (any of them; a gated output with no
// residual). On an H200
// (Llama-3-8B decode) float8's fold lost at 16 rows (4.348 -> 4.455 ms) and int8's at one row
// (3.047 -> 3.140: its products leave faster forms), and a SwiGLU's gate everywhere it was tried.
bool weight_only_fold_applies(const WeightOnlyFold& f);
// A folded product on the CUDA cores (wo_fold_rows: a warp an output), where an address is off the
// tiles' vector alignment.
Launch weight_only_fold_rows_launch(const WeightOnlyProblem& pr, CUfunction fn);
// The launch of a folded product at one row: shape i of the K-sliced one-row tile with `warps`
// warps a block (0: the launch's own), the CUDA-core fold its scalar form, the fold's words after
// the problem's (their addresses set by the caller's pointer words).
StatusOr<Launch> weight_only_fold_launch(const WeightOnlyProblem& pr, CUfunction rows_fn, CUfunction sliced_fn,
                                         int sm_count, int i, int warps);
// The same for the few-rows tile's K-sliced shape i (kWeightOnlyFewSliced) with `warps` warps a block.
std::vector<Launch> weight_only_few_sliced_launches(const WeightOnlyProblem& pr, CUfunction tile, CUfunction layout,
                                                    int sm_count, int i, int warps);
int64_t weight_only_few_rows_workspace(const WeightOnlyProblem& pr);

// The build's timed choice (codegen/cuda_weight_only_tune.cc), stored as the kernel's algorithm:
// the tile (its entry point's too), the split and the form; nullopt for other bytes (an older or
// damaged file: the launch then splits as it would untimed).
struct WeightOnlyChoice {
  int tile = 0, split = 0;
  // The one-row tile's applies at one row of x only: at more rows of a dynamic x the register-fed
  // tile runs where the module has it, else the ring.
  WeightOnlyForm form = WeightOnlyForm::kRing;
};
AlgoBytes weight_only_choice_bytes(WeightOnlyChoice choice);
std::optional<WeightOnlyChoice> weight_only_choice(const AlgoBytes& stored);
// Its words' indices of the addresses (WoArgs' first five) and of the vector flag.
inline constexpr int kWeightOnlyOutWord = 0, kWeightOnlyXWord = 1, kWeightOnlyWWord = 2, kWeightOnlyScaleWord = 3,
                     kWeightOnlyZeroWord = 4, kWeightOnlyVecWord = 13;

// The dequantization's launch (the words WoArgs', the output the workspace's first bytes).
Launch weight_only_dequantize_launch(const WeightOnlyProblem& pr, CUfunction fn, int sm_count);

// The kind table's load, plan and run (cuda_kinds.cc): the entry point the artifacts name, whose
// tile the launch follows; one launch, none for an empty output; from kWeightOnlyGemmRows rows
// the many-rows tile after its layout of x, or the dequantization and a cuBLASLt GEMM
// (run_weight_only_dot_step).
Status load_weight_only_dot(const Program& p, const Kernel& k, CUmodule module, const std::string& function,
                            KernelCode& code);
StatusOr<bool> plan_weight_only_dot_step(PlanContext& c, const Kernel& k, Step& step);
Status run_weight_only_dot_step(Step& step, const Kernel& k, const RunContext& c);
// A launch's words with the problem's sizes (the addresses and the launch's own words zero).
std::vector<int64_t> weight_only_problem_words(const WeightOnlyProblem& pr);
// A folded product's step (pr.fold; cuda_weight_only_fold.cc): at one row the K-sliced one-row
// tile's entry point of its fold, at up to 16 the few-rows tile's layout and K-sliced fold, the
// CUDA-core fold where an address is off their vector alignment.
StatusOr<bool> plan_weight_only_fold_step(PlanContext& c, const Kernel& k, Step& step, const WeightOnlyProblem& pr,
                                          const KernelCode& code);

}  // namespace tripy::rt::cuda

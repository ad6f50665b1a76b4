// kWeightOnlyDot's entry points and launch (the kernel: codegen/kernels/weight_only_dot.cuh, whose
// WoArgs the words are). A block of 8 warps takes 8 / split groups of R weight rows and one tile
// of MT rows of x; split is the build's timed choice, else it grows (more warps to a row) until
// the grid covers the GPU twice. Where the tensor-core tiles apply, the launch's vector form
// (16-byte aligned addresses) runs them, with groups of 16 weight rows (32 in the ring's tile),
// and its scalar form the CUDA-core rows. From kWeightOnlyGemmRows rows of x the many-rows tile
// runs after its layout of x in the workspace, where it applies, up to kWeightOnlyTileGemmRows;
// else the weight is dequantized into the workspace and cuBLASLt multiplies (a prefill's products).
// A product that folds its norm or residual launches as cuda_weight_only_fold.cc says.
#include "backend/cuda/cuda_weight_only_dot.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_weight_only_words.h"

namespace tripy::rt::cuda {
using namespace weight_only_words;
namespace {

// The values of a chunk of the one-row and few-rows tiles: 64 bytes of a weight row (WoRowChunk).
int64_t row_chunk_values(int bits) { return bits == 4 ? 128 : 64; }

// The split (1, 2, 4 or 8 warps to a group of `rows` weight rows): `tuned` where the build timed
// one (0: none), else the first whose grid covers the GPU twice; and that grid's blocks along N.
std::pair<int, int64_t> split_for(int64_t N, int64_t rows, int64_t tiles, int sm_count, int tuned) {
  auto blocks = [&](int split) {
    const int64_t rows_per_block = int64_t{kWeightOnlyBlock / 32 / split} * rows;
    return (N + rows_per_block - 1) / rows_per_block;
  };
  if (tuned) return {tuned, blocks(tuned)};
  int split = 1;
  for (; split < 8 && blocks(split) * tiles < 2 * sm_count; split *= 2) {
  }
  return {split, blocks(split)};
}

// The aligned form's entry points are their module's function name and one of these (the ring's,
// weight_only_ring_function, the register-fed int4 tile's, weight_only_frag_function, and the
// one-row tile's, weight_only_one_row_function), the dequantization's that module's and the last
// (weight_only_dequantize_function).
constexpr char kRingSuffix[] = "_ring";
constexpr char kFragSuffix[] = "_frag";
constexpr char kFrag32Suffix[] = "_frag32";  // 32 weight rows a warp group (weight_only_frag_rows)
constexpr char kOneRowSuffix[] = "_row1";
constexpr char kOneRowShortSuffix[] = "_row1_short";  // rows of up to kWeightOnlyOneRowShortK values
constexpr char kDequantizeSuffix[] = "_dequantize";
constexpr char kManyRowsSuffix[] = "_rows";  // and the rows of x a block: _rows64, _rows32 (+ _x: the layout)
constexpr char kFewRowsSuffix[] = "_few", kFewRowsLayoutSuffix[] = "_few_x";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<int64_t> weight_only_problem_words(const WeightOnlyProblem& pr) {
  std::vector<int64_t> w(kWords, 0);
  w[kWordRows] = pr.rows;
  w[kWordN] = pr.N;
  w[kWordK] = pr.K;
  w[kWordRowBytes] = pr.row_bytes;
  w[kWordGroups] = pr.groups;
  w[kWordGroup] = pr.group;
  return w;
}

namespace {

// The dequantized weight's bytes in the workspace, where cuBLASLt's own workspace then starts.
int64_t dequantized_bytes(const WeightOnlyProblem& pr) {
  return (pr.N * pr.K * static_cast<int64_t>(dtype_size(pr.dtype)) + 255) / 256 * 256;
}

bool is_row_tile(int tile) {
  return std::find(std::begin(kWeightOnlyRowTiles), std::end(kWeightOnlyRowTiles), tile) != std::end(kWeightOnlyRowTiles);
}

static_assert(std::extent_v<decltype(KernelCode::sliced_fn)> == std::size(kWeightOnlySliced));
static_assert(std::extent_v<decltype(KernelCode::few_sliced_fn)> == std::size(kWeightOnlyFewSliced));
static_assert(kWordOut == kWeightOnlyOutWord && kWordX == kWeightOnlyXWord && kWordW == kWeightOnlyWWord &&
              kWordScale == kWeightOnlyScaleWord && kWordZero == kWeightOnlyZeroWord && kWordVec == kWeightOnlyVecWord);

}  // namespace

bool weight_only_mma_applies(DType t, int bits, int row_tile, int64_t K, int64_t group) {
  const int64_t vals = bits == 4 ? 32 : 16;
  return (t == DType::kFloat16 || t == DType::kBFloat16) && row_tile >= kWeightOnlyMmaRows && K % vals == 0 &&
         group % vals == 0;
}

bool weight_only_ring_applies(DType t, int bits, int row_tile, int64_t K, int64_t group) {
  const int64_t step = 4 * (bits == 4 ? 32 : 16);  // values of a ring step: 4 pieces of a row
  return row_tile == kWeightOnlyMmaRows && weight_only_mma_applies(t, bits, row_tile, K, group) && group % step == 0 &&
         K % step == 0;
}

bool weight_only_frag_tile(DType t, int bits, int row_tile) {
  return t == DType::kBFloat16 && bits == 4 && (row_tile == kWeightOnlyMmaRows || row_tile == 2 * kWeightOnlyMmaRows);
}

bool weight_only_frag_applies(DType t, int bits, int row_tile, int64_t K, int64_t group) {
  return weight_only_frag_tile(t, bits, row_tile) && K % 128 == 0 && group % 128 == 0;  // whole chunks
}

bool weight_only_one_row_tile(DType t, int bits, int row_tile) {
  return t == DType::kBFloat16 && (bits == 4 || bits == 8 || bits == kWeightOnlyE4M3) && row_tile == kWeightOnlyMmaRows;
}

bool weight_only_one_row_applies(DType t, int bits, int row_tile, int64_t rows, int64_t K, int64_t group) {
  const int64_t chunk = row_chunk_values(bits), chunks_a_group = group / chunk;
  return weight_only_one_row_tile(t, bits, row_tile) && rows == 1 && K <= kWeightOnlyOneRowMaxK && K % chunk == 0 &&
         group % chunk == 0 && (group == K || (chunks_a_group & (chunks_a_group - 1)) == 0);
}

bool weight_only_sliced_applies(DType t, int bits, int row_tile, int64_t rows, int64_t K, int64_t group) {
  const int64_t chunk = row_chunk_values(bits), chunks_a_group = group / chunk;
  return weight_only_one_row_tile(t, bits, row_tile) && rows == 1 && K > 0 && K % chunk == 0 && group % chunk == 0 &&
         (group == K || (chunks_a_group & (chunks_a_group - 1)) == 0);
}

int weight_only_row_tile(const Program& p, const Kernel& k) {
  // The most rows x may have, from the largest bytes of x or of the output (an input's buffer has
  // no bound of its own: the output's holds) over a constant K or the output's width (N, or N / 2
  // where the output is gated); unknown: the largest tile.
  int64_t rows = int64_t{1} << 30;
  auto bound = [&](int32_t buffer, int32_t shape_of, size_t dim, int64_t per) {
    const BufferDesc& d = p.buffers[static_cast<size_t>(p.alias_root(buffer))];
    const std::vector<Slot>& shape = p.buffers[static_cast<size_t>(shape_of)].shape;
    const ShapeInstr& size = p.shape_program[static_cast<size_t>(shape.at(dim))];
    if (d.max_bytes > 0 && size.op == ShapeInstr::Op::kConst && size.a / per > 0)
      rows = std::min(rows, d.max_bytes / (size.a / per * dtype_size(d.dtype)));
  };
  const int32_t x = k.inputs.at(0), w = k.inputs.at(1);
  bound(x, x, p.buffers[static_cast<size_t>(x)].shape.size() - 1, 1);         // over K
  bound(k.outputs.at(0), w, 0, k.weight_only_dot.gate_output ? 2 : 1);       // over the output's width
  for (int t : kWeightOnlyRowTiles)
    if (rows <= t) return t;
  return kWeightOnlyMmaRows;
}

int weight_only_format(const Program& p, const Kernel& k) {
  const bool float8 = p.buffers[static_cast<size_t>(k.inputs.at(1))].dtype == DType::kFloat8E4M3;
  return float8 ? kWeightOnlyE4M3 : static_cast<int>(k.weight_only_dot.bits);
}

std::string weight_only_function(DType t, int bits, int row_tile) {
  const std::string format = bits == kWeightOnlyE4M3 ? "e4m3" : "b" + std::to_string(bits);
  return std::string("tripy_weight_only_dot_") + float_suffix(t) + "_" + format + "_m" +
         std::to_string(row_tile);
}

std::string weight_only_ring_function(DType t, int bits) {
  return weight_only_function(t, bits, kWeightOnlyMmaRows) + kRingSuffix;
}

std::string weight_only_frag_function(DType t, int bits, int row_tile) {
  const char* suffix = weight_only_frag_rows(row_tile) == 32 ? kFrag32Suffix : kFragSuffix;
  return weight_only_function(t, bits, row_tile) + suffix;
}

std::string weight_only_one_row_function(DType t, int bits, int64_t K) {
  return weight_only_function(t, bits, kWeightOnlyMmaRows) +
         (weight_only_one_row_short(bits, K) ? kOneRowShortSuffix : kOneRowSuffix);
}

std::string weight_only_sliced_function(DType t, int bits, int i) {
  return weight_only_function(t, bits, kWeightOnlyMmaRows) + kWeightOnlySliced[i].suffix;
}

std::string weight_only_dequantize_function(DType t, int bits) {
  return weight_only_function(t, bits, kWeightOnlyMmaRows) + kDequantizeSuffix;
}

bool weight_only_many_rows_applies(DType t, int bits, int64_t rows, int64_t K, int64_t group) {
  return weight_only_frag_applies(t, bits, kWeightOnlyMmaRows, K, group) && rows >= kWeightOnlyGemmRows &&
         rows <= kWeightOnlyTileGemmRows;
}

std::string weight_only_many_rows_function(DType t, int bits, int x_rows, bool layout) {
  return weight_only_function(t, bits, kWeightOnlyMmaRows) + kManyRowsSuffix + std::to_string(x_rows) +
         (layout ? "_x" : "");
}

bool weight_only_few_rows_tile(DType t, int bits, int row_tile) {
  return t == DType::kBFloat16 && (bits == 4 || bits == 8 || bits == kWeightOnlyE4M3) &&
         row_tile == 2 * kWeightOnlyMmaRows;
}

bool weight_only_few_rows_applies(DType t, int bits, int row_tile, int64_t K, int64_t group) {
  const int64_t chunk = row_chunk_values(bits), chunks_a_group = group / chunk;  // wo_few's group index is a shift
  return weight_only_few_rows_tile(t, bits, row_tile) && K > 0 && K % chunk == 0 && group % chunk == 0 &&
         (group == K || (chunks_a_group & (chunks_a_group - 1)) == 0);
}

std::string weight_only_few_rows_function(DType t, int bits, bool layout) {
  return weight_only_function(t, bits, 2 * kWeightOnlyMmaRows) + (layout ? kFewRowsLayoutSuffix : kFewRowsSuffix);
}

std::string weight_only_few_sliced_function(DType t, int bits, int i) {
  return weight_only_function(t, bits, 2 * kWeightOnlyMmaRows) + kWeightOnlyFewSliced[i].suffix;
}

int64_t weight_only_few_rows_workspace(const WeightOnlyProblem& pr) {
  // 16 rows of x as float16 B fragments, and a {sum, scale} pair of floats a row and chunk (a
  // folded product: then a double of x's squares a row and chunk, wo_few_squares).
  const int64_t rows = 2 * kWeightOnlyMmaRows, chunks = pr.K / row_chunk_values(pr.bits);
  return (rows * pr.K * 2 + chunks * rows * 8 + (pr.fold ? chunks * rows * 8 : 0) + 255) / 256 * 256;
}

std::vector<Launch> weight_only_few_rows_launches(const WeightOnlyProblem& pr, CUfunction tile, CUfunction layout,
                                                  int sm_count, int split) {
  Launch x;
  x.fn = layout;
  x.overlaps = true;
  x.block_x = kWeightOnlyBlock;
  x.grid = x.vector_grid = x.scalar_grid = grid_for(2 * kWeightOnlyMmaRows * pr.K / 8, kWeightOnlyBlock, sm_count);
  x.words = weight_only_problem_words(pr);
  x.vector_word = kWordVec;
  x.workspace_word = kWordOut;
  x.workspace_bytes = weight_only_few_rows_workspace(pr);
  const auto [mma_split, blocks] = split_for(pr.N, 16, 1, sm_count, split);
  Launch t;
  t.fn = tile;
  t.overlaps = true;
  t.block_x = kWeightOnlyBlock;
  t.grid = t.vector_grid = t.scalar_grid = static_cast<unsigned>(blocks);
  t.words = weight_only_problem_words(pr);
  t.words[kWordMmaSplit] = mma_split | (pr.constant_weight ? kMmaSplitEarly : 0);
  t.words[kWordMmaBlocks] = blocks;
  t.workspace_word = kWordX;
  return {std::move(x), std::move(t)};
}

std::vector<Launch> weight_only_few_sliced_launches(const WeightOnlyProblem& pr, CUfunction tile, CUfunction layout,
                                                    int sm_count, int i, int warps) {
  std::vector<Launch> l = weight_only_few_rows_launches(pr, tile, layout, sm_count, 1);
  // A gated output's block: tiles of the gate half and as many of the up half, half its rows.
  const int64_t rows_a_block = pr.gate ? int64_t{8} * kWeightOnlyFewSliced[weight_only_gated_shape(i, true)].tiles
                                       : int64_t{16} * kWeightOnlyFewSliced[i].tiles;
  Launch& t = l[1];
  t.block_x = static_cast<unsigned>(32 * warps);
  t.grid = t.vector_grid = t.scalar_grid = static_cast<unsigned>((pr.width() + rows_a_block - 1) / rows_a_block);
  t.words[kWordMmaSplit] = pr.constant_weight ? kMmaSplitEarly : 0;
  t.words[kWordMmaBlocks] = 0;
  return l;
}

std::string weight_only_module_function(const std::string& function) {
  // A folded product's entry points: the shape's, then its own.
  for (const char* fold : {kFoldRowsSuffix, kFoldSuffix, kFoldNormSuffix, kFoldResidualSuffix, kFoldGateSuffix})
    if (ends_with(function, fold)) return weight_only_module_function(function.substr(0, function.size() - std::strlen(fold)));
  for (const std::string tail : {kRingSuffix, kFragSuffix, kFrag32Suffix, kOneRowSuffix, kOneRowShortSuffix,
                                 kDequantizeSuffix, kFewRowsSuffix, kFewRowsLayoutSuffix})
    if (ends_with(function, tail)) return function.substr(0, function.size() - tail.size());
  // The few-rows shapes first: their suffixes end as the one-row shapes' do.
  for (const WeightOnlySliced& sl : kWeightOnlyFewSliced)
    if (ends_with(function, sl.suffix)) return function.substr(0, function.size() - std::strlen(sl.suffix));
  for (const WeightOnlySliced& sl : kWeightOnlySliced)
    if (ends_with(function, sl.suffix)) return function.substr(0, function.size() - std::strlen(sl.suffix));
  const size_t rows = function.rfind(kManyRowsSuffix);
  if (rows != std::string::npos && function.rfind("_m") < rows) return function.substr(0, rows);
  return function;
}

int weight_only_function_tile(const std::string& function) {
  const size_t at = function.rfind("_m");
  if (function.rfind("tripy_weight_only_dot_", 0) != 0 || at == std::string::npos) return 0;
  int tile = 0;
  for (size_t i = at + 2; i < function.size(); ++i) {
    if (function[i] < '0' || function[i] > '9' || tile > 1000) return 0;
    tile = tile * 10 + (function[i] - '0');
  }
  return is_row_tile(tile) ? tile : 0;
}

std::vector<int> weight_only_tiles_to_time(const Program& p, const Kernel& k) {
  const int own = weight_only_row_tile(p, k), bits = weight_only_format(p, k);
  const DType t = p.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
  const std::vector<Slot>& x = p.buffers[static_cast<size_t>(k.inputs.at(0))].shape;
  const ShapeInstr& kdim = p.shape_program[static_cast<size_t>(x.back())];
  const bool fixed_k = kdim.op == ShapeInstr::Op::kConst;
  // A folded product (normalizing x, adding a residual, gating its output) runs on the K-sliced
  // one-row tile (the module of 8 rows, one row) or on the few-rows tile's K-sliced form (16) alone.
  if (k.weight_only_dot.norm || k.weight_only_dot.residual || k.weight_only_dot.gate_output)
    return {own == 2 * kWeightOnlyMmaRows ? own : kWeightOnlyMmaRows};
  std::vector<int> out{own};
  if (!fixed_k) return out;
  const int64_t group = k.weight_only_dot.group_size;
  // int4 and float8: an int8 value takes more instructions to reach an mma fragment than the
  // CUDA-core rows spend on it, and the tensor-core tile lost at every decode shape of Llama-3-8B
  // (H200).
  // The one-row tile takes int8 values (and int4) in fewer still, where x may have one row.
  const bool one_row = weight_only_one_row_applies(t, bits, kWeightOnlyMmaRows, 1, kdim.a, group);
  if ((bits != 8 || one_row) && !weight_only_mma_applies(t, bits, own, kdim.a, group) &&
      weight_only_mma_applies(t, bits, kWeightOnlyMmaRows, kdim.a, group))
    out.push_back(kWeightOnlyMmaRows);
  // 16 or 32 rows: the ring's tile of 8 rows, two or four tiles reading the weight at once (the
  // copies after the first from the L2), beside the tile that holds them all.
  if (own > kWeightOnlyMmaRows && weight_only_ring_applies(t, bits, kWeightOnlyMmaRows, kdim.a, group))
    out.push_back(kWeightOnlyMmaRows);
  return out;
}

WeightOnlyProblem weight_only_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& x,
                                      const std::vector<int64_t>& w, const std::vector<int64_t>& scale,
                                      int64_t out_elements) {
  WeightOnlyProblem pr;
  pr.dtype = p.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
  pr.bits = weight_only_format(p, k);
  pr.N = w.at(0);
  pr.K = weight_only_k(k.weight_only_dot, x.back());
  const int64_t width = weight_only_out_n(k.weight_only_dot, pr.N);
  pr.rows = width > 0 ? out_elements / width : 0;
  pr.row_bytes = w.at(1);
  pr.groups = scale.at(1);
  pr.group = k.weight_only_dot.group_size;
  pr.zero = k.weight_only_dot.has_zero;
  pr.gate = k.weight_only_dot.gate_output;
  pr.fold = k.weight_only_dot.norm || k.weight_only_dot.residual || pr.gate;
  pr.constant_weight = p.is_constant(k.inputs.at(1));
  return pr;
}

StatusOr<Launch> weight_only_launch(const WeightOnlyProblem& pr, int row_tile, CUfunction fn, int sm_count,
                                    int split_choice, CUfunction vector, WeightOnlyForm form) {
  const int sliced = weight_only_sliced_index(form);
  if (sliced >= 0) {
    // The K-sliced tile: split_choice warps a block (the launch's own: 4), RT tiles of 16 weight
    // rows a block; the CUDA-core rows where the addresses are off 16 bytes or it does not apply.
    const bool applies = vector && weight_only_sliced_applies(pr.dtype, pr.bits, row_tile, pr.rows, pr.K, pr.group);
    TRIPY_ASSIGN_OR_RETURN(Launch l, weight_only_launch(pr, row_tile, fn, sm_count, 0, nullptr, WeightOnlyForm::kRing));
    if (!applies) return l;
    const int warps = split_choice ? split_choice : kWeightOnlySlicedWarps[0];
    const int64_t rows_a_block = int64_t{16} * kWeightOnlySliced[sliced].tiles;
    const int64_t blocks = (pr.N + rows_a_block - 1) / rows_a_block;
    if (blocks > 0x7fffffff) return Status(StatusCode::kInvalidArgument, "multiplies more rows than a grid holds");
    l.vector_fn = vector;
    l.vector_block_x = static_cast<unsigned>(32 * warps);
    l.vector_grid = static_cast<unsigned>(blocks);
    l.words[kWordMmaSplit] = pr.constant_weight ? kMmaSplitEarly : 0;
    return l;
  }
  const int r = weight_only_weight_rows(row_tile);
  const int64_t tiles = (pr.rows + row_tile - 1) / row_tile;
  const auto [split, n_blocks] = split_for(pr.N, r, tiles, sm_count, split_choice);
  const bool mma = weight_only_mma_applies(pr.dtype, pr.bits, row_tile, pr.K, pr.group);
  using F = WeightOnlyForm;
  const bool applies = form == F::kOneRow ? weight_only_one_row_applies(pr.dtype, pr.bits, row_tile, pr.rows, pr.K, pr.group)
                       : form == F::kFrag ? weight_only_frag_applies(pr.dtype, pr.bits, row_tile, pr.K, pr.group)
                                          : weight_only_ring_applies(pr.dtype, pr.bits, row_tile, pr.K, pr.group);
  const bool use_vector = vector && mma && applies;
  // The ring's warp groups take 32 weight rows, the register-fed tile's weight_only_frag_rows, the
  // others 16, as wo_mma's.
  const int group_rows = !use_vector           ? 16
                         : form == F::kRing ? kWeightOnlyRingRows
                         : form == F::kFrag ? weight_only_frag_rows(row_tile)
                                            : 16;
  const auto [mma_split, mma_blocks] =
      mma ? split_for(pr.N, group_rows, tiles, sm_count, split_choice) : std::pair<int, int64_t>{0, 0};
  if (std::max(n_blocks, mma_blocks) * tiles > 0x7fffffff)
    return Status(StatusCode::kInvalidArgument, "multiplies more rows than a grid holds");
  Launch l;
  l.fn = fn;
  l.overlaps = true;
  l.block_x = kWeightOnlyBlock;
  l.grid = l.vector_grid = l.scalar_grid = static_cast<unsigned>(n_blocks * tiles);
  if (mma) l.vector_grid = static_cast<unsigned>(mma_blocks * tiles);
  if (use_vector) l.vector_fn = vector;
  l.words = weight_only_problem_words(pr);
  l.words[kWordSplit] = split;
  l.words[kWordNBlocks] = n_blocks;
  l.words[kWordMmaSplit] = mma_split | (mma_split && pr.constant_weight ? kMmaSplitEarly : 0);
  l.words[kWordMmaBlocks] = mma_blocks;
  l.vector_word = kWordVec;
  return l;
}

Launch weight_only_dequantize_launch(const WeightOnlyProblem& pr, CUfunction fn, int sm_count) {
  Launch l;
  l.fn = fn;
  l.block_x = kWeightOnlyBlock;
  // A block per weight row, at most enough blocks to fill the GPU (the aligned form's lanes then
  // stride over every row's chunks together, the other form's blocks over the rows).
  l.grid = l.vector_grid = l.scalar_grid = static_cast<unsigned>(std::min<int64_t>(pr.N, int64_t{8} * sm_count));
  l.words = weight_only_problem_words(pr);
  l.vector_word = kWordVec;
  l.workspace_word = kWordOut;
  l.workspace_bytes = dequantized_bytes(pr);
  return l;
}

AlgoBytes weight_only_choice_bytes(WeightOnlyChoice c) {
  return {'W', static_cast<uint8_t>(c.tile), static_cast<uint8_t>(c.split), static_cast<uint8_t>(c.form)};
}

std::optional<WeightOnlyChoice> weight_only_choice(const AlgoBytes& stored) {
  // Three bytes: a choice stored before the register-fed tile existed (the ring, where it applied);
  // the fourth: 0 the ring, 1 the register-fed tile, 2 the one-row tile, 3 the few-rows tile, and
  // from 4 the K-sliced one-row tile's shapes, then the few-rows tile's.
  if ((stored.size() != 3 && stored.size() != 4) || stored[0] != 'W') return std::nullopt;
  // The K-sliced shapes' split is the warps a block (4, 8 or 16).
  if (stored.size() == 4 && stored[3] >= kWeightOnlyForms) return std::nullopt;
  WeightOnlyChoice c{stored[1], stored[2], static_cast<WeightOnlyForm>(stored.size() == 4 ? stored[3] : 0)};
  const auto& warps = kWeightOnlySlicedWarps;
  const bool split_ok = weight_only_split_is_warps(c.form)
                            ? std::find(std::begin(warps), std::end(warps), c.split) != std::end(warps)
                            : c.split == 1 || c.split == 2 || c.split == 4 || c.split == 8;
  if (!is_row_tile(c.tile) || !split_ok) return std::nullopt;  // a damaged file: the launch's own choice
  return c;
}

Status load_weight_only_dot(const Program& p, const Kernel& k, CUmodule module, const std::string& function,
                            KernelCode& code) {
  // The GPU's builder gates no product (PassRules::weight_only_fold): a file that says otherwise
  // was not written by it.
  if (k.weight_only_dot.gated)
    return Status(StatusCode::kDataLoss, "kernel '" + k.name + "' gates its x, which the GPU's kernels do not");
  code.row_tile = weight_only_function_tile(function);
  if (code.row_tile == 0)
    return Status(StatusCode::kDataLoss, "kernel '" + k.name + "' names no weight-only entry point: '" + function + "'");
  // Another dtype's or format's entry point would read the weight's bytes with another row length.
  const DType t = p.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
  const int bits = weight_only_format(p, k);
  if (function != weight_only_function(t, bits, code.row_tile))
    return Status(StatusCode::kDataLoss, "kernel '" + k.name + "' names entry point '" + function +
                                             "', not one for its x and weight");
  TRIPY_CUDA_TRY(cuModuleGetFunction(&code.fn, module, function.c_str()));
  // The aligned form's entry points, where the module has them (a file saved before they existed
  // has not).
  const std::string ring = function + kRingSuffix;
  const std::string frag = weight_only_frag_function(t, bits, code.row_tile);
  const std::string one_row = function + kOneRowSuffix, one_row_short = function + kOneRowShortSuffix;
  if (code.row_tile != kWeightOnlyMmaRows ||
      api().cuModuleGetFunction(&code.vector_fn, module, ring.c_str()) != CUDA_SUCCESS)
    code.vector_fn = nullptr;
  if (!weight_only_frag_tile(t, bits, code.row_tile) ||
      api().cuModuleGetFunction(&code.frag_fn, module, frag.c_str()) != CUDA_SUCCESS)
    code.frag_fn = nullptr;
  if (!weight_only_one_row_tile(t, bits, code.row_tile) ||
      api().cuModuleGetFunction(&code.one_row_fn, module, one_row.c_str()) != CUDA_SUCCESS)
    code.one_row_fn = nullptr;
  if (!code.one_row_fn || !weight_only_one_row_short(bits, kWeightOnlyOneRowShortK) ||
      api().cuModuleGetFunction(&code.one_row_short_fn, module, one_row_short.c_str()) != CUDA_SUCCESS)
    code.one_row_short_fn = nullptr;  // a file saved before the short rows' entry point existed
  // The K-sliced tile's shapes, where the module has them (saved since they existed).
  for (int i = 0; i < static_cast<int>(std::size(kWeightOnlySliced)); ++i)
    if (!weight_only_one_row_tile(t, bits, code.row_tile) ||
        api().cuModuleGetFunction(&code.sliced_fn[i], module, weight_only_sliced_function(t, bits, i).c_str()) !=
            CUDA_SUCCESS)
      code.sliced_fn[i] = nullptr;
  // A folded product's entry points, which it runs alone: the K-sliced one-row tile's of its fold
  // (the module of 8 rows; a norm or a residual, not both, or a gated output) or the few-rows
  // tile's (the module of 16 rows; not a gated output), and the CUDA-core fold.
  const WeightOnlyDotAttrs& fold = k.weight_only_dot;
  if (fold.norm || fold.residual || fold.gate_output) {
    auto get = [&](CUfunction& fn, const std::string& name) {
      return api().cuModuleGetFunction(&fn, module, name.c_str()) == CUDA_SUCCESS;
    };
    const bool one_row = code.row_tile == kWeightOnlyMmaRows;
    bool all = (one_row ? weight_only_one_row_tile(t, bits, code.row_tile) && weight_only_sliced_fold_entry(bits, fold)
                        : weight_only_few_rows_tile(t, bits, code.row_tile) && weight_only_fold_format(bits) &&
                              !(fold.gate_output && fold.residual)) &&
               get(code.fold_rows_fn, weight_only_fold_rows_function(t, bits, code.row_tile));
    const WeightOnlySlicedFold kind = weight_only_sliced_fold(fold);
    for (int i = 0; all && one_row && i < static_cast<int>(std::size(kWeightOnlySliced)); ++i)
      all = get(code.sliced_fold_fn[i], weight_only_sliced_fold_function(t, bits, i, kind));
    for (int i = 0; all && !one_row && i < static_cast<int>(std::size(kWeightOnlyFewSliced)); ++i)
      all = get(code.few_sliced_fold_fn[i], weight_only_few_sliced_fold_function(t, bits, i, fold.gate_output));
    if (all && !one_row) all = get(code.few_x_fold_fn, weight_only_few_x_fold_function(t, bits));
    if (!all)
      return Status(StatusCode::kDataLoss, "kernel '" + k.name +
                                               "' normalizes its x, adds a residual or gates its output, and its "
                                               "module has no entry point for that");
  }
  // The dequantization, where the module has it (saved since it existed).
  const std::string dequantize = function + kDequantizeSuffix;
  if (code.row_tile != kWeightOnlyMmaRows ||
      api().cuModuleGetFunction(&code.dequantize_fn, module, dequantize.c_str()) != CUDA_SUCCESS)
    code.dequantize_fn = nullptr;
  // The many-rows tile's, where the module has them all (saved since they existed).
  for (int i = 0; i < 2; ++i)
    for (const bool layout : {false, true}) {
      CUfunction& f = layout ? code.many_rows_x_fn[i] : code.many_rows_fn[i];
      const std::string name = weight_only_many_rows_function(t, bits, i == 0 ? 64 : 32, layout);
      if (code.row_tile != kWeightOnlyMmaRows || !weight_only_frag_tile(t, bits, code.row_tile) ||
          api().cuModuleGetFunction(&f, module, name.c_str()) != CUDA_SUCCESS)
        f = nullptr;
    }
  if (!code.many_rows_fn[0] || !code.many_rows_fn[1] || !code.many_rows_x_fn[0] || !code.many_rows_x_fn[1])
    code.many_rows_fn[0] = code.many_rows_fn[1] = code.many_rows_x_fn[0] = code.many_rows_x_fn[1] = nullptr;
  // The few-rows tile's K-sliced shapes, where the module has them (saved since they existed).
  for (int i = 0; i < static_cast<int>(std::size(kWeightOnlyFewSliced)); ++i)
    if (!weight_only_few_rows_tile(t, bits, code.row_tile) ||
        api().cuModuleGetFunction(&code.few_sliced_fn[i], module, weight_only_few_sliced_function(t, bits, i).c_str()) !=
            CUDA_SUCCESS)
      code.few_sliced_fn[i] = nullptr;
  // The few-rows tile's and its layout's, where the module has both (saved since they existed).
  const std::string few = weight_only_few_rows_function(t, bits, false), few_x = weight_only_few_rows_function(t, bits, true);
  if (!weight_only_few_rows_tile(t, bits, code.row_tile) ||
      api().cuModuleGetFunction(&code.few_rows_fn, module, few.c_str()) != CUDA_SUCCESS ||
      api().cuModuleGetFunction(&code.few_rows_x_fn, module, few_x.c_str()) != CUDA_SUCCESS)
    code.few_rows_fn = code.few_rows_x_fn = nullptr;
  return ok_status();
}

WeightOnlyManyRows weight_only_many_rows_shape(int64_t N, int64_t rows, int sm_count) {
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  WeightOnlyManyRows m;
  if (ceil_div(N, 128) * ceil_div(rows, 64) * 10 >= int64_t{7} * sm_count) {
    m.x_rows = 64, m.split = 1;
  } else {
    m.x_rows = 32, m.split = std::min(2, split_for(N, 16, ceil_div(rows, 32), sm_count, 0).first);
  }
  m.blocks = ceil_div(N, (8 / m.split) * 16) * ceil_div(rows, m.x_rows);
  return m;
}

namespace {

// The many-rows tile's two launches (x's layout into the workspace, then the tile reading it), or
// none where the weight's address may be off 16 bytes (the dequantized weight's GEMM then runs; x
// may be: its layout then reads it a value at a time, the launch's scalar form).
std::optional<std::vector<Launch>> weight_only_many_rows_launches(PlanContext& c, const Kernel& k,
                                                                  const WeightOnlyProblem& pr, const KernelCode& code) {
  const WeightOnlyManyRows m = weight_only_many_rows_shape(pr.N, pr.rows, c.sm_count);
  const int shape = m.x_rows == 64 ? 0 : 1;
  const int64_t x_rows = m.x_rows, tiles = (pr.rows + x_rows - 1) / x_rows;
  const int64_t layout_bytes = (tiles * x_rows * pr.K * 2 + 255) / 256 * 256;
  Launch x;
  x.fn = code.many_rows_x_fn[shape];
  x.overlaps = true;
  x.block_x = kWeightOnlyBlock;
  x.grid = grid_for(tiles * x_rows * pr.K / 8, kWeightOnlyBlock, c.sm_count);
  x.words = weight_only_problem_words(pr);
  x.ptrs = {{kWordX, k.inputs[0], 0}};
  x.vector_word = kWordVec;
  x.vector_grid = x.scalar_grid = x.grid;
  x.workspace_word = kWordOut;
  x.workspace_bytes = layout_bytes;
  Launch t;
  t.fn = code.many_rows_fn[shape];
  t.overlaps = true;
  t.block_x = kWeightOnlyBlock;
  t.grid = static_cast<unsigned>(m.blocks);
  t.words = weight_only_problem_words(pr);
  t.words[kWordMmaSplit] = m.split | (pr.constant_weight ? kMmaSplitEarly : 0);
  // Only the weight is read in 16-byte pieces (the output, scales and zero points a value at a time).
  t.ptrs = {{kWordOut, k.outputs[0], 0, true}, {kWordW, k.inputs[1], 0}, {kWordScale, k.inputs[2], 0, true}};
  if (pr.zero) t.ptrs.push_back({kWordZero, k.inputs[3], 0, true});
  t.workspace_word = kWordX;
  if (!always_aligned(c.program, t)) return std::nullopt;
  if (debug_level() >= 1)
    std::fprintf(stderr, "tripy: weight-only dot '%s' at %lld rows: the many-rows tile, %lld rows of x a block\n",
                 k.name.c_str(), static_cast<long long>(pr.rows), static_cast<long long>(x_rows));
  c.workspace = std::max(c.workspace, static_cast<size_t>(layout_bytes));
  return std::vector<Launch>{std::move(x), std::move(t)};
}

}  // namespace

StatusOr<bool> plan_weight_only_dot_step(PlanContext& c, const Kernel& k, Step& step) {
  const std::vector<int64_t>& x = c.shapes[static_cast<size_t>(k.inputs[0])];
  const std::vector<int64_t>& w = c.shapes[static_cast<size_t>(k.inputs[1])];
  const std::vector<int64_t>& scale = c.shapes[static_cast<size_t>(k.inputs[2])];
  const int64_t out_elements = numel_of(c.shapes[static_cast<size_t>(k.outputs[0])]);
  if (out_elements == 0) return false;
  const WeightOnlyProblem pr = weight_only_problem(c.program, k, x, w, scale, out_elements);
  const KernelCode& code = c.code[static_cast<size_t>(step.kernel)];
  if (pr.fold) return plan_weight_only_fold_step(c, k, step, pr, code);
  if (code.many_rows_fn[0] && weight_only_many_rows_applies(pr.dtype, pr.bits, pr.rows, pr.K, pr.group)) {
    std::optional<std::vector<Launch>> l = weight_only_many_rows_launches(c, k, pr, code);
    if (l) {
      step.launches = std::move(*l);
      return true;
    }
  }
  if (pr.rows >= kWeightOnlyGemmRows && code.dequantize_fn) {
    // x [rows, K] @ W.T with W the dequantized [N, K] (cuBLASLt's A, transposed), as a kDot of a
    // tp.Linear plans it.
    DotProblem dot;
    dot.dtype = dot.operand = pr.dtype;
    dot.trans_a = true;
    dot.m = pr.N, dot.n = pr.rows, dot.k = pr.K;
    auto plan = DotPlan::create(dot, nullptr, 256, kDotWorkspaceBytes);
    if (!plan.ok()) return Status(plan.status()).at(kernel_source(c.program, step.kernel));
    step.dot = std::move(plan.value());
    step.dequantize = weight_only_dequantize_launch(pr, code.dequantize_fn, c.sm_count);
    step.dequantize.ptrs = {{kWordW, k.inputs[1], 0}, {kWordScale, k.inputs[2], 0}};
    if (pr.zero) step.dequantize.ptrs.push_back({kWordZero, k.inputs[3], 0});
    c.workspace = std::max(c.workspace, static_cast<size_t>(dequantized_bytes(pr)) + step.dot->workspace_bytes());
    return true;
  }
  const std::optional<WeightOnlyChoice> tuned = weight_only_choice(code.algo);
  // The form the timing chose where the module holds it and it applies at these rows: the one-row
  // tile at one row of x, the few-rows tile where the weight is aligned; else the register-fed
  // tile where the module has one; else the ring.
  using F = WeightOnlyForm;
  const F chosen = tuned ? tuned->form : F::kRing;
  const int few_sliced_index = weight_only_sliced_index(chosen, F::kFewSliced);
  const bool few_chosen = (chosen == F::kFewRows && code.few_rows_fn) ||
                          (few_sliced_index >= 0 && code.few_sliced_fn[few_sliced_index] && code.few_rows_x_fn);
  if (few_chosen && pr.rows <= code.row_tile &&
      weight_only_few_rows_applies(pr.dtype, pr.bits, code.row_tile, pr.K, pr.group)) {
    std::vector<Launch> l =
        few_sliced_index >= 0
            ? weight_only_few_sliced_launches(pr, code.few_sliced_fn[few_sliced_index], code.few_rows_x_fn,
                                              c.sm_count, few_sliced_index, tuned->split)
            : weight_only_few_rows_launches(pr, code.few_rows_fn, code.few_rows_x_fn, c.sm_count, tuned->split);
    l[0].ptrs = {{kWordX, k.inputs[0], 0}};
    // Only the weight is read in 16-byte pieces (the output, scales and zero points a value at a time).
    l[1].ptrs = {{kWordOut, k.outputs[0], 0, true}, {kWordW, k.inputs[1], 0}, {kWordScale, k.inputs[2], 0, true}};
    if (pr.zero) l[1].ptrs.push_back({kWordZero, k.inputs[3], 0, true});
    if (always_aligned(c.program, l[1])) {
      if (debug_level() >= 1 && few_sliced_index >= 0)
        std::fprintf(stderr,
                     "tripy: weight-only dot '%s' at %lld rows: the few-rows K-sliced tile, %d tiles of 16 rows and "
                     "%u warps a block\n",
                     k.name.c_str(), static_cast<long long>(pr.rows), kWeightOnlyFewSliced[few_sliced_index].tiles,
                     l[1].block_x / 32);
      else if (debug_level() >= 1)
        std::fprintf(stderr, "tripy: weight-only dot '%s' at %lld rows: the few-rows tile, %lld warps a group\n",
                     k.name.c_str(), static_cast<long long>(pr.rows),
                     static_cast<long long>(l[1].words[kWordMmaSplit] & (kMmaSplitEarly - 1)));
      c.workspace = std::max(c.workspace, static_cast<size_t>(l[0].workspace_bytes));
      step.launches = std::move(l);
      return true;
    }
  }
  const int sliced_index = weight_only_sliced_index(chosen);
  const bool sliced = sliced_index >= 0 && code.sliced_fn[sliced_index] &&
                      weight_only_sliced_applies(pr.dtype, pr.bits, code.row_tile, pr.rows, pr.K, pr.group);
  const bool one_row = chosen == F::kOneRow && code.one_row_fn &&
                       weight_only_one_row_applies(pr.dtype, pr.bits, code.row_tile, pr.rows, pr.K, pr.group);
  const bool frag = !one_row && !sliced && chosen != F::kRing && code.frag_fn;
  const F form = sliced ? chosen : one_row ? F::kOneRow : frag ? F::kFrag : F::kRing;
  const CUfunction row_fn =
      weight_only_one_row_short(pr.bits, pr.K) && code.one_row_short_fn ? code.one_row_short_fn : code.one_row_fn;
  // A sliced choice's split is its warps a block: another form runs with its own split.
  const int split = tuned && (sliced || !weight_only_split_is_warps(chosen)) ? tuned->split : 0;
  StatusOr<Launch> l = weight_only_launch(pr, code.row_tile, code.fn, c.sm_count, split,
                                          sliced    ? code.sliced_fn[sliced_index]
                                          : one_row ? row_fn
                                          : frag    ? code.frag_fn
                                                    : code.vector_fn,
                                          form);
  if (!l.ok()) return kernel_failure(c.program, k, l.status().message(), l.status().code());
  if (debug_level() >= 1 && l->vector_fn && sliced)  // which form the aligned launch takes (tests read it)
    std::fprintf(stderr,
                 "tripy: weight-only dot '%s' at %lld rows: the K-sliced tile, %d tiles of 16 rows and %u warps a "
                 "block\n",
                 k.name.c_str(), static_cast<long long>(pr.rows), kWeightOnlySliced[sliced_index].tiles,
                 l->vector_block_x / 32);
  else if (debug_level() >= 1 && l->vector_fn)
    std::fprintf(stderr, "tripy: weight-only dot '%s' at %lld rows: %s, %lld warps a group\n", k.name.c_str(),
                 static_cast<long long>(pr.rows),
                 one_row ? "the one-row tile" : frag ? "the register-fed tile" : "the ring",
                 static_cast<long long>(l->words[kWordMmaSplit] & (kMmaSplitEarly - 1)));
  l->ptrs = {{kWordOut, k.outputs[0], 0}, {kWordX, k.inputs[0], 0}, {kWordW, k.inputs[1], 0},
             {kWordScale, k.inputs[2], 0}};
  if (pr.zero) l->ptrs.push_back({kWordZero, k.inputs[3], 0});
  step.launches = {std::move(l.value())};
  return true;
}

Status run_weight_only_dot_step(Step& step, const Kernel& k, const RunContext& c) {
  if (!step.dot) return ok_status();  // the tiles' launch
  Launch& l = step.dequantize;
  const size_t bytes = static_cast<size_t>(l.workspace_bytes);
  if (c.workspace_bytes < bytes + step.dot->workspace_bytes())
    return Status(StatusCode::kInternal, "the weight-only dot's workspace is smaller than its plan asked")
        .at(kernel_source(c.program, step.kernel));
  l.words[l.workspace_word] = static_cast<int64_t>(c.workspace);  // outside step.launches: patched here
  TRIPY_RETURN_IF_ERROR(launch(l, c.base, c.stream));
  return run_step_dot(step, c, nullptr, c.workspace, c.base[k.inputs[0]], 0, c.base[k.outputs[0]],
                      c.workspace + bytes, c.workspace_bytes - bytes);
}

}  // namespace tripy::rt::cuda

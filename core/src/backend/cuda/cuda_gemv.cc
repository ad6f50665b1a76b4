// The GEMV tactic of kDot: when it applies, its stored form, its entry points and its launch
// (the kernel: codegen/kernels/gemv.cuh, whose GemvArgs the words are).
#include "backend/cuda/cuda_gemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tripy::rt::cuda {
namespace {

constexpr char kTag[4] = {'G', 'E', 'M', 'V'};
constexpr uint8_t kTmaTag = 'T';
enum {
  kWordOut, kWordX, kWordW, kWordBias, kWordM, kWordN, kWordK, kWordAct, kWordSplit, kWordVec, kWordEarly, kWords
};
// The TMA form's words after GemvArgs' (kernels/gemv.cuh's GemvTmaArgs): its split, its blocks
// along N, and w's tensor map at word 16 (128 bytes, 64-byte aligned), 32 words in all.
enum { kWordTmaSplit = kWords, kWordTmaBlocks, kWordMap = 16, kTmaWords = 32 };
constexpr uint32_t kTmaBoxRows = 16, kTmaBoxBytes = 128;  // gemv_tma's box: 16 rows x 64 elements

int row_tile(int64_t m) {
  for (int t : kGemvRowTiles)
    if (m <= t) return t;
  return kGemvMaxRows;
}

// The tactic a tile runs: the tuned one on CUDA cores; on tensor cores always one 16-row tile a
// block with its 8 warps dividing K (a tactic tuned at one row, e.g. 2 rows a warp, would make a
// block cover 256 rows there and leave most SMs idle).
GemvTactic tile_tactic(int mt, GemvTactic t) {
  if (mt >= kGemvMmaRows) return t.tma ? t : GemvTactic{1, 8};
  return {t.rows, t.split};  // a TMA choice's split on the CUDA-core rows
}

bool tma_tile(const DotProblem& pr, GemvTactic t) { return t.tma && row_tile(pr.n) >= kGemvMmaRows; }

int64_t blocks_for(int64_t rows, int split, int64_t group_rows) {
  const int64_t per_block = int64_t{kGemvBlock / 32 / split} * group_rows;
  return (rows + per_block - 1) / per_block;
}

Launch gemv_launch(const DotProblem& pr, GemvTactic tuned, CUfunction fn) {
  Launch l;
  l.fn = fn;
  l.overlaps = true;
  l.block_x = kGemvBlock;
  const int mt = row_tile(pr.n);
  // A TMA tactic's words serve its fallback, gemv_mma's one launch, as well.
  const GemvTactic t = tma_tile(pr, tuned) ? tile_tactic(mt, GemvTactic{}) : tile_tactic(mt, tuned);
  l.grid = l.vector_grid = l.scalar_grid =
      static_cast<unsigned>(blocks_for(pr.m, t.split, gemv_group_rows(mt, gemv_weight_rows(mt, t.rows))));
  l.words.assign(kTmaWords, 0);
  l.words[kWordM] = pr.n;  // cuBLASLt's n is the rows of x, its m the rows of W
  l.words[kWordN] = pr.m;
  l.words[kWordK] = pr.k;
  l.words[kWordAct] = static_cast<int64_t>(pr.activation);
  l.words[kWordSplit] = t.split;
  l.vector_word = kWordVec;
  if (tma_tile(pr, tuned)) {
    const int64_t blocks = blocks_for(pr.m, tuned.split, 16);
    l.vector_grid = static_cast<unsigned>(blocks);
    l.words[kWordTmaSplit] = tuned.split;
    l.words[kWordTmaBlocks] = blocks;
    l.tensor_map = {kWordMap, kWordW, pr.m, pr.k * dtype_size(pr.dtype), kTmaBoxRows, kTmaBoxBytes};
  }
  return l;
}

}  // namespace

bool gemv_applies(const DotProblem& pr) {
  return (pr.dtype == DType::kFloat16 || pr.dtype == DType::kBFloat16) && !pr.quantized() && pr.trans_a &&
         !pr.trans_b && pr.batch == 1 && pr.offset_a.size() == 1 && pr.offset_a[0] == 0 && pr.offset_b[0] == 0 &&
         pr.offset_c[0] == 0 && !pr.residual &&
         (pr.activation == Activation::kNone || pr.activation == Activation::kRelu ||
          pr.activation == Activation::kGelu) &&
         pr.n >= 1 && pr.n <= kGemvMaxRows && pr.m >= 1 && pr.k >= 1 && pr.m < (int64_t{1} << 31);
}

std::vector<GemvTactic> gemv_tactics() { return {{1, 1}, {2, 1}, {4, 1}, {2, 2}, {1, 4}, {1, 8}}; }

std::vector<GemvTactic> gemv_tactics(const DotProblem& pr, int arch) {
  const int mt = row_tile(pr.n);
  if (mt < kGemvMmaRows) return gemv_tactics();
  std::vector<GemvTactic> out{tile_tactic(mt, {})};
  // TMA rows are 16-byte multiples (the tensor map's row stride).
  if (arch >= kGemvTmaArch && pr.k * dtype_size(pr.dtype) % 16 == 0)
    for (int split : {1, 2, 4, 8}) out.push_back({1, split, true});
  return out;
}

AlgoBytes gemv_choice_bytes(GemvTactic t) {
  AlgoBytes b(kTag, kTag + sizeof(kTag));
  b.push_back(static_cast<uint8_t>(t.rows));
  b.push_back(static_cast<uint8_t>(t.split));
  if (t.tma) b.push_back(kTmaTag);
  return b;
}

std::optional<GemvTactic> gemv_choice(const AlgoBytes& b) {
  const size_t n = sizeof(kTag) + 2;
  if ((b.size() != n && b.size() != n + 1) || std::memcmp(b.data(), kTag, sizeof(kTag)) != 0) return std::nullopt;
  GemvTactic t{b[4], b[5], b.size() == n + 1};
  bool rows_ok = false;
  for (int r : kGemvWeightRows) rows_ok |= r == t.rows;
  if (!rows_ok || (t.split != 1 && t.split != 2 && t.split != 4 && t.split != 8)) return std::nullopt;
  if (t.tma && (b[n] != kTmaTag || t.rows != 1)) return std::nullopt;
  return t;
}

int gemv_weight_rows(int row_tile, int rows) {
  while (rows > 1 && row_tile * rows > kGemvMaxSums) rows /= 2;
  return rows;
}

bool gemv_entry_exists(int row_tile, int weight_rows) {
  return gemv_weight_rows(row_tile, weight_rows) == weight_rows && (row_tile < kGemvMmaRows || weight_rows == 1);
}

int gemv_ahead_steps() {
  static const int steps = [] {
    const char* v = std::getenv("TRIPY_GEMV_AHEAD");
    const int n = v != nullptr ? std::atoi(v) : 1;
    return n >= 1 && n <= 8 ? n : 1;
  }();
  return steps;
}

int gemv_group_rows(int row_tile, int weight_rows) { return row_tile >= kGemvMmaRows ? 16 * weight_rows : weight_rows; }

std::string gemv_function(DType t, int row_tile, int weight_rows) {
  return std::string("tripy_gemv_") + float_suffix(t) + "_m" + std::to_string(row_tile) + "_r" +
         std::to_string(weight_rows);
}

std::string gemv_tma_function(DType t, int row_tile) {
  return std::string("tripy_gemv_") + float_suffix(t) + "_m" + std::to_string(row_tile) + "_tma";
}

std::vector<std::string> gemv_functions(DType t) {
  std::vector<std::string> names;
  for (int mt : kGemvRowTiles) {
    for (int r : kGemvWeightRows)
      if (gemv_entry_exists(mt, r)) names.push_back(gemv_function(t, mt, r));
    if (mt >= kGemvMmaRows) names.push_back(gemv_tma_function(t, mt));
  }
  return names;
}

std::string gemv_function_for(const DotProblem& pr, GemvTactic t) {
  const int mt = row_tile(pr.n);
  if (tma_tile(pr, t)) return gemv_tma_function(pr.dtype, mt);
  return gemv_function(pr.dtype, mt, gemv_weight_rows(mt, tile_tactic(mt, t).rows));
}

std::string gemv_fallback_for(const DotProblem& pr, GemvTactic t) {
  return gemv_function_for(pr, GemvTactic{t.rows, t.split});
}

std::set<std::string> gemv_functions_for(const DotProblem& problem, int64_t m_lo, int64_t m_hi, GemvTactic tactic) {
  std::set<std::string> out;
  for (int64_t m = std::max<int64_t>(m_lo, 1); m <= std::min<int64_t>(m_hi, kGemvMaxRows); ++m) {
    DotProblem at = problem;
    at.n = m;  // x's rows (the transposition trick's n)
    if (!gemv_applies(at)) continue;
    out.insert(gemv_function_for(at, tactic));
    out.insert(gemv_fallback_for(at, tactic));
  }
  return out;
}

Launch plan_gemv(const DotProblem& pr, GemvTactic t, CUfunction fn, CUfunction fallback, int32_t out, int32_t x,
                 int32_t w, int32_t bias, bool w_constant) {
  Launch l = gemv_launch(pr, t, fn);
  if (tma_tile(pr, t)) {
    l.fn = fallback;
    l.vector_fn = fn;
  }
  l.words[kWordEarly] = w_constant ? 1 : 0;
  l.ptrs = {{kWordOut, out, 0}, {kWordX, x, 0}, {kWordW, w, 0}};
  if (bias >= 0) l.ptrs.push_back({kWordBias, bias, 0});
  return l;
}

Status run_gemv(const DotProblem& pr, GemvTactic t, CUfunction fn, CUdeviceptr out, CUdeviceptr x, CUdeviceptr w,
                CUdeviceptr bias, CUstream stream) {
  Launch l = gemv_launch(pr, t, fn);
  l.words[kWordOut] = static_cast<int64_t>(out);
  l.words[kWordX] = static_cast<int64_t>(x);
  l.words[kWordW] = static_cast<int64_t>(w);
  l.words[kWordBias] = pr.bias ? static_cast<int64_t>(bias) : 0;
  l.words[kWordVec] = ((out | x | w | (pr.bias ? bias : 0)) & 15) == 0 ? 1 : 0;
  l.words[kWordEarly] = pr.constant_weight ? 1 : 0;
  if (tma_tile(pr, t)) {
    if (!l.words[kWordVec]) return Status(StatusCode::kInvalidArgument, "the TMA form needs 16-byte aligned operands");
    TRIPY_RETURN_IF_ERROR(encode_tensor_map(l));
    l.grid = l.vector_grid;
  }
  void* params[] = {l.words.data()};
  return launch_overlapping(fn, l.grid, l.block_x, 1, params, stream);
}

}  // namespace tripy::rt::cuda

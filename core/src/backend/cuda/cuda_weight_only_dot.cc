// kWeightOnlyDot's entry point and launch (the kernel: codegen/kernels/weight_only_dot.cuh, whose
// WoArgs the words are). A block of 8 warps takes 8 / split groups of R weight rows and one tile
// of MT rows of x; split grows (more warps to a row) until the grid covers the GPU twice.
#include "backend/cuda/cuda_weight_only_dot.h"

#include <iterator>

namespace tripy::rt::cuda {
namespace {

enum {
  kWordOut, kWordX, kWordW, kWordScale, kWordZero, kWordRows, kWordN, kWordK, kWordRowBytes, kWordGroups,
  kWordGroup, kWordSplit, kWordNBlocks, kWordVec, kWords
};

}  // namespace

int weight_only_row_tile(const Program& p, const Kernel& k) {
  const BufferDesc& x = p.buffers[static_cast<size_t>(k.inputs.at(0))];
  const Slot ks = x.shape.back();
  const ShapeInstr& kdim = p.shape_program[static_cast<size_t>(ks)];
  int64_t rows = 1 << 30;  // K unknown at build: the largest tile
  if (kdim.op == ShapeInstr::Op::kConst && kdim.a > 0) rows = x.max_bytes / (kdim.a * dtype_size(x.dtype));
  for (int t : kWeightOnlyRowTiles)
    if (rows <= t) return t;
  return kWeightOnlyRowTiles[std::size(kWeightOnlyRowTiles) - 1];
}

std::string weight_only_function(DType t, int bits, int row_tile) {
  return std::string("tripy_weight_only_dot_") + float_suffix(t) + "_b" + std::to_string(bits) + "_m" +
         std::to_string(row_tile);
}

StatusOr<bool> plan_weight_only_dot_step(PlanContext& c, const Kernel& k, Step& step) {
  const std::vector<int64_t>& x = c.shapes[static_cast<size_t>(k.inputs[0])];
  const std::vector<int64_t>& w = c.shapes[static_cast<size_t>(k.inputs[1])];
  const std::vector<int64_t>& scale = c.shapes[static_cast<size_t>(k.inputs[2])];
  const int64_t N = w[0], K = x.back();
  const int64_t out_elements = numel_of(c.shapes[static_cast<size_t>(k.outputs[0])]);
  if (out_elements == 0) return false;
  const int64_t rows = out_elements / N;
  const int mt = weight_only_row_tile(c.program, k), r = weight_only_weight_rows(mt);
  const int64_t tiles = (rows + mt - 1) / mt;
  int split = 1;
  int64_t n_blocks = 0;
  for (; split <= 8; split *= 2) {
    const int64_t rows_per_block = int64_t{kWeightOnlyBlock / 32 / split} * r;
    n_blocks = (N + rows_per_block - 1) / rows_per_block;
    if (n_blocks * tiles >= 2 * c.sm_count || split == 8) break;
  }
  if (n_blocks * tiles > 0x7fffffff)
    return kernel_failure(c.program, k, "multiplies more rows than a grid holds", StatusCode::kInvalidArgument);
  Launch l;
  l.fn = c.code[static_cast<size_t>(step.kernel)].fn;
  l.block_x = kWeightOnlyBlock;
  l.grid = l.vector_grid = l.scalar_grid = static_cast<unsigned>(n_blocks * tiles);
  l.words.assign(kWords, 0);
  l.words[kWordRows] = rows;
  l.words[kWordN] = N;
  l.words[kWordK] = K;
  l.words[kWordRowBytes] = w[1];
  l.words[kWordGroups] = scale[1];
  l.words[kWordGroup] = k.weight_only_dot.group_size;
  l.words[kWordSplit] = split;
  l.words[kWordNBlocks] = n_blocks;
  l.vector_word = kWordVec;
  l.ptrs = {{kWordOut, k.outputs[0], 0}, {kWordX, k.inputs[0], 0}, {kWordW, k.inputs[1], 0},
            {kWordScale, k.inputs[2], 0}};
  if (k.weight_only_dot.has_zero) l.ptrs.push_back({kWordZero, k.inputs[3], 0});
  step.launches = {l};
  return true;
}

}  // namespace tripy::rt::cuda

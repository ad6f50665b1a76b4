// What the runtime knows of generated CUDA kernels: the argument layout of a fused kernel and the
// function names of the fixed layout module. The generated kernels take one argument, a by-value
// array of 64-bit words whose layout FusedLayout describes, so the host fills it without knowing
// the source (which codegen/cuda_sources.h generates, on the compiler side).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

// The argument word layout of a generated fused kernel. Words: outputs, inputs (pointers), then
// sizes[rank], strides[num_inputs][rank], then kMisc* scalars.
struct FusedLayout {
  int32_t num_inputs = 0, num_outputs = 0, rank = 0, reduce_from = 0;
  bool has_reduction = false;
  bool has_iota = false;                 // axes may not be merged: kIota reads coordinates
  std::vector<uint8_t> output_row_level;  // per output
  int32_t vec_width = 0;                  // elements per wide load in the vector path (0: none)
  // Reductions: a row is blockDim.x threads (32..kReduceBlock), blockDim.y rows per block of at
  // most kReduceBlock threads. Each thread keeps up to kRowCacheVector wide loads (vector path) or
  // kRowCacheScalar elements of each row-varying input in registers; longer rows re-load.
  static constexpr int kReduceBlock = 256, kRowCacheVector = 4, kRowCacheScalar = 8, kMaxRowsPerBlock = 8;
  int32_t word_count() const { return num_outputs + num_inputs + rank * (1 + num_inputs) + kMiscCount; }
  int32_t size_word(int32_t d) const { return num_outputs + num_inputs + d; }
  int32_t stride_word(int32_t input, int32_t d) const {
    return num_outputs + num_inputs + rank + input * rank + d;
  }
  int32_t misc_word(int32_t m) const { return num_outputs + num_inputs + rank * (1 + num_inputs) + m; }
  // kMiscRows: rows (elements when no reduction); kMiscRowLen: reduced elements per row;
  // kMiscRowLo / kMiscRedLo: first used position in each part after axis merging;
  // kMiscVector: 1 to take the vectorised path; kMiscSmall: 1 when 32-bit indices suffice.
  enum { kMiscRows, kMiscRowLen, kMiscRowLo, kMiscRedLo, kMiscVector, kMiscSmall, kMiscCount };
};

// Analyses and checks a fused kernel (operand kinds, ops defined for them, outputs): load()
// needs the layout to fill the argument words.
StatusOr<FusedLayout> analyze_fused(const Program& program, const Kernel& kernel);

// The fixed layout module's functions (its source: codegen/cuda_sources.h, layout_module_source):
// strided copies (transpose, slice, concat, copy), gather, update_slice and in-place erf-GELU.
// (The tuner's fill kernels are the build side's: codegen/cuda_sources.h.)
std::string copy_function(int elem_size);                 // tripy_copy_<n>
std::string gather_function(int elem_size, DType index);  // tripy_gather_<n>_<i32|i64>
std::string update_function(int elem_size, DType index);  // tripy_update_<n>_<i32|i64> (update_slice rows)
std::string gelu_function(DType t);                       // tripy_gelu_<f32|f16|bf16>
// Every program's module has the copies and GELU; the gathers and updates form a module of their
// own, built only into programs that gather or update (NVRTC takes ~1.4 s over it).
std::vector<std::string> layout_module_functions();
std::vector<std::string> index_module_functions();
// "f32", "f16" or "bf16": the suffix of every per-float-dtype function name (GELU, fill, conv).
const char* float_suffix(DType t);

}  // namespace tripy::rt::cuda

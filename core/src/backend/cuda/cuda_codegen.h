// CUDA C++ generation for fused kernels (one kernel per FusedProgram) and the fixed layout module.
// The generated kernels take one argument, a by-value array of 64-bit words whose layout
// FusedLayout describes, so the host fills it without knowing the source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

// How registers are held while computing, as the CPU backend does: narrow floats in float,
// narrow ints in int, bool as bool.
using CKind = ComputeKind;
const char* ctype(CKind k);        // "float", "int", "long long", "bool"
const char* storage_type(DType t);  // the C type of one stored element
// Expression converting stored element `x` (of type storage_type(t)) to its compute kind, and
// back; and one rounding a compute value to what `t` can represent.
std::string load_expr(DType t, const std::string& x);
std::string store_expr(DType t, const std::string& x);
std::string narrow_expr(DType t, const std::string& x);

// The C++ expression of one instruction over operand expressions, or "" when the op is not
// defined for the operands' kind (the caller reports it). Not for kLoad/kConst/kIota/reductions.
std::string ew_expr(const Instr& in, CKind operand, const std::string& a, const std::string& b,
                    const std::string& c);
// kConst: a literal of the compute kind, rounded to `dtype`.
std::string const_literal(DType dtype, double imm);

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

// Analyses and checks a fused kernel (operand kinds, ops defined for them, outputs).
StatusOr<FusedLayout> analyze_fused(const Program& program, const Kernel& kernel);

struct GeneratedKernel {
  std::string source;
  std::string function;  // extern "C" name inside the source
};
StatusOr<GeneratedKernel> generate_fused(const Program& program, const Kernel& kernel);

// The device-side helpers every generated source starts with.
const std::string& device_prelude();

// A plugin's module: the prelude, PluginArgs, its fields as macros and its source (cuda_plugin.cc;
// kInvalidArgument for fields that are not a JSON object).
StatusOr<std::string> plugin_module_source(const PluginAttrs& plugin);

// The fixed module: strided copies (transpose, slice, concat, copy), gather, update_slice, in-place erf-GELU
// and a pseudo-random fill (for timing GEMMs on non-zero data). Function names below.
const std::string& layout_module_source();
std::string copy_function(int elem_size);                 // tripy_copy_<n>
std::string gather_function(int elem_size, DType index);  // tripy_gather_<n>_<i32|i64>
std::string update_function(int elem_size, DType index);  // tripy_update_<n>_<i32|i64> (update_slice rows)
std::string gelu_function(DType t);                       // tripy_gelu_<f32|f16|bf16>
std::string fill_function(DType t);                       // tripy_fill_<...>
std::vector<std::string> layout_module_functions();

}  // namespace tripy::rt::cuda

// The CUDA C++ the compiler side generates (and NVRTC compiles, cuda_compile.h): fused kernels,
// attention variants, plugin modules and the fixed modules (layout, convolution, pooling). The
// runtime knows only their function names and argument layouts (cuda_codegen.h, cuda_attention.h,
// cuda_conv.h, cuda_pool.h, cuda_plugin.h). Needs no CUDA headers (tests, the Python binding).
#pragma once

#include <string>

#include "backend/cuda/cuda_codegen.h"
#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::rt::cuda {

// The elementwise table (cuda_ew_table.cc). How registers are held while computing, as the CPU backend does: narrow floats in float,
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

struct GeneratedKernel {
  std::string source;
  std::string function;  // extern "C" name inside the source
};
StatusOr<GeneratedKernel> generate_fused(const Program& program, const Kernel& kernel);

// The device-side helpers every generated source starts with.
const std::string& device_prelude();

// A plugin's module: the prelude, PluginArgs, its fields as macros and its source (cuda_plugin_source.cc;
// kInvalidArgument for fields that are not a JSON object).
StatusOr<std::string> plugin_module_source(const PluginAttrs& plugin);

// The layout modules (cuda_prelude.cc): copies and GELU (fixed), and the gathers and update_slices
// a program launches; their functions are named in cuda_codegen.h.
const std::string& layout_module_source();
struct IndexFunction {
  bool update = false;  // update_slice's rows, else a gather
  int elem_size = 0;
  DType index = DType::kInt32;
};
std::string index_module_source(const std::vector<IndexFunction>& functions);

// The tuner's fill kernels (build time only): deterministic values in [-1, 1) for scratch
// operands, so no candidate times on zeros, NaNs or denormals; tripy_fill_<f32|f16|bf16>.
const std::string& fill_module_source();
std::string fill_function(DType t);

// The fixed module of a kind whose builder row names a file of kernels/ (convolution, pooling,
// sample; codegen/cuda_builder.cc) for one dtype, and its one function, <entry>_<dtype suffix>
// (tripy_pool_i8): the prelude, then the file, whose rows TRIPY_FOR_DTYPE(suffix, entry point)
// define an entry point per dtype, of which the module keeps that dtype's. One entry point per module: a program compiles only the dtypes it runs
// (NVRTC's time grows with every instantiation). Empty for a kind without such a row.
GeneratedKernel kind_module_source(KernelKind kind, DType t);
// "f32", "f16", "bf16", "f8e4m3", "i4", "i8", "i32", "i64", "bool".
const char* dtype_suffix(DType t);

// A GEMV module of a float16 or bfloat16 dot (cuda_gemv_source.cc): one of the entry points that
// gemv_functions(t) names (cuda_gemv.h), for a (row tile, weight rows) of gemv_entry_exists.
// `ahead`: the CUDA-core rows' steps read before the wait (gemv_ahead_steps unless given).
std::string gemv_module_source(DType t, int row_tile, int weight_rows, int ahead = 0);
// The TMA form's entry point of tile `row_tile` (gemv_tma_function), in a module of its own.
std::string gemv_tma_module_source(DType t, int row_tile);

// A weight-only dot's module (cuda_weight_only_dot_source.cc): kernels/weight_only_dot.cuh and the
// entry point weight_only_function(t, bits, row_tile) (cuda_weight_only_dot.h); and kernel k's.
GeneratedKernel weight_only_dot_module_source(DType t, int bits, int row_tile);
StatusOr<GeneratedKernel> weight_only_dot_module(const Program& p, const Kernel& k);

// An attention kernel's module (cuda_attention_generate.cc): `function` is "tripy_attention"; the
// module defines tripy_attention_generic and the split kernels always, tripy_attention_flash when
// the head size allows it (the names: cuda_attention.h).
StatusOr<GeneratedKernel> generate_attention(const Program& program, const Kernel& kernel);
// The kernel bodies (kernels/attention.cuh, kernels/attention_split.cuh); generate_attention
// prepends the variant's macros.
const std::string& attention_source_body();
const std::string& attention_split_source();

}  // namespace tripy::rt::cuda

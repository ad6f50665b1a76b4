// The module of a kWeightOnlyDot kernel: the prelude, kernels/weight_only_dot.cuh (and
// weight_only_frag.cuh where its register-fed tile applies) and the entry point it runs (x's
// dtype, the weight's format, the tile of rows of x: cuda_weight_only_dot.h; from
// kWeightOnlyMmaRows rows of float16 or bfloat16 x its body also holds the tensor-core tiles, and
// the tile of kWeightOnlyMmaRows rows a second entry point, the shared-memory ring's, and the
// weight's dequantization for cuBLASLt at many rows; for int4 weights and bfloat16 x the tiles of
// 8 and 16 rows also the register-fed tile's and at 8 the many-rows tile's, and for int4, int8
// and float8 weights and bfloat16 x the tile of 8 rows the one-row tile's and the K-sliced one's
// and that of 16 the few-rows tile's and its K-sliced form's).
// Kernels of the same variant share the module (the builder compiles each source once).
#include <algorithm>

#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda {

GeneratedKernel weight_only_dot_module_source(DType t, int bits, int row_tile) {
  static const std::string kBody = device_prelude() + kernels::kWeightOnlyDot;
  const bool frag = weight_only_frag_tile(t, bits, row_tile), one_row = weight_only_one_row_tile(t, bits, row_tile);
  const bool few = weight_only_few_rows_tile(t, bits, row_tile);
  const char* type = t == DType::kBFloat16 ? "WoBf16" : t == DType::kFloat16 ? "WoHalf" : "WoF32";
  const std::string fn = weight_only_function(t, bits, row_tile);
  std::string source = kBody + (frag || one_row || few ? kernels::kWeightOnlyFrag : "") + "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK) " + fn +
                       "(const WoArgs a) { enter_after_previous(); wo_dot<" + type + ", " + std::to_string(bits) +
                       ", " + std::to_string(row_tile) + ", " + std::to_string(weight_only_weight_rows(row_tile)) +
                       ">(a); }\n";
  // The tensor-core tile's ring (wo_mma_ring) on its own, at 128 registers or fewer so that two
  // blocks share a multiprocessor (its weight in flight is in shared memory, not registers).
  if (row_tile == kWeightOnlyMmaRows && t != DType::kFloat32)
    source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK, 2) " + weight_only_ring_function(t, bits) +
              "(const WoArgs a) { wo_mma_ring<" + type + ", " + std::to_string(bits) + ", " +
              std::to_string(kWeightOnlyRingRows / 8) + ">(a); }\n";
  // For int4 weights and bfloat16 x, the register-fed tile (weight_only_frag.cuh's wo_frag4) at 8
  // or 16 rows, its warp groups' weight rows weight_only_frag_rows.
  if (frag)
    source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK) " + weight_only_frag_function(t, bits, row_tile) +
              "(const WoArgs a) { wo_frag4<" + std::to_string(row_tile / 8) + ", " +
              std::to_string(weight_only_frag_rows(row_tile) / 16) + ">(a); }\n";
  // For int4, int8 and float8 weights and bfloat16 x, at 8 rows the one-row tile (wo_frag_row), and
  // for int8 its entry point for rows of up to WO_ROW_SHORT_K values with the deeper ring.
  if (one_row) {
    source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK) " +
              weight_only_one_row_function(t, bits, kWeightOnlyOneRowMaxK) + "(const WoArgs a) { wo_frag_row<" +
              std::to_string(bits) + ">(a); }\n";
  }
  if (one_row && weight_only_one_row_short(bits, kWeightOnlyOneRowShortK)) {
    source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK) " +
              weight_only_one_row_function(t, bits, kWeightOnlyOneRowShortK) + "(const WoArgs a) { wo_frag_row<" +
              std::to_string(bits) + ", WO_ROW_SHORT_K, WO_ROW_SHORT_SLOTS>(a); }\n";
  }
  // For int4, int8 and float8 weights and bfloat16 x, at 8 rows the K-sliced one-row tile's shapes
  // (wo_row_sliced), up to WO_SLICE_MAX_WARPS warps a block.
  // Each also in its fold forms (weight_only_sliced_fold_entry: for int4 and float8 weights a
  // product that normalizes x, one that adds a residual, and one that gates its output with the
  // norm; for those and int8 one that gates its output), with the CUDA-core fold.
  if (one_row) {
    using F = WeightOnlySlicedFold;
    for (int i = 0; i < static_cast<int>(std::size(kWeightOnlySliced)); ++i) {
      const std::string shape = std::to_string(bits) + ", " + std::to_string(kWeightOnlySliced[i].tiles);
      source += "extern \"C\" __global__ void __launch_bounds__(512) " + weight_only_sliced_function(t, bits, i) +
                "(const WoArgs a) { wo_row_sliced<" + shape + ">(a); }\n";
      struct Form { F fold; bool norm, residual, gate; const char* mask; };
      for (const Form& f : {Form{F::kNorm, true, false, false, "WO_FOLD_NORM"},
                            Form{F::kResidual, false, true, false, "WO_FOLD_RESIDUAL"},
                            Form{F::kGate, false, false, true, "WO_FOLD_GATE"},
                            Form{F::kNormGate, true, false, true, "WO_FOLD_NORM | WO_FOLD_GATE"}}) {
        rt::WeightOnlyDotAttrs a;
        a.norm = f.norm, a.residual = f.residual, a.gate_output = f.gate;
        // A gated output's tiles split between the halves: a shape of one tile runs that of 2.
        if (!weight_only_sliced_fold_entry(bits, a) || (f.gate && weight_only_gated_shape(i) != i)) continue;
        source += "extern \"C\" __global__ void __launch_bounds__(512) " +
                  weight_only_sliced_fold_function(t, bits, i, f.fold) + "(const WoFoldArgs p) { wo_row_sliced<" +
                  shape + ", " + f.mask + ">(p.a, p.f); }\n";
      }
    }
    if (weight_only_gate_format(bits))
      source += "extern \"C\" __global__ void " + weight_only_fold_rows_function(t, bits, kWeightOnlyMmaRows) +
                "(const WoFoldArgs p) { enter_after_previous(); wo_fold_rows<" + std::to_string(bits) +
                ">(p.a, p.f); }\n";
  }
  // For int4 weights and bfloat16 x, at 8 rows the many-rows tile (wo_gemm4) at 64 and 32 rows of x
  // a block (two blocks a multiprocessor), each with its layout of x.
  if (frag && row_tile == kWeightOnlyMmaRows) {
    for (const auto& [x_rows, shape] : {std::pair<int, const char*>{64, "8, 1, 1, 3"}, {32, "4, 1, 2, 2"}}) {
      source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK, 2) " +
                weight_only_many_rows_function(t, bits, x_rows, false) + "(const WoArgs a) { wo_gemm4<" + shape +
                ">(a); }\n";
      source += "extern \"C\" __global__ void " + weight_only_many_rows_function(t, bits, x_rows, true) +
                "(const WoArgs a) { enter_after_previous(); wo_gemm4_x<" + std::to_string(x_rows / 8) + ">(a); }\n";
    }
  }
  // For int4, int8 and float8 weights and bfloat16 x, at 16 rows the few-rows tile (wo_few), with
  // its layout of x.
  if (few) {
    const std::string format = std::to_string(bits);
    source += "extern \"C\" __global__ void __launch_bounds__(WO_BLOCK) " +
              weight_only_few_rows_function(t, bits, false) + "(const WoArgs a) { wo_few<2, " + format + ">(a); }\n";
    source += "extern \"C\" __global__ void " + weight_only_few_rows_function(t, bits, true) +
              "(const WoArgs a) { enter_after_previous(); wo_few_x<2, " + format + ">(a); }\n";
    // Its K-sliced shapes, up to 16 warps a block; for int4 and int8 weights each also in its fold
    // form (a product that normalizes x or adds a residual) and its gated output's (shapes of 2
    // tiles or more), after the layout's fold form, with the CUDA-core fold.
    const bool fold = weight_only_fold_format(bits);
    for (int i = 0; i < static_cast<int>(std::size(kWeightOnlyFewSliced)); ++i) {
      const std::string shape = format + ", " + std::to_string(kWeightOnlyFewSliced[i].tiles);
      source += "extern \"C\" __global__ void __launch_bounds__(512) " + weight_only_few_sliced_function(t, bits, i) +
                "(const WoArgs a) { wo_few_sliced<2, " + shape + ">(a); }\n";
      if (!fold) continue;
      source += "extern \"C\" __global__ void __launch_bounds__(512) " + weight_only_few_sliced_fold_function(t, bits, i) +
                "(const WoFoldArgs p) { wo_few_sliced<2, " + shape + ", true>(p.a, p.f); }\n";
      if (weight_only_gated_shape(i, true) == i)
        source += "extern \"C\" __global__ void __launch_bounds__(512) " +
                  weight_only_few_sliced_fold_function(t, bits, i, true) + "(const WoFoldArgs p) { wo_few_sliced<2, " +
                  shape + ", true, true>(p.a, p.f); }\n";
    }
    if (fold) {
      source += "extern \"C\" __global__ void " + weight_only_few_x_fold_function(t, bits) +
                "(const WoFoldArgs p) { enter_after_previous(); wo_few_x<2, " + format + ", true>(p.a, p.f); }\n";
      source += "extern \"C\" __global__ void " + weight_only_fold_rows_function(t, bits, 2 * kWeightOnlyMmaRows) +
                "(const WoFoldArgs p) { enter_after_previous(); wo_fold_rows<" + format + ">(p.a, p.f); }\n";
    }
  }
  if (row_tile == kWeightOnlyMmaRows)
    source += "extern \"C\" __global__ void " + weight_only_dequantize_function(t, bits) +
              "(const WoArgs a) { enter_after_previous(); wo_dequantize<" + type + ", " + std::to_string(bits) +
              ">(a); }\n";
  return GeneratedKernel{std::move(source), fn};
}

StatusOr<GeneratedKernel> weight_only_dot_module(const Program& p, const Kernel& k) {
  const DType t = p.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
  return weight_only_dot_module_source(t, weight_only_format(p, k), weight_only_row_tile(p, k));
}

}  // namespace tripy::rt::cuda

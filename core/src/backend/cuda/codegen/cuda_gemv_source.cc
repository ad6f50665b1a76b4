// The GEMV module for a float16 or bfloat16 dot: kernels/gemv.cuh and one entry point per
// (rows of x it holds, rows of the weight a warp group sums), named by gemv_function (cuda_gemv.h).
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_gemv.h"

namespace tripy::rt::cuda {

std::string gemv_module_source(DType t) {
  static const std::string kBody = device_prelude() + kernels::kGemv;
  const char* type = t == DType::kBFloat16 ? "GemvBf16" : "GemvHalf";
  std::string out = kBody;
  for (int mt : kGemvRowTiles)
    for (int r : kGemvWeightRows)
      if (gemv_entry_exists(mt, r))
        out += "extern \"C\" __global__ void __launch_bounds__(GEMV_BLOCK) " + gemv_function(t, mt, r) +
               "(const GemvArgs a) { " + (mt >= kGemvMmaRows ? "gemv_mma<" : "gemv_rows<") + type + ", " +
               std::to_string(mt) + ", " + std::to_string(r) + ">(a); }\n";
  return out;
}

}  // namespace tripy::rt::cuda

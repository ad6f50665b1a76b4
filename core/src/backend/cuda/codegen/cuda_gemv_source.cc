// The GEMV modules of a float16 or bfloat16 dot: kernels/gemv.cuh and one entry point, for a row
// tile (rows of x it holds) and the rows of the weight a warp group sums, named by gemv_function
// (cuda_gemv.h); the CUDA-core rows wait for the previous kernel themselves (gemv_rows). A module
// an entry point: NVRTC compiles them at once on separate cores (in one module they took 2.8 s on
// the build machine, the largest alone about a third of that).
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_gemv.h"

namespace tripy::rt::cuda {

namespace {

const std::string& gemv_body() {
  static const std::string kBody = device_prelude() + kernels::kGemv;
  return kBody;
}
const char* gemv_type(DType t) { return t == DType::kBFloat16 ? "GemvBf16" : "GemvHalf"; }

}  // namespace

std::string gemv_module_source(DType t, int row_tile, int weight_rows, int ahead_steps) {
  const int steps = ahead_steps > 0 ? ahead_steps : gemv_ahead_steps();
  const std::string ahead = row_tile >= kGemvMmaRows ? "" : ", " + std::to_string(steps);
  return gemv_body() + "extern \"C\" __global__ void __launch_bounds__(GEMV_BLOCK) " +
         gemv_function(t, row_tile, weight_rows) + "(const GemvArgs a) { " +
         (row_tile >= kGemvMmaRows ? "enter_after_previous(); gemv_mma<" : "gemv_rows<") + gemv_type(t) + ", " +
         std::to_string(row_tile) + ", " + std::to_string(weight_rows) + ahead + ">(a); }\n";
}

// The TMA form reads its tensor map where the argument lies (__grid_constant__); it waits for the
// previous kernel itself, after asking for a constant weight's first boxes. Two blocks an SM.
std::string gemv_tma_module_source(DType t, int row_tile) {
  return gemv_body() + "extern \"C\" __global__ void __launch_bounds__(GEMV_BLOCK, 2) " +
         gemv_tma_function(t, row_tile) + "(const __grid_constant__ GemvTmaArgs a) { gemv_tma<" + gemv_type(t) +
         ", " + std::to_string(row_tile / 8) + ">(a); }\n";
}

}  // namespace tripy::rt::cuda

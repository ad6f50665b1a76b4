// The pooling module for a dtype: kernels/pool.cuh (max and average pooling over the windows of
// (n, c) planes) and the dtype's one entry point.
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"

namespace tripy::rt::cuda {

std::string pool_module_source(DType t) {
  static const std::string kBody = device_prelude() + kernels::kPool;
  // One entry point per module: a program compiles only the dtypes it pools (NVRTC's time grows
  // with every instantiation).
  const char* body = "pool_float<float>(a)";
  switch (t) {
    case DType::kFloat16: body = "pool_float<H>(a)"; break;
    case DType::kBFloat16: body = "pool_float<B>(a)"; break;
    case DType::kInt8: body = "pool_int<signed char>(a, (signed char)-128)"; break;
    case DType::kInt32: body = "pool_int<int>(a, (int)0x80000000)"; break;
    case DType::kInt64: body = "pool_int<i64>(a, (i64)0x8000000000000000ull)"; break;
    default: break;
  }
  return kBody + "extern \"C\" __global__ void " + pool_function(t) + "(const PoolArgs a) { " + body + "; }\n";
}

std::string pool_function(DType t) {
  switch (t) {
    case DType::kFloat16: return "tripy_pool_f16";
    case DType::kBFloat16: return "tripy_pool_bf16";
    case DType::kInt8: return "tripy_pool_i8";
    case DType::kInt32: return "tripy_pool_i32";
    case DType::kInt64: return "tripy_pool_i64";
    default: return "tripy_pool_f32";
  }
}

}  // namespace tripy::rt::cuda

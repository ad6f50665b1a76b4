// The sampling module for a dtype of logits: kernels/sample.cuh (one block draws one row's token)
// and the dtype's one entry point.
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"

namespace tripy::rt::cuda {

std::string sample_module_source(DType t) {
  static const std::string kBody = device_prelude() + kernels::kSample;
  const char* type = t == DType::kFloat16 ? "SampleHalf" : t == DType::kBFloat16 ? "SampleBf16" : "float";
  return kBody + "extern \"C\" __global__ void __launch_bounds__(1024) " + sample_function(t) +
         "(const SampleArgs a) { sample_row<" + type + ">(a); }\n";
}

std::string sample_function(DType t) {
  return t == DType::kFloat16 ? "tripy_sample_f16" : t == DType::kBFloat16 ? "tripy_sample_bf16" : "tripy_sample_f32";
}

}  // namespace tripy::rt::cuda

// The fixed convolution module for a dtype: kernels/conv_direct.cuh (a direct convolution, the
// fallback to cuDNN, and the epilogue after a cuDNN call that did not fuse it) and the dtype's one
// entry point. Compiled with NVRTC like the layout module; cached on disk by its source.
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"

namespace tripy::rt::cuda {

std::string conv_module_source(DType t) {
  static const std::string kBody = device_prelude() + kernels::kConvDirect;
  // One entry point per module, as for pooling: a program compiles only its own dtypes.
  const char* type = t == DType::kFloat16 ? "H" : t == DType::kBFloat16 ? "B" : "float";
  return kBody + "extern \"C\" __global__ void " + conv_function(t) + "(const ConvArgs a) { conv_body<" + type +
         ">(a); }\n";
}

std::string conv_function(DType t) {
  return std::string("tripy_conv_") + float_suffix(t);
}

}  // namespace tripy::rt::cuda

// What build() stores in the executable for the GPU: the compiled modules (cubin for the build
// GPU's architecture plus PTX for newer ones), which module/function runs each kernel, and tuned
// GEMM algorithms. Sections: "cuda.meta" (JSON), "cuda.cubin", "cuda.ptx" (concatenated).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/backend.h"

namespace tripy::rt::cuda {

// One NVRTC module as the build stores it (codegen/cuda_compile.h makes them).
struct CompiledModule {
  std::vector<uint8_t> cubin;  // machine code for exactly `arch`
  std::string ptx;             // for newer GPUs (the driver JIT-compiles it)
};

struct CudaArtifacts {
  static constexpr int kVersion = 1;
  int arch = 0;
  std::string cublaslt_version;
  std::vector<CompiledModule> modules;
  int32_t layout_module = 0;
  // Per program kernel: module index and function for kFused (-1 otherwise).
  std::vector<int32_t> kernel_module;
  std::vector<std::string> kernel_function;
  std::map<int32_t, std::vector<uint8_t>> algos;  // kDot kernel index -> cublasLtMatmulAlgo_t
};

Artifacts serialize_artifacts(const CudaArtifacts& a);
// Validates every offset and index; kDataLoss on a corrupt or foreign section.
StatusOr<CudaArtifacts> parse_artifacts(const Artifacts& artifacts, size_t num_kernels);

}  // namespace tripy::rt::cuda

// kConvolution on the GPU: cuDNN's convolution (forward, or backward-data for transposed convolutions),
// channels-first (NCHW) or channels-last (NHWC activations, KRSC weights: what its tensor-core
// kernels read), with the engine chosen by timing at build time (per layout), relu/bias/residual
// fused into cuDNN's graph where that times faster (cuda_conv_graph.h), and our own module (a
// direct convolution and an epilogue, codegen/kernels/conv_direct.cuh) for the rest and as the fallback.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_cudnn_graph.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_launch.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// One kConvolution at run-time sizes.
struct ConvProblem {
  DType dtype = DType::kFloat32;
  ConvolutionAttrs attrs;
  std::vector<int64_t> x, w, out;  // the buffers' shapes, in attrs.layout
  std::string key() const;  // identical problems are tuned once
  int64_t out_elements() const;
};
StatusOr<ConvProblem> conv_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots);

// Our module's launch for kernel `k`: the whole convolution (epilogue_only = false) or, after
// cuDNN wrote the plain convolution into the output, the epilogue in place.
Launch plan_conv_launch(const Kernel& k, const ConvProblem& pr, CUfunction fn, bool epilogue_only, int sm_count);

// Whether cuDNN runs this problem: loaded, not disabled (TRIPY_CUDNN=0), symmetric padding,
// sizes that fit its int fields. `why` says why not.
bool cudnn_usable(const ConvProblem& pr, std::string* why = nullptr);

// A tensor as cuDNN's descriptors take it: dims channels-first (N, C, spatial...) and the element
// strides of our storage along them. cuDNN wants 4-D or more: `promote` turns a 1-D convolution's
// tensor into a 2-D one over a unit height (its stride spans the width, so it stays packed).
struct CudnnDims {
  std::vector<int64_t> dims, strides;
};
CudnnDims cudnn_dims(const std::vector<int64_t>& stored, Layout layout, bool promote);
cudnnDataType_t cudnn_type(DType t);

// A tuned choice, stored with the executable as kAlgoInts int32: {cuDNN version, kind, a, b, c}.
//   kind kConvGraph:  forward, graph API; a: the engine's rank in the heuristic's list, b: its global
//                     index, c: whether the graph includes the epilogue.
//   kind kConvLegacy: transposed, legacy backward-data; a: algorithm, b: math type.
//   kind kConvGemm:   a 1x1 convolution as one cuBLASLt GEMM (conv_gemm_problem); the cuBLASLt
//                     algorithm's bytes follow the five ints.
using ConvAlgo = std::vector<uint8_t>;
enum ConvAlgoKind : int32_t { kConvLegacy = 1, kConvGraph = 2, kConvGemm = 3 };
inline constexpr int kAlgoInts = 5;
inline constexpr int kAlgoBytes = kAlgoInts * 4;

class ConvGraph;
struct TuningKernels;

class ConvPlan {
 public:
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  // `stored`: a tuned choice (used when this cuDNN and GPU offer it here, else the heuristic's).
  static StatusOr<std::unique_ptr<ConvPlan>> create(const ConvProblem& pr, const ConvAlgo* stored);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Whether cuDNN also applies the epilogue (relu, bias, residual); else the caller launches it.
  bool fused() const { return fused_; }
  Status run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
             CUdeviceptr workspace, size_t workspace_bytes, CUstream stream);

 private:
  ConvPlan() = default;
  Status create_graph(const ConvAlgo* stored);
  Status describe_legacy();
  Status choose_legacy(const ConvAlgo* stored);

  ConvProblem problem_;
  std::unique_ptr<ConvGraph> graph_;  // forward convolutions
  std::unique_ptr<DotPlan> gemm_;     // or a 1x1 one as a GEMM
  // Transposed convolutions: the legacy API's backward-data.
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  int algo_ = 0;
  size_t workspace_bytes_ = 0;
  bool fused_ = false;
  friend StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, const TuningKernels& kernels, CUstream stream);
};

// Reads a stored choice's ints: false when it is shorter than kAlgoBytes or comes from another
// cuDNN version.
bool read_conv_algo(const ConvAlgo* stored, int32_t out[kAlgoInts]);

// A channels-last 1x1 convolution (stride 1, no padding, one group) with a relu-or-none epilogue
// is one GEMM: out[N*spatial, O] = x[N*spatial, C] . w[O, C]^T + bias + residual, relu, which
// cuBLASLt runs with everything fused (the residual as C with beta = 1). Its operands, in
// DotPlan::run's order: a = w, b = x, c = residual. nullopt where the convolution is not of that
// form.
std::optional<DotProblem> conv_gemm_problem(const ConvProblem& pr);

// (tune_conv, the timing that picks a ConvAlgo, is the compiler side's: codegen/cuda_tuning.h.)

inline constexpr size_t kConvWorkspaceLimit = size_t{256} << 20;

}  // namespace tripy::rt::cuda

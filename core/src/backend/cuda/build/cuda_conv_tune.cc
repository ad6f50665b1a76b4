// Convolution algorithm timing at build time: cuDNN's Find over scratch operands and, where cuDNN
// fuses the epilogue, the fused call per algorithm; the runtime replays the stored choice.
#include <cstdio>
#include <cstring>

#include "backend/cuda/build/cuda_tuning.h"
#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_conv.h"

namespace tripy::rt::cuda {

// Find timed the plain convolution, but a relu epilogue runs through
// cudnnConvolutionBiasActivationForward, whose speed per algorithm differs (some algorithms fall
// back to slow legacy kernels there, others are not fused at all). Time Find's plain choice plus
// an estimate of our epilogue kernel, and the fused call per algorithm, with one timer; keep the
// fastest. (Find's own times are not comparable: it lists an algorithm once per math type, and the
// slow entries of a fast algorithm once won this comparison.)
Status time_fused(ConvPlan& plan, const ConvProblem& pr, const cudnnConvolutionFwdAlgoPerf_t* perf, int found,
                  const std::vector<CUdeviceptr>& ptrs, CUstream stream, int32_t* choice) {
  Tensor bias;
  if (pr.attrs.has_bias) {
    TRIPY_ASSIGN_OR_RETURN(bias, empty_device(pr.dtype, {to_channels_first(pr.attrs.layout, pr.out)[1]}, stream));
    TRIPY_CUDA_TRY(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(bias.data()), 0, static_cast<size_t>(bias.nbytes()), stream));
  }
  const CUdeviceptr b = pr.attrs.has_bias ? reinterpret_cast<CUdeviceptr>(bias.data()) : 0;
  const CUdeviceptr z = pr.attrs.has_residual ? ptrs[2] : 0;  // y doubles as the residual: cuDNN allows it
  CallTimer timer;
  constexpr int kReps = 5;
  // Milliseconds per call of one candidate; an error when it fails or (asked to fuse) does not fuse.
  auto timed = [&](int32_t algo, int32_t math, bool fused) -> StatusOr<float> {
    plan.algo_ = algo;
    plan.fused_ = fused;
    TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(plan.conv_, static_cast<cudnnMathType_t>(math)));
    auto run = [&] { return plan.run(ptrs[0], ptrs[1], b, z, ptrs[2], ptrs[3], kConvWorkspaceLimit, stream); };
    TRIPY_RETURN_IF_ERROR(run());  // warms up, and learns whether cuDNN fuses this algorithm
    if (fused && !plan.fused_) return Status(StatusCode::kUnavailable, "not fused with this algorithm");
    TRIPY_ASSIGN_OR_RETURN(float ms, timer.time(run, kReps, stream));
    return ms / kReps;
  };
  // The separate epilogue: a launch and a pass over the output (and the residual) at ~2.5 TB/s.
  const double epilogue_ms = 3e-3 + (pr.attrs.has_residual ? 3.0 : 2.0) * dtype_size(pr.dtype) *
                                        static_cast<double>(pr.out_elements()) / 2.5e9;
  const int32_t plain[2] = {choice[1], choice[2]};
  StatusOr<float> plain_ms = timed(plain[0], plain[1], false);
  double best = plain_ms.ok() ? plain_ms.value() + epilogue_ms : 1e30;
  choice[3] = 0;
  const bool log = debug_level() >= 1;
  if (log)
    std::fprintf(stderr, "tripy: conv %s: plain algo %d math %d %.4f ms + epilogue %.4f ms\n", pr.key().c_str(),
                 plain[0], plain[1], plain_ms.ok() ? plain_ms.value() : -1.0f, epilogue_ms);
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kConvWorkspaceLimit) continue;
    StatusOr<float> ms = timed(perf[i].algo, perf[i].mathType, true);
    if (log)
      std::fprintf(stderr, "tripy:   fused algo %d math %d: %s\n", perf[i].algo, perf[i].mathType,
                   ms.ok() ? std::to_string(ms.value()).c_str() : ms.status().message().c_str());
    if (ms.ok() && ms.value() < best) {
      best = ms.value();
      choice[1] = perf[i].algo;
      choice[2] = perf[i].mathType;
      choice[3] = 1;
    }
  }
  if (log) std::fprintf(stderr, "tripy:   chose algo %d math %d %s\n", choice[1], choice[2], choice[3] ? "fused" : "plain");
  return ok_status();
}

StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, CUfunction fill_fn, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  TRIPY_ASSIGN_OR_RETURN(auto plan, ConvPlan::create(pr, nullptr, stream));
  std::vector<Tensor> keep;
  const int64_t ws_elems = static_cast<int64_t>(kConvWorkspaceLimit) / dtype_size(pr.dtype);
  TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> ptrs,
                         tuning_scratch(pr.dtype, {numel_of(pr.x), numel_of(pr.w), numel_of(pr.out), ws_elems},
                                        fill_fn, stream, keep));
  TRIPY_CUDA_TRY(cuStreamSynchronize(stream));
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  constexpr int kCount = 8;
  int found = 0;
  int32_t choice[4] = {static_cast<int32_t>(api().cudnnGetVersion()), -1, 0, 1};
  auto* ws = reinterpret_cast<void*>(ptrs[3]);
  if (pr.attrs.transposed) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
    TRIPY_CUDA_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, plan->w_, reinterpret_cast<void*>(ptrs[1]), plan->x_, reinterpret_cast<void*>(ptrs[0]), plan->conv_,
        plan->y_, reinterpret_cast<void*>(ptrs[2]), kCount, &found, perf, ws, kConvWorkspaceLimit));
    for (int i = 0; i < found && choice[1] < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kConvWorkspaceLimit) {
        choice[1] = perf[i].algo;
        choice[2] = perf[i].mathType;
      }
  } else {
    cudnnConvolutionFwdAlgoPerf_t perf[kCount];
    TRIPY_CUDA_TRY(cudnnFindConvolutionForwardAlgorithmEx(
        h, plan->x_, reinterpret_cast<void*>(ptrs[0]), plan->w_, reinterpret_cast<void*>(ptrs[1]), plan->conv_,
        plan->y_, reinterpret_cast<void*>(ptrs[2]), kCount, &found, perf, ws, kConvWorkspaceLimit));
    for (int i = 0; i < found && choice[1] < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kConvWorkspaceLimit) {
        choice[1] = perf[i].algo;
        choice[2] = perf[i].mathType;
      }
    if (plan->fused_) TRIPY_RETURN_IF_ERROR(time_fused(*plan, pr, perf, found, ptrs, stream, choice));
  }
  TRIPY_CUDA_TRY(cuStreamSynchronize(stream));
  if (choice[1] < 0) return Status(StatusCode::kInternal, "cuDNN found no algorithm for this convolution");
  ConvAlgo out(kAlgoBytes);
  std::memcpy(out.data(), choice, sizeof(choice));
  return out;
}

}  // namespace tripy::rt::cuda

// Convolution engine timing at build time; the runtime replays the stored choice.
//   forward:    the graph API's candidates for the plain convolution (plus an estimate of our
//               epilogue kernel) and, where there is a relu/bias/residual epilogue, for the graph
//               that fuses it, and for a 1x1 convolution cuBLASLt's GEMM with everything fused
//               (conv_gemm_problem); the fastest wins.
//   transposed: the legacy API's backward-data algorithms (cudnnFind*Ex).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_conv_graph.h"

namespace tripy::rt::cuda {
namespace {

// Candidates timed per graph and per GEMM form: the heuristic's first few hold the fast one in
// practice (ResNet-50 at B1 and B32 on an H100: the fastest of six or eight was among the first
// four in all 54 problems), and each costs build time: a finalized plan and the first launch of
// its kernel.
constexpr size_t kCandidates = 4;
constexpr int kReps = 5;

struct Timed {
  float ms = 1e30f;
  CudnnEngine engine;
};

// The fastest of `g`'s first candidates on the scratch operands (ptrs: x, w, y, workspace, bias,
// residual). `plans_ms` adds up the time spent building plans (TRIPY_DEBUG shows it).
Timed time_graph(ConvGraph& g, const std::vector<CUdeviceptr>& p, CUstream stream, CallTimer& timer,
                 double& plans_ms) {
  Timed best;
  for (size_t i = 0; i < g.candidates().size() && i < kCandidates; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = g.select(i);
    plans_ms += ms_since(t0);
    auto run = [&] { return g.run(p[0], p[1], p[4], p[5], p[2], p[3], stream); };
    if (st.ok()) st = run();  // warms up, and learns whether it runs here
    StatusOr<float> ms = st.ok() ? timer.time(run, kReps, stream) : StatusOr<float>(st);
    if (debug_level() >= 1)
      std::fprintf(stderr, "tripy:   %s engine %lld (rank %d): %s\n", g.fused() ? "fused" : "plain",
                   static_cast<long long>(g.candidates()[i].engine), g.candidates()[i].rank,
                   ms.ok() ? (std::to_string(ms.value() / kReps) + " ms").c_str() : ms.status().message().c_str());
    if (ms.ok() && ms.value() / kReps < best.ms) best = {ms.value() / kReps, g.candidates()[i]};
  }
  return best;
}

StatusOr<ConvAlgo> tune_forward(const ConvProblem& pr, const std::vector<CUdeviceptr>& ptrs, CUfunction spin,
                                 CUstream stream) {
  CallTimer timer(spin);
  const auto start = std::chrono::steady_clock::now();
  double plans_ms = 0;  // of the time tuning takes, building cuDNN graphs and plans
  int32_t choice[kAlgoInts] = {static_cast<int32_t>(api().cudnnGetVersion()), kConvGraph, -1, -1, 0};
  const bool log = debug_level() >= 1;
  if (log) std::fprintf(stderr, "tripy: conv %s\n", pr.key().c_str());
  // (A graph cuDNN cannot describe leaves the GEMM, where it applies, to compete alone.)
  auto t0 = std::chrono::steady_clock::now();
  auto plain = ConvGraph::create(pr, false);
  plans_ms += ms_since(t0);
  const Timed p = plain.ok() ? time_graph(*plain.value(), ptrs, stream, timer, plans_ms) : Timed{};
  const ConvolutionAttrs& a = pr.attrs;
  const bool epilogue = a.has_bias || a.has_residual || a.activation != Activation::kNone;
  // Our epilogue kernel: a launch and a pass over the output (and the residual) at ~2.5 TB/s.
  const double epilogue_ms = !epilogue ? 0.0
                                       : 3e-3 + (a.has_residual ? 3.0 : 2.0) * dtype_size(pr.dtype) *
                                                    static_cast<double>(pr.out_elements()) / 2.5e9;
  double best = p.ms + epilogue_ms;
  if (p.ms < 1e30f) choice[2] = p.engine.rank, choice[3] = static_cast<int32_t>(p.engine.engine);
  if (epilogue && (a.activation == Activation::kNone || a.activation == Activation::kRelu)) {
    t0 = std::chrono::steady_clock::now();
    auto fused = ConvGraph::create(pr, true);
    plans_ms += ms_since(t0);
    if (fused.ok()) {
      const Timed f = time_graph(*fused.value(), ptrs, stream, timer, plans_ms);
      if (f.ms < best) {
        best = f.ms;
        choice[2] = f.engine.rank, choice[3] = static_cast<int32_t>(f.engine.engine), choice[4] = 1;
      }
    } else if (log) {
      std::fprintf(stderr, "tripy:   no fused graph: %s\n", fused.status().message().c_str());
    }
  }
  // TRIPY_CONV_GEMM=0 never runs a 1x1 convolution as a GEMM, =1 always where one runs (tests).
  const char* force = std::getenv("TRIPY_CONV_GEMM");
  const bool never = force && std::strcmp(force, "0") == 0, always = force && std::strcmp(force, "1") == 0;
  if (always) best = 1e30;
  AlgoBytes gemm;
  const std::optional<DotProblem> dp = never ? std::nullopt : conv_gemm_problem(pr);
  if (dp) {
    auto cands = DotPlan::candidates(*dp, kDotWorkspaceBytes, kCandidates);
    for (size_t i = 0; cands.ok() && i < cands.value().size(); ++i) {
      auto plan = DotPlan::create(*dp, &cands.value()[i], 256, kDotWorkspaceBytes);
      if (!plan.ok()) continue;
      const DotPlan& d = *plan.value();
      auto run = [&] {
        return d.run(ptrs[1], ptrs[0], ptrs[4], ptrs[2], ptrs[3], kDotWorkspaceBytes, stream, ptrs[5]);
      };
      if (!run().ok()) continue;
      StatusOr<float> ms = timer.time(run, kReps, stream);
      if (log && ms.ok()) std::fprintf(stderr, "tripy:   gemm candidate %zu: %f ms\n", i, ms.value() / kReps);
      if (ms.ok() && ms.value() / kReps < best) {
        best = ms.value() / kReps;
        gemm = cands.value()[i];
      }
    }
  }
  if (choice[2] < 0 && gemm.empty()) return Status(StatusCode::kUnavailable, "no cuDNN engine ran this convolution");
  if (!gemm.empty()) choice[1] = kConvGemm;
  if (log) {
    if (!gemm.empty()) std::fprintf(stderr, "tripy:   chose cuBLASLt's GEMM: %.4f ms\n", best);
    else std::fprintf(stderr, "tripy:   chose engine %d (rank %d) %s: %.4f ms\n", choice[3], choice[2],
                      choice[4] ? "fused" : "plus our epilogue", best);
    std::fprintf(stderr, "tripy:   tuning took %.1f ms, %.1f of them building cuDNN graphs and plans\n",
                 ms_since(start), plans_ms);
  }
  ConvAlgo out(kAlgoBytes);
  std::memcpy(out.data(), choice, kAlgoBytes);
  out.insert(out.end(), gemm.begin(), gemm.end());
  return out;
}

}  // namespace

StatusOr<ConvAlgo> tune_conv(const ConvProblem& pr, const TuningKernels& kernels, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  std::vector<Tensor> keep;
  const int64_t ws_elems = static_cast<int64_t>(kConvWorkspaceLimit) / dtype_size(pr.dtype);
  const int64_t channels = to_channels_first(pr.attrs.layout, pr.out)[1];
  TRIPY_ASSIGN_OR_RETURN(std::vector<CUdeviceptr> ptrs,
                         tuning_scratch(pr.dtype,
                                        {numel_of(pr.x), numel_of(pr.w), numel_of(pr.out), ws_elems, channels,
                                         numel_of(pr.out)},
                                        kernels.fill, stream, keep));
  TRIPY_CUDA_TRY(cuStreamSynchronize(stream));
  if (!pr.attrs.transposed) {
    StatusOr<ConvAlgo> out = tune_forward(pr, ptrs, kernels.spin, stream);
    TRIPY_CUDA_TRY(cuStreamSynchronize(stream));
    return out;
  }
  TRIPY_ASSIGN_OR_RETURN(auto plan, ConvPlan::create(pr, nullptr));
  constexpr int kCount = 8;
  int found = 0;
  cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
  {
    std::lock_guard<std::mutex> lock(cudnn_call_mutex());
    TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
    TRIPY_CUDA_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, plan->w_, reinterpret_cast<void*>(ptrs[1]), plan->x_, reinterpret_cast<void*>(ptrs[0]), plan->conv_,
        plan->y_, reinterpret_cast<void*>(ptrs[2]), kCount, &found, perf, reinterpret_cast<void*>(ptrs[3]),
        kConvWorkspaceLimit));
  }
  TRIPY_CUDA_TRY(cuStreamSynchronize(stream));
  for (int i = 0; i < found; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kConvWorkspaceLimit) {
      const int32_t choice[kAlgoInts] = {static_cast<int32_t>(api().cudnnGetVersion()), kConvLegacy, perf[i].algo,
                                         perf[i].mathType, 0};
      ConvAlgo out(kAlgoBytes);
      std::memcpy(out.data(), choice, kAlgoBytes);
      return out;
    }
  return Status(StatusCode::kInternal, "cuDNN found no algorithm for this convolution");
}

}  // namespace tripy::rt::cuda

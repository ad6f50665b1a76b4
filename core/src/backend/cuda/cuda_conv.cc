// cuDNN convolutions for kConvolution at run-time sizes: forward ones through the graph API with the
// tuned (or heuristic) engine, transposed ones through the legacy backward-data call (build-time
// timing: codegen/cuda_conv_tune.cc).
#include "backend/cuda/cuda_conv.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "backend/cuda/cuda_conv_graph.h"
#include "backend/cuda/cuda_kinds.h"
#include "runtime/fields_text.h"

namespace tripy::rt::cuda {

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::kFloat16 ? CUDNN_DATA_HALF : t == DType::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

CudnnDims cudnn_dims(const std::vector<int64_t>& stored, Layout layout, bool promote) {
  const std::vector<int64_t> dims = to_channels_first(layout, stored);
  const std::vector<int64_t> strides = to_channels_first(layout, dense_strides(stored));
  CudnnDims d;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (promote && i == 2) {
      d.dims.push_back(1);
      d.strides.push_back(strides[2] * dims[2]);
    }
    d.dims.push_back(dims[i]);
    d.strides.push_back(strides[i]);
  }
  return d;
}

bool read_conv_algo(const ConvAlgo* stored, int32_t out[kAlgoInts]) {
  if (!stored || stored->size() < kAlgoBytes) return false;
  std::memcpy(out, stored->data(), kAlgoBytes);
  return out[0] == static_cast<int32_t>(api().cudnnGetVersion());
}

std::optional<DotProblem> conv_gemm_problem(const ConvProblem& pr) {
  const ConvolutionAttrs& a = pr.attrs;
  if (a.transposed || a.groups != 1 || a.layout != Layout::kChannelsLast) return std::nullopt;
  if (a.activation != Activation::kNone && a.activation != Activation::kRelu) return std::nullopt;
  for (size_t i = 0; i < a.stride.size(); ++i)
    if (a.stride[i] != 1 || a.pad_before[i] != 0 || a.pad_after[i] != 0) return std::nullopt;
  // Stored channels-last: x (N, spatial..., C), w (O, taps..., C), out (N, spatial..., O).
  for (size_t i = 1; i + 1 < pr.w.size(); ++i)
    if (pr.w[i] != 1) return std::nullopt;
  DotProblem d;
  d.dtype = d.operand = pr.dtype;
  d.trans_a = true;  // the weight stored [O, C]
  d.m = pr.w.front();
  d.k = pr.w.back();
  d.n = numel_of(pr.out) / d.m;
  d.bias = a.has_bias;
  d.residual = a.has_residual;
  d.activation = a.activation;
  if (d.m * d.n * d.k == 0) return std::nullopt;
  return d;
}

std::string ConvProblem::key() const {
  std::string k = std::to_string(static_cast<int>(dtype)) + ":" + field_text(attrs);
  for (const auto* v : {&x, &w, &out}) {
    k += "|";
    for (int64_t d : *v) k += std::to_string(d) + ",";
  }
  return k;
}

int64_t ConvProblem::out_elements() const { return numel_of(out); }


StatusOr<ConvProblem> conv_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  ConvProblem pr;
  pr.attrs = k.convolution;
  pr.dtype = p.buffers[k.outputs[0]].dtype;
  if (pr.dtype != DType::kFloat32 && pr.dtype != DType::kFloat16 && pr.dtype != DType::kBFloat16)
    return kernel_failure(p, k, "the CUDA backend convolves float32, float16 and bfloat16 tensors only");
  pr.x = p.buffer_shape(k.inputs[0], slots);
  pr.w = p.buffer_shape(k.inputs[1], slots);
  pr.out = p.buffer_shape(k.outputs[0], slots);
  return pr;
}

Launch plan_conv_launch(const Kernel& k, const ConvProblem& pr, CUfunction fn, bool epilogue_only, int sm_count) {
  const ConvolutionAttrs& a = pr.attrs;
  const size_t nd = pr.x.size() - 2;
  // Sizes channels-first, whatever the buffers' layout (the kernel's last word says which).
  const std::vector<int64_t> x = to_channels_first(a.layout, pr.x), w = to_channels_first(a.layout, pr.w),
                             out = to_channels_first(a.layout, pr.out);
  Launch l;
  l.fn = fn;
  l.words.assign(31, 0);
  l.words[5] = epilogue_only ? 1 : 0;
  l.words[6] = x[0];
  l.words[7] = x[1];
  l.words[8] = out[1];
  l.words[9] = a.groups;
  for (int j = 0; j < 3; ++j) {  // right-aligned: missing leading dims are 1 (padding 0)
    const int i = j - (3 - static_cast<int>(nd));
    l.words[10 + j] = i >= 0 ? x[i + 2] : 1;
    l.words[13 + j] = i >= 0 ? out[i + 2] : 1;
    l.words[16 + j] = i >= 0 ? w[i + 2] : 1;
    l.words[19 + j] = i >= 0 ? a.stride[i] : 1;
    l.words[22 + j] = i >= 0 ? a.dilation[i] : 1;
    l.words[25 + j] = i >= 0 ? a.pad_before[i] : 0;
  }
  l.words[28] = a.transposed;
  l.words[29] = static_cast<int64_t>(a.activation);
  l.words[30] = a.layout == Layout::kChannelsLast;
  l.ptrs = {{0, k.outputs[0], 0}};
  if (!epilogue_only) l.ptrs.push_back({1, k.inputs[0], 0});
  if (!epilogue_only) l.ptrs.push_back({2, k.inputs[1], 0});
  size_t next = 2;
  if (a.has_bias) l.ptrs.push_back({3, k.inputs[next++], 0});
  if (a.has_residual) l.ptrs.push_back({4, k.inputs[next++], 0});
  l.grid = grid_for(pr.out_elements(), 256, sm_count);
  return l;
}

bool cudnn_usable(const ConvProblem& pr, std::string* why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (!cudnn_loaded()) return no("cuDNN 9 could not be loaded");
  if (cudnn_disabled()) return no("TRIPY_CUDNN=0");
  if (pr.attrs.pad_before != pr.attrs.pad_after) return no("cuDNN pads symmetrically");
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  for (const auto* v : {&pr.x, &pr.w, &pr.out})
    if (numel_of(*v) >= kMaxInt) return no("a tensor exceeds cuDNN's int sizes");
  for (const auto* v : {&pr.attrs.stride, &pr.attrs.dilation, &pr.attrs.pad_before})
    for (int64_t d : *v)
      if (d >= kMaxInt) return no("an attribute exceeds cuDNN's int sizes");
  return true;
}

ConvPlan::~ConvPlan() {
  if (x_) (void)TRIPY_CUDA(cudnnDestroyTensorDescriptor(x_));
  if (y_) (void)TRIPY_CUDA(cudnnDestroyTensorDescriptor(y_));
  if (w_) (void)TRIPY_CUDA(cudnnDestroyFilterDescriptor(w_));
  if (conv_) (void)TRIPY_CUDA(cudnnDestroyConvolutionDescriptor(conv_));
}

// The stored engine: where the heuristic still ranks it as tuning saw it, else (other sizes of a
// dynamic shape rank differently) its first configuration of the same engine. Failing both, the
// heuristic's first that runs here, unfused (the epilogue kernel is the safe default; fusion is
// chosen by timing).
Status ConvPlan::create_graph(const ConvAlgo* stored) {
  int32_t v[kAlgoInts];
  if (read_conv_algo(stored, v) && v[1] == kConvGraph) {
    auto g = ConvGraph::create(problem_, v[4] != 0);
    if (g.ok()) {
      const std::vector<CudnnEngine>& c = g.value()->candidates();
      for (bool same_rank : {true, false})
        for (size_t i = 0; i < c.size(); ++i)
          if (c[i].engine == v[3] && (!same_rank || c[i].rank == v[2]) && g.value()->select(i).ok()) {
            graph_ = std::move(g.value());
            return ok_status();
          }
    }
  }
  TRIPY_ASSIGN_OR_RETURN(graph_, ConvGraph::create(problem_, false));
  Status last(StatusCode::kUnavailable, "cuDNN offered no engine for this convolution");
  for (size_t i = 0; i < graph_->candidates().size(); ++i) {
    last = graph_->select(i);
    if (last.ok()) return last;
  }
  return last;
}

Status ConvPlan::describe_legacy() {
  const ConvProblem& pr = problem_;
  const ConvolutionAttrs& a = pr.attrs;
  const bool promote = pr.x.size() == 3;
  const cudnnDataType_t t = cudnn_type(pr.dtype);
  auto ints = [](const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); };
  const CudnnDims x = cudnn_dims(pr.x, a.layout, promote), y = cudnn_dims(pr.out, a.layout, promote);
  const std::vector<int> xd = ints(x.dims), xs = ints(x.strides), yd = ints(y.dims), ys = ints(y.strides);
  // Filters take dims (K, C, spatial...) and a format: NHWC stores them KRSC.
  const std::vector<int> w = ints(cudnn_dims(pr.w, a.layout, promote).dims);
  const cudnnTensorFormat_t w_format = a.layout == Layout::kChannelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  // Attribute lists have no (N, C) prefix: the unit height goes first.
  auto attr = [&](const std::vector<int64_t>& v, int fill) {
    std::vector<int> out;
    if (promote) out.push_back(fill);
    for (int64_t d : v) out.push_back(static_cast<int>(d));
    return out;
  };
  const std::vector<int> pads = attr(a.pad_before, 0), strides = attr(a.stride, 1), dilations = attr(a.dilation, 1);
  TRIPY_CUDA_TRY(cudnnCreateTensorDescriptor(&x_));
  TRIPY_CUDA_TRY(cudnnSetTensorNdDescriptor(x_, t, static_cast<int>(xd.size()), xd.data(), xs.data()));
  TRIPY_CUDA_TRY(cudnnCreateTensorDescriptor(&y_));
  TRIPY_CUDA_TRY(cudnnSetTensorNdDescriptor(y_, t, static_cast<int>(yd.size()), yd.data(), ys.data()));
  TRIPY_CUDA_TRY(cudnnCreateFilterDescriptor(&w_));
  TRIPY_CUDA_TRY(cudnnSetFilterNdDescriptor(w_, t, w_format, static_cast<int>(w.size()), w.data()));
  TRIPY_CUDA_TRY(cudnnCreateConvolutionDescriptor(&conv_));
  TRIPY_CUDA_TRY(cudnnSetConvolutionNdDescriptor(conv_, static_cast<int>(pads.size()), pads.data(), strides.data(),
                                                 dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TRIPY_CUDA_TRY(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(a.groups)));
  // float32 keeps full FP32 arithmetic (no TF32), as the GEMMs do; narrow floats use tensor cores.
  TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(conv_, pr.dtype == DType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  return ok_status();
}

Status ConvPlan::choose_legacy(const ConvAlgo* stored) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  auto workspace = [&](int algo, size_t* bytes) {
    return api().cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_, x_, conv_, y_,
                                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
  };
  int32_t v[kAlgoInts];
  size_t bytes = 0;
  if (read_conv_algo(stored, v) && v[1] == kConvLegacy &&
      api().cudnnSetConvolutionMathType(conv_, static_cast<cudnnMathType_t>(v[3])) == CUDNN_STATUS_SUCCESS &&
      workspace(v[2], &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kConvWorkspaceLimit) {
    algo_ = v[2];
    workspace_bytes_ = bytes;
    return ok_status();
  }
  // cuDNN's heuristic: the first choice that runs here within the workspace limit.
  constexpr int kCount = 8;
  int found = 0;
  cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
  TRIPY_CUDA_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_, x_, conv_, y_, kCount, &found, perf));
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kConvWorkspaceLimit) continue;
    algo_ = perf[i].algo;
    TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(conv_, perf[i].mathType));
    break;
  }
  return check(workspace(algo_, &workspace_bytes_), "cudnnGetConvolutionBackwardDataWorkspaceSize");
}

StatusOr<std::unique_ptr<ConvPlan>> ConvPlan::create(const ConvProblem& pr, const ConvAlgo* stored) {
  std::unique_ptr<ConvPlan> plan(new ConvPlan());
  plan->problem_ = pr;
  int32_t v[kAlgoInts];
  const std::optional<DotProblem> gemm = conv_gemm_problem(pr);
  if (gemm && read_conv_algo(stored, v) && v[1] == kConvGemm) {
    const AlgoBytes algo(stored->begin() + kAlgoBytes, stored->end());
    auto dot = DotPlan::create(*gemm, &algo, 16, kDotWorkspaceBytes);
    if (dot.ok()) {
      plan->gemm_ = std::move(dot.value());
      plan->fused_ = true;
      plan->workspace_bytes_ = plan->gemm_->workspace_bytes();
      return plan;
    }
  }
  if (pr.attrs.transposed) {
    TRIPY_RETURN_IF_ERROR(plan->describe_legacy());
    TRIPY_RETURN_IF_ERROR(plan->choose_legacy(stored));
    return plan;
  }
  TRIPY_RETURN_IF_ERROR(plan->create_graph(stored));
  plan->fused_ = plan->graph_->fused();
  plan->workspace_bytes_ = plan->graph_->workspace_bytes();
  return plan;
}

Status ConvPlan::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
                     CUdeviceptr workspace, size_t workspace_bytes, CUstream stream) {
  if (graph_ || gemm_) {
    // Both routes were planned for 16-byte aligned operands (the graph declares it, cuBLASLt's
    // fast kernels need it); an unaligned one fails here and the caller falls back to our kernel.
    // Bias and residual count only where the route reads them (a fused epilogue).
    for (CUdeviceptr p : {x, w, y, fused_ ? bias : 0, fused_ ? residual : 0})
      if (p % 16 != 0) return Status(StatusCode::kUnavailable, "an operand is not 16-byte aligned");
  }
  if (graph_) return graph_->run(x, w, bias, residual, y, workspace, stream);
  if (gemm_)
    return gemm_->run(w, x, bias, y, workspace, std::min(workspace_bytes, kDotWorkspaceBytes), stream, residual);
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  std::lock_guard<std::mutex> lock(cudnn_call_mutex());
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  const float one = 1.0f, zero = 0.0f;
  // The transposed convolution is the forward one's input gradient: x plays dy, y plays dx.
  return TRIPY_CUDA(cudnnConvolutionBackwardData(h, &one, w_, reinterpret_cast<const void*>(w), x_,
                                                 reinterpret_cast<const void*>(x), conv_,
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_),
                                                 reinterpret_cast<void*>(workspace), workspace_bytes, &zero, y_,
                                                 reinterpret_cast<void*>(y)));
}

namespace {

// cuDNN where it takes the problem (its plan, plus our epilogue if it does not fuse it), else our
// direct kernel. TRIPY_CUDNN=0 forces the direct kernel, so the fallback is tested on GPUs too.
Status plan_conv(PlanContext& c, const Kernel& k, Step& step) {
  const Program& p = c.program;
  TRIPY_ASSIGN_OR_RETURN(ConvProblem pr, conv_problem(p, k, c.slots));
  if (pr.out_elements() == 0) return ok_status();
  const KernelCode& code = c.code[static_cast<size_t>(step.kernel)];
  const CUfunction fn = code.fn;
  if (!fn) return kernel_failure(p, k, "no CUDA function for this convolution");
  step.conv_direct = plan_conv_launch(k, pr, fn, false, c.sm_count);
  step.conv_epilogue = plan_conv_launch(k, pr, fn, true, c.sm_count);
  if (numel_of(pr.x) > 0 && cudnn_usable(pr)) {
    const AlgoBytes* algo = code.algo.empty() ? nullptr : &code.algo;
    auto plan = ConvPlan::create(pr, algo);
    if (plan.ok()) {
      c.workspace = std::max(c.workspace, plan.value()->workspace_bytes());
      step.convolution = std::move(plan.value());
      return ok_status();
    }
    if (plan.status().code() == StatusCode::kResourceExhausted) return plan.status();
    if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN declined (%s); using the direct kernel\n",
                                         k.name.c_str(), plan.status().message().c_str());
  }
  step.launches = {step.conv_direct};
  return ok_status();
}

}  // namespace

StatusOr<bool> plan_conv_step(PlanContext& c, const Kernel& k, Step& step) {
  Status st = plan_conv(c, k, step);
  if (!st.ok()) return st.at(kernel_source(c.program, step.kernel));
  return !step.launches.empty() || step.convolution != nullptr;  // neither: an empty output
}

Status run_conv_step(Step& step, const Kernel& k, const RunContext& c) {
  if (!step.convolution) return ok_status();  // our kernel: step.launches
  const std::vector<CUdeviceptr>& base = c.base;
  const ConvolutionAttrs& a = k.convolution;
  size_t next = 2;
  const CUdeviceptr bias = a.has_bias ? base[k.inputs[next++]] : 0;
  const CUdeviceptr residual = a.has_residual ? base[k.inputs[next++]] : 0;
  Status st = step.convolution->run(base[k.inputs[0]], base[k.inputs[1]], bias, residual, base[k.outputs[0]],
                                    c.workspace, c.workspace_bytes, c.stream);
  const bool epilogue = a.has_bias || a.has_residual || a.activation != Activation::kNone;
  if (st.ok() && epilogue && !step.convolution->fused()) st = launch(step.conv_epilogue, base, c.stream);
  if (st.ok() || st.code() == StatusCode::kResourceExhausted) return st;
  // cuDNN refused at run time (an alignment, a layout): our kernel from now on.
  if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN failed (%s); using the direct kernel\n",
                                       k.name.c_str(), st.message().c_str());
  step.convolution.reset();
  step.launches = {step.conv_direct};
  return ok_status();
}

}  // namespace tripy::rt::cuda

// cuDNN convolutions for kConv: descriptors from the run-time sizes, the tuned (or heuristic)
// algorithm, the fused bias/residual/relu call where cuDNN offers one (build-time timing:
// build/cuda_conv_tune.cc).
#include "backend/cuda/cuda_conv.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "backend/cuda/cuda_allocator.h"

namespace tripy::rt::cuda {
namespace {

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::kFloat16 ? CUDNN_DATA_HALF : t == DType::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

}  // namespace

StatusOr<cudnnHandle_t> cudnn_handle() {
  static cudnnHandle_t handle = nullptr;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    if (!api().cudnn_ok) {
      status = Status(StatusCode::kUnavailable, "cuDNN 9 (libcudnn.so.9) could not be loaded");
      return;
    }
    status = TRIPY_CUDA(cudnnCreate(&handle));
  });
  if (!status.ok()) return status;
  return handle;
}

namespace {

bool cudnn_disabled() {
  const char* v = std::getenv("TRIPY_CUDNN");
  return v && std::strcmp(v, "0") == 0;
}

// A tensor as cuDNN's descriptors take it: dims channels-first (N, C, spatial...) and the element
// strides of our storage along them, NCHW or NHWC. cuDNN wants 4-D or more: a 1-D convolution
// becomes a 2-D one over a unit height (its stride spans the width, so the tensor stays packed).
struct NdDesc {
  std::vector<int> dims, strides;
};
NdDesc nd_desc(const std::vector<int64_t>& stored, Layout layout, bool promote) {
  const std::vector<int64_t> dims = to_channels_first(layout, stored);
  const std::vector<int64_t> strides = to_channels_first(layout, dense_strides(stored));
  NdDesc d;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (promote && i == 2) {
      d.dims.push_back(1);
      d.strides.push_back(static_cast<int>(strides[2] * dims[2]));
    }
    d.dims.push_back(static_cast<int>(dims[i]));
    d.strides.push_back(static_cast<int>(strides[i]));
  }
  return d;
}

// version, algorithm, math type, and whether a relu epilogue runs fused: four int32

}  // namespace

std::string ConvProblem::key() const {
  std::string k = std::to_string(static_cast<int>(dtype)) + ":" + conv_attrs_text(attrs);
  for (const auto* v : {&x, &w, &out}) {
    k += "|";
    for (int64_t d : *v) k += std::to_string(d) + ",";
  }
  return k;
}

int64_t ConvProblem::out_elements() const { return numel_of(out); }

std::string cudnn_version() { return api().cudnn_ok ? std::to_string(api().cudnnGetVersion()) : "none"; }

StatusOr<ConvProblem> conv_problem(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  ConvProblem pr;
  pr.attrs = k.conv;
  pr.dtype = p.buffers[k.outputs[0]].dtype;
  if (pr.dtype != DType::kFloat32 && pr.dtype != DType::kFloat16 && pr.dtype != DType::kBFloat16)
    return kernel_failure(p, k, "the CUDA backend convolves float32, float16 and bfloat16 tensors only");
  pr.x = p.buffer_shape(k.inputs[0], slots);
  pr.w = p.buffer_shape(k.inputs[1], slots);
  pr.out = p.buffer_shape(k.outputs[0], slots);
  return pr;
}

Launch plan_conv_launch(const Kernel& k, const ConvProblem& pr, CUfunction fn, bool epilogue_only, int sm_count) {
  const ConvAttrs& a = pr.attrs;
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
  if (!api().cudnn_ok) return no("cuDNN 9 could not be loaded");
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
  if (bias_) (void)TRIPY_CUDA(cudnnDestroyTensorDescriptor(bias_));
  if (w_) (void)TRIPY_CUDA(cudnnDestroyFilterDescriptor(w_));
  if (conv_) (void)TRIPY_CUDA(cudnnDestroyConvolutionDescriptor(conv_));
  if (relu_) (void)TRIPY_CUDA(cudnnDestroyActivationDescriptor(relu_));
}

Status ConvPlan::describe(const ConvProblem& pr) {
  problem_ = pr;
  const ConvAttrs& a = pr.attrs;
  const bool promote = pr.x.size() == 3;
  const cudnnDataType_t t = cudnn_type(pr.dtype);
  const NdDesc x = nd_desc(pr.x, a.layout, promote), y = nd_desc(pr.out, a.layout, promote);
  // Filters take dims (K, C, spatial...) and a format: NHWC stores them KRSC.
  const std::vector<int> w = nd_desc(pr.w, a.layout, promote).dims;
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
  TRIPY_CUDA_TRY(cudnnSetTensorNdDescriptor(x_, t, static_cast<int>(x.dims.size()), x.dims.data(), x.strides.data()));
  TRIPY_CUDA_TRY(cudnnCreateTensorDescriptor(&y_));
  TRIPY_CUDA_TRY(cudnnSetTensorNdDescriptor(y_, t, static_cast<int>(y.dims.size()), y.dims.data(), y.strides.data()));
  TRIPY_CUDA_TRY(cudnnCreateFilterDescriptor(&w_));
  TRIPY_CUDA_TRY(cudnnSetFilterNdDescriptor(w_, t, w_format, static_cast<int>(w.size()), w.data()));
  TRIPY_CUDA_TRY(cudnnCreateConvolutionDescriptor(&conv_));
  TRIPY_CUDA_TRY(cudnnSetConvolutionNdDescriptor(conv_, static_cast<int>(pads.size()), pads.data(), strides.data(),
                                                 dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TRIPY_CUDA_TRY(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(a.groups)));
  // float32 keeps full FP32 arithmetic (no TF32), as the GEMMs do; narrow floats use tensor cores.
  TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(conv_, pr.dtype == DType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  // cudnnConvolutionBiasActivationForward: y = relu(conv(x) + alpha2 * z + bias). Its identity
  // mode is limited to one algorithm, so only relu epilogues are fused.
  fused_ = !a.transposed && a.activation == Activation::kRelu;
  if (fused_) {
    // (1, O, 1, 1) in the output's layout.
    std::vector<int64_t> b(y.dims.size(), 1);
    b[1] = y.dims[1];
    const NdDesc bd = nd_desc(from_channels_first(a.layout, b), a.layout, false);
    TRIPY_CUDA_TRY(cudnnCreateTensorDescriptor(&bias_));
    TRIPY_CUDA_TRY(cudnnSetTensorNdDescriptor(bias_, t, static_cast<int>(bd.dims.size()), bd.dims.data(), bd.strides.data()));
    TRIPY_CUDA_TRY(cudnnCreateActivationDescriptor(&relu_));
    TRIPY_CUDA_TRY(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  return ok_status();
}

Status ConvPlan::choose(const ConvAlgo* stored) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  const bool transposed = problem_.attrs.transposed;
  auto workspace = [&](int algo, size_t* bytes) {
    return transposed ? api().cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_, x_, conv_, y_,
                                                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes)
                      : api().cudnnGetConvolutionForwardWorkspaceSize(h, x_, w_, conv_, y_,
                                                                      static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
  };
  if (stored && stored->size() == kAlgoBytes) {
    int32_t v[4];
    std::memcpy(v, stored->data(), sizeof(v));
    size_t bytes = 0;
    if (v[0] == static_cast<int32_t>(api().cudnnGetVersion()) &&
        api().cudnnSetConvolutionMathType(conv_, static_cast<cudnnMathType_t>(v[2])) == CUDNN_STATUS_SUCCESS &&
        workspace(v[1], &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kConvWorkspaceLimit) {
      algo_ = v[1];
      fused_ = fused_ && v[3] != 0;
      workspace_bytes_ = bytes;
      return ok_status();
    }
  }
  // cuDNN's heuristic: the first choice that runs here within the workspace limit.
  constexpr int kCount = 8;
  int found = 0;
  if (transposed) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kCount];
    TRIPY_CUDA_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_, x_, conv_, y_, kCount, &found, perf));
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kConvWorkspaceLimit) continue;
      algo_ = perf[i].algo;
      TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(conv_, perf[i].mathType));
      break;
    }
  } else {
    cudnnConvolutionFwdAlgoPerf_t perf[kCount];
    TRIPY_CUDA_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, x_, w_, conv_, y_, kCount, &found, perf));
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kConvWorkspaceLimit) continue;
      algo_ = perf[i].algo;
      TRIPY_CUDA_TRY(cudnnSetConvolutionMathType(conv_, perf[i].mathType));
      break;
    }
  }
  return check(workspace(algo_, &workspace_bytes_), "cudnnGet*WorkspaceSize");
}

StatusOr<std::unique_ptr<ConvPlan>> ConvPlan::create(const ConvProblem& pr, const ConvAlgo* stored, CUstream stream) {
  std::unique_ptr<ConvPlan> plan(new ConvPlan());
  TRIPY_RETURN_IF_ERROR(plan->describe(pr));
  TRIPY_RETURN_IF_ERROR(plan->choose(stored));
  if (plan->fused_ && !pr.attrs.has_bias) {
    TRIPY_ASSIGN_OR_RETURN(plan->zero_bias_,
                           empty_device(pr.dtype, {to_channels_first(pr.attrs.layout, pr.out)[1]}, stream));
    TRIPY_CUDA_TRY(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(plan->zero_bias_.data()), 0,
                                   static_cast<size_t>(plan->zero_bias_.nbytes()), stream));
  }
  return plan;
}

Status ConvPlan::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
                     CUdeviceptr workspace, size_t workspace_bytes, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  const float one = 1.0f, zero = 0.0f;
  auto* ws = reinterpret_cast<void*>(workspace);
  auto* px = reinterpret_cast<const void*>(x);
  auto* pw = reinterpret_cast<const void*>(w);
  auto* py = reinterpret_cast<void*>(y);
  if (problem_.attrs.transposed) {
    // The transposed convolution is the forward one's input gradient: x plays dy, y plays dx.
    return TRIPY_CUDA(cudnnConvolutionBackwardData(h, &one, w_, pw, x_, px, conv_,
                                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws,
                                                   workspace_bytes, &zero, y_, py));
  }
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo_);
  if (fused_) {
    const float alpha2 = residual ? 1.0f : 0.0f;
    const void* z = residual ? reinterpret_cast<const void*>(residual) : py;
    const void* b = bias ? reinterpret_cast<const void*>(bias) : zero_bias_.data();
    cudnnStatus_t r = api().cudnnConvolutionBiasActivationForward(h, &one, x_, px, w_, pw, conv_, algo, ws,
                                                                  workspace_bytes, &alpha2, y_, z, bias_, b, relu_,
                                                                  y_, py);
    if (r == CUDNN_STATUS_SUCCESS) return ok_status();
    // A combination this cuDNN does not fuse: from now on the caller runs the epilogue.
    if (r != CUDNN_STATUS_NOT_SUPPORTED && r != CUDNN_STATUS_BAD_PARAM) return check(r, "cudnnConvolutionBiasActivationForward");
    fused_ = false;
  }
  return TRIPY_CUDA(cudnnConvolutionForward(h, &one, x_, px, w_, pw, conv_, algo, ws, workspace_bytes, &zero, y_, py));
}

}  // namespace tripy::rt::cuda

// cuDNN graph API plumbing for forward convolutions (see cuda_conv_graph.h).
#include "backend/cuda/cuda_conv_graph.h"

#include <algorithm>
#include <utility>

namespace tripy::rt::cuda {
namespace {

// Tensor ids in the variant pack; the virtual ones only name graph edges.
enum : int64_t { kX = 1, kW, kY, kBias, kResidual, kConvOut, kBiased, kSummed };

StatusOr<CudnnDesc> tensor(int64_t uid, const CudnnDims& d, cudnnDataType_t type, bool is_virtual) {
  return cudnn_tensor(uid, d.dims, d.strides, type, is_virtual);
}

}  // namespace

StatusOr<std::unique_ptr<ConvGraph>> ConvGraph::create(const ConvProblem& pr, bool fused) {
  std::unique_ptr<ConvGraph> g(new ConvGraph());
  const ConvolutionAttrs& a = pr.attrs;
  if (a.transposed) return Status(StatusCode::kUnavailable, "the graph path runs forward convolutions");
  if (fused && a.activation != Activation::kNone && a.activation != Activation::kRelu)
    return Status(StatusCode::kUnavailable, "cuDNN's graph fuses relu epilogues only here");
  g->fused_ = fused;
  g->fp32_ = pr.dtype == DType::kFloat32;
  g->has_bias_ = fused && a.has_bias;
  g->has_residual_ = fused && a.has_residual;
  TRIPY_RETURN_IF_ERROR(g->build(pr));
  TRIPY_ASSIGN_OR_RETURN(g->engines_, cudnn_rank_engines(g->graph_, g->fp32_, false));
  return g;
}

Status ConvGraph::build(const ConvProblem& pr) {
  TRIPY_RETURN_IF_ERROR(cudnn_handle().status());  // cuDNN is loaded before any descriptor is made
  const ConvolutionAttrs& a = pr.attrs;
  const bool promote = pr.x.size() == 3;
  const cudnnDataType_t t = cudnn_type(pr.dtype);
  const CudnnDims yd = cudnn_dims(pr.out, a.layout, promote);
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc x, tensor(kX, cudnn_dims(pr.x, a.layout, promote), t, false));
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc w, tensor(kW, cudnn_dims(pr.w, a.layout, promote), t, false));
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc y, tensor(kY, yd, t, false));
  const bool epilogue = fused_ && (has_bias_ || has_residual_ || a.activation == Activation::kRelu);
  // With an epilogue the convolution writes a float32 virtual tensor the pointwise chain reads.
  CudnnDesc conv_out;
  if (epilogue) {
    TRIPY_ASSIGN_OR_RETURN(conv_out, tensor(kConvOut, yd, CUDNN_DATA_FLOAT, true));
  }

  // Attribute lists cover the spatial dims; a promoted 1-D convolution gains a unit height first.
  auto spatial = [&](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> out;
    if (promote) out.push_back(fill);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc conv, CudnnDesc::make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t nsp = static_cast<int64_t>(spatial(a.stride, 1).size());
  TRIPY_RETURN_IF_ERROR(cudnn_set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
  TRIPY_RETURN_IF_ERROR(cudnn_set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  TRIPY_RETURN_IF_ERROR(cudnn_set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, spatial(a.dilation, 1)));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, spatial(a.stride, 1)));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, spatial(a.pad_before, 0)));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, spatial(a.pad_after, 0)));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(conv.get()));

  std::vector<CudnnDesc> ops;
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc fwd, CudnnDesc::make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  const float one = 1.0f, zero = 0.0f;
  TRIPY_RETURN_IF_ERROR(cudnn_set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x));
  TRIPY_RETURN_IF_ERROR(cudnn_set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w));
  TRIPY_RETURN_IF_ERROR(cudnn_set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, epilogue ? conv_out : y));
  TRIPY_RETURN_IF_ERROR(cudnn_set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  TRIPY_RETURN_IF_ERROR(cudnn_set(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one));
  TRIPY_RETURN_IF_ERROR(cudnn_set(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(fwd.get()));
  ops.push_back(std::move(fwd));

  if (epilogue) {
    // conv_out [+ bias] [+ residual] [relu] -> y, each step a virtual float32 tensor but the last.
    std::vector<std::pair<cudnnPointwiseMode_t, int64_t>> steps;  // (mode, operand uid or 0)
    if (has_bias_) steps.push_back({CUDNN_POINTWISE_ADD, kBias});
    if (has_residual_) steps.push_back({CUDNN_POINTWISE_ADD, kResidual});
    if (a.activation == Activation::kRelu) steps.push_back({CUDNN_POINTWISE_RELU_FWD, 0});
    CudnnDims bd = yd;  // bias: (1, K, 1, ...) broadcast over the output
    for (size_t i = 0; i < bd.dims.size(); ++i) bd.dims[i] = i == 1 ? yd.dims[1] : 1;
    bd.strides = cudnn_dims(from_channels_first(a.layout, bd.dims), a.layout, false).strides;
    const CudnnDesc* cur = &conv_out;
    const int64_t virtual_ids[] = {kBiased, kSummed};
    for (size_t s = 0; s < steps.size(); ++s) {
      CudnnDesc operand;
      if (steps[s].second != 0) {
        TRIPY_ASSIGN_OR_RETURN(operand, tensor(steps[s].second, steps[s].second == kBias ? bd : yd, t, false));
      }
      const CudnnDesc* next = &y;
      if (s + 1 < steps.size()) {
        TRIPY_ASSIGN_OR_RETURN(CudnnDesc v, tensor(virtual_ids[s], yd, CUDNN_DATA_FLOAT, true));
        keep_.push_back(std::move(v));
        next = &keep_.back();
      }
      const CudnnDesc* b = operand.get() ? &operand : nullptr;
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc op, cudnn_pointwise(steps[s].first, *cur, b, nullptr, *next, keep_));
      ops.push_back(std::move(op));
      if (operand.get()) keep_.push_back(std::move(operand));
      cur = next;
    }
  }

  std::vector<const CudnnDesc*> raw;
  for (const CudnnDesc& op : ops) raw.push_back(&op);
  TRIPY_ASSIGN_OR_RETURN(graph_, cudnn_graph(raw));
  for (CudnnDesc* d : {&x, &w, &conv_out, &y, &conv}) keep_.push_back(std::move(*d));
  for (CudnnDesc& op : ops) keep_.push_back(std::move(op));
  return ok_status();
}

Status ConvGraph::select(size_t i) {
  if (i >= engines_.candidates.size()) return Status(StatusCode::kInvalidArgument, "no such engine candidate");
  size_t bytes = 0;
  TRIPY_ASSIGN_OR_RETURN(plan_, cudnn_plan(engines_.configs[static_cast<size_t>(engines_.candidates[i].rank)],
                                           kConvWorkspaceLimit, &bytes));
  workspace_bytes_ = bytes;
  pack_ = CudnnDesc();
  return ok_status();
}

Status ConvGraph::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual, CUdeviceptr y,
                      CUdeviceptr workspace, CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  if (!plan_.get()) return Status(StatusCode::kUnavailable, "no engine selected");
  const std::array<CUdeviceptr, 6> ptrs = {x, w, y, has_bias_ ? bias : 0, has_residual_ ? residual : 0, workspace};
  if (!pack_.get() || ptrs != pack_ptrs_) {
    std::vector<int64_t> uids = {kX, kW, kY};
    std::vector<void*> data = {reinterpret_cast<void*>(x), reinterpret_cast<void*>(w), reinterpret_cast<void*>(y)};
    if (has_bias_) uids.push_back(kBias), data.push_back(reinterpret_cast<void*>(bias));
    if (has_residual_) uids.push_back(kResidual), data.push_back(reinterpret_cast<void*>(residual));
    TRIPY_ASSIGN_OR_RETURN(pack_, cudnn_variant_pack(uids, data, reinterpret_cast<void*>(workspace)));
    pack_ptrs_ = ptrs;
  }
  std::lock_guard<std::mutex> lock(cudnn_call_mutex());
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  return TRIPY_CUDA(cudnnBackendExecute(h, plan_.get(), pack_.get()));
}

}  // namespace tripy::rt::cuda

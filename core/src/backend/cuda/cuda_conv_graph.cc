// cuDNN graph API plumbing for forward convolutions (see cuda_conv_graph.h).
#include "backend/cuda/cuda_conv_graph.h"

#include <algorithm>
#include <utility>

namespace tripy::rt::cuda {
namespace {

// Tensor ids in the variant pack; the virtual ones only name graph edges.
enum : int64_t { kX = 1, kW, kY, kBias, kResidual, kConvOut, kBiased, kSummed };
// Our buffers are 256-byte aligned (allocator and arena); cuDNN's vectorized kernels want 16.
constexpr int64_t kAlignment = 16;

Status set(const CudnnDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* value) {
  return TRIPY_CUDA(cudnnBackendSetAttribute(d.get(), name, type, count, value));
}
Status set_desc(const CudnnDesc& d, cudnnBackendAttributeName_t name, const CudnnDesc& value) {
  cudnnBackendDescriptor_t v = value.get();
  return set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}
Status set_i64s(const CudnnDesc& d, cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
  return set(d, name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
}

StatusOr<CudnnDesc> tensor(int64_t uid, const CudnnDims& d, cudnnDataType_t type, bool is_virtual) {
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc t, CudnnDesc::make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  TRIPY_RETURN_IF_ERROR(set_i64s(t, CUDNN_ATTR_TENSOR_DIMENSIONS, d.dims));
  TRIPY_RETURN_IF_ERROR(set_i64s(t, CUDNN_ATTR_TENSOR_STRIDES, d.strides));
  TRIPY_RETURN_IF_ERROR(set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  TRIPY_RETURN_IF_ERROR(set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment));
  TRIPY_RETURN_IF_ERROR(set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(t.get()));
  return t;
}

// y = mode(x[, b]) as a pointwise operation computing in float32.
StatusOr<CudnnDesc> pointwise(cudnnPointwiseMode_t mode, const CudnnDesc& x, const CudnnDesc* b, const CudnnDesc& y,
                              std::deque<CudnnDesc>& keep) {
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc pw, CudnnDesc::make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  TRIPY_RETURN_IF_ERROR(set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  TRIPY_RETURN_IF_ERROR(set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(pw.get()));
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc op, CudnnDesc::make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  TRIPY_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b) TRIPY_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  TRIPY_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(op.get()));
  keep.push_back(std::move(pw));
  return op;
}

template <typename Note>
bool has_note(const CudnnDesc& engine, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
              int64_t capacity, Note note) {
  std::vector<Note> notes(static_cast<size_t>(capacity));
  int64_t n = 0;
  if (api().cudnnBackendGetAttribute(engine.get(), name, type, capacity, &n, notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (notes[static_cast<size_t>(i)] == note) return true;
  return false;
}

}  // namespace

CudnnDesc::~CudnnDesc() {
  if (d_) (void)api().cudnnBackendDestroyDescriptor(d_);
}

CudnnDesc& CudnnDesc::operator=(CudnnDesc&& o) noexcept {
  std::swap(d_, o.d_);
  return *this;
}

StatusOr<CudnnDesc> CudnnDesc::make(cudnnBackendDescriptorType_t type) {
  CudnnDesc d;
  TRIPY_CUDA_TRY(cudnnBackendCreateDescriptor(type, &d.d_));
  return d;
}

StatusOr<std::unique_ptr<ConvGraph>> ConvGraph::create(const ConvProblem& pr, bool fused) {
  std::unique_ptr<ConvGraph> g(new ConvGraph());
  const ConvAttrs& a = pr.attrs;
  if (a.transposed) return Status(StatusCode::kUnavailable, "the graph path runs forward convolutions");
  if (fused && a.activation != Activation::kNone && a.activation != Activation::kRelu)
    return Status(StatusCode::kUnavailable, "cuDNN's graph fuses relu epilogues only here");
  g->fused_ = fused;
  g->fp32_ = pr.dtype == DType::kFloat32;
  g->has_bias_ = fused && a.has_bias;
  g->has_residual_ = fused && a.has_residual;
  TRIPY_RETURN_IF_ERROR(g->build(pr));
  TRIPY_RETURN_IF_ERROR(g->rank_engines());
  return g;
}

Status ConvGraph::build(const ConvProblem& pr) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  const ConvAttrs& a = pr.attrs;
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
  TRIPY_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
  TRIPY_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  TRIPY_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp));
  TRIPY_RETURN_IF_ERROR(set_i64s(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, spatial(a.dilation, 1)));
  TRIPY_RETURN_IF_ERROR(set_i64s(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, spatial(a.stride, 1)));
  TRIPY_RETURN_IF_ERROR(set_i64s(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, spatial(a.pad_before, 0)));
  TRIPY_RETURN_IF_ERROR(set_i64s(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, spatial(a.pad_after, 0)));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(conv.get()));

  std::vector<CudnnDesc> ops;
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc fwd, CudnnDesc::make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  const float one = 1.0f, zero = 0.0f;
  TRIPY_RETURN_IF_ERROR(set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x));
  TRIPY_RETURN_IF_ERROR(set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w));
  TRIPY_RETURN_IF_ERROR(set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, epilogue ? conv_out : y));
  TRIPY_RETURN_IF_ERROR(set_desc(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  TRIPY_RETURN_IF_ERROR(set(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one));
  TRIPY_RETURN_IF_ERROR(set(fwd, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero));
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
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc op, pointwise(steps[s].first, *cur, b, *next, keep_));
      ops.push_back(std::move(op));
      if (operand.get()) keep_.push_back(std::move(operand));
      cur = next;
    }
  }

  TRIPY_ASSIGN_OR_RETURN(graph_, CudnnDesc::make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const CudnnDesc& op : ops) raw.push_back(op.get());
  TRIPY_RETURN_IF_ERROR(set(graph_, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                            static_cast<int64_t>(raw.size()), raw.data()));
  TRIPY_RETURN_IF_ERROR(set(graph_, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(graph_.get()));
  for (CudnnDesc* d : {&x, &w, &conv_out, &y, &conv}) keep_.push_back(std::move(*d));
  for (CudnnDesc& op : ops) keep_.push_back(std::move(op));
  return ok_status();
}

Status ConvGraph::rank_engines() {
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    TRIPY_ASSIGN_OR_RETURN(CudnnDesc heur, CudnnDesc::make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    TRIPY_RETURN_IF_ERROR(set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_));
    TRIPY_RETURN_IF_ERROR(set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    if (api().cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    TRIPY_CUDA_TRY(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            0, &count, nullptr));
    configs_.clear();
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc cfg, CudnnDesc::make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(cfg.get());
      configs_.push_back(std::move(cfg));
    }
    int64_t got = 0;
    if (count > 0) {
      TRIPY_CUDA_TRY(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, raw.data()));
    }
    configs_.resize(static_cast<size_t>(std::min(got, count)));
    candidates_.clear();
    for (size_t i = 0; i < configs_.size(); ++i) {
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc engine, CudnnDesc::make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
      cudnnBackendDescriptor_t e = engine.get();
      int64_t n = 0;
      if (api().cudnnBackendGetAttribute(configs_[i].get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) != CUDNN_STATUS_SUCCESS)
        continue;
      int64_t index = -1;
      (void)api().cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                           &index);
      if (has_note(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                   CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION))
        continue;
      if (fp32_ && (has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                             CUDNN_NUMERICAL_NOTE_TYPE_COUNT, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                    has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                             CUDNN_NUMERICAL_NOTE_TYPE_COUNT, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
        continue;
      candidates_.push_back({static_cast<int32_t>(i), index});
    }
    if (!candidates_.empty()) return ok_status();
  }
  return Status(StatusCode::kUnavailable, "cuDNN's heuristic offered no engine for this graph");
}

Status ConvGraph::select(size_t i) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  if (i >= candidates_.size()) return Status(StatusCode::kInvalidArgument, "no such engine candidate");
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc plan, CudnnDesc::make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRIPY_RETURN_IF_ERROR(set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 configs_[static_cast<size_t>(candidates_[i].rank)]));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(plan.get()));
  int64_t bytes = 0, n = 0;
  TRIPY_CUDA_TRY(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                          &bytes));
  // kUnavailable, not kResourceExhausted: the caller tries another engine rather than failing as if
  // the GPU were out of memory.
  if (bytes < 0 || static_cast<size_t>(bytes) > kConvWorkspaceLimit)
    return Status(StatusCode::kUnavailable, "the engine's workspace exceeds the 256 MiB limit");
  plan_ = std::move(plan);
  workspace_bytes_ = static_cast<size_t>(bytes);
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
    void* ws = reinterpret_cast<void*>(workspace);
    TRIPY_ASSIGN_OR_RETURN(CudnnDesc pack, CudnnDesc::make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    TRIPY_RETURN_IF_ERROR(set_i64s(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids));
    TRIPY_RETURN_IF_ERROR(set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                              static_cast<int64_t>(data.size()), data.data()));
    TRIPY_RETURN_IF_ERROR(set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
    TRIPY_CUDA_TRY(cudnnBackendFinalize(pack.get()));
    pack_ = std::move(pack);
    pack_ptrs_ = ptrs;
  }
  std::lock_guard<std::mutex> lock(cudnn_call_mutex());
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  return TRIPY_CUDA(cudnnBackendExecute(h, plan_.get(), pack_.get()));
}

}  // namespace tripy::rt::cuda

// cuDNN graph API plumbing (see cuda_cudnn_graph.h).
#include "backend/cuda/cuda_cudnn_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend/cuda/cuda_device.h"

namespace tripy::rt::cuda {

StatusOr<cudnnHandle_t> cudnn_handle() {
  static auto* handles = new PerGpu<cudnnHandle_t>();  // never destroyed: used until exit
  return handles->get([]() -> StatusOr<cudnnHandle_t> {
    if (!cudnn_loaded()) return Status(StatusCode::kUnavailable, "cuDNN 9 (libcudnn.so.9) could not be loaded");
    cudnnHandle_t h = nullptr;
    TRIPY_CUDA_TRY(cudnnCreate(&h));
    return h;
  });
}

std::mutex& cudnn_call_mutex() {
  static std::mutex m;
  return m;
}

std::string cudnn_version() { return cudnn_loaded() ? std::to_string(api().cudnnGetVersion()) : "none"; }

bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

bool cudnn_disabled() { return env_is_zero("TRIPY_CUDNN"); }

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

Status cudnn_set(const CudnnDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                 const void* value) {
  return TRIPY_CUDA(cudnnBackendSetAttribute(d.get(), name, type, count, value));
}
Status cudnn_set_desc(const CudnnDesc& d, cudnnBackendAttributeName_t name, const CudnnDesc& value) {
  cudnnBackendDescriptor_t v = value.get();
  return cudnn_set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}
Status cudnn_set_i64s(const CudnnDesc& d, cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
  return cudnn_set(d, name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
}

StatusOr<CudnnDesc> cudnn_tensor(int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                 cudnnDataType_t type, bool is_virtual, bool by_value) {
  // Our buffers are 256-byte aligned (allocator and arena); cuDNN's vectorized kernels want 16.
  constexpr int64_t kAlignment = 16;
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc t, CudnnDesc::make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(cudnn_set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(t, CUDNN_ATTR_TENSOR_DIMENSIONS, dims));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(t, CUDNN_ATTR_TENSOR_STRIDES, strides));
  TRIPY_RETURN_IF_ERROR(cudnn_set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  TRIPY_RETURN_IF_ERROR(cudnn_set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment));
  TRIPY_RETURN_IF_ERROR(cudnn_set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
  if (by_value) TRIPY_RETURN_IF_ERROR(cudnn_set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(t.get()));
  return t;
}

StatusOr<CudnnDesc> cudnn_operation(cudnnBackendDescriptorType_t type,
                                    std::initializer_list<std::pair<cudnnBackendAttributeName_t, const CudnnDesc*>> descs) {
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc op, CudnnDesc::make(type));
  for (const auto& [name, desc] : descs)
    if (desc) TRIPY_RETURN_IF_ERROR(cudnn_set_desc(op, name, *desc));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(op.get()));
  return op;
}

StatusOr<CudnnDesc> cudnn_pointwise(cudnnPointwiseMode_t mode, const CudnnDesc& x, const CudnnDesc* b,
                                    const CudnnDesc* t, const CudnnDesc& y, std::deque<CudnnDesc>& keep,
                                    cudnnDataType_t prec, int64_t axis) {
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc pw, CudnnDesc::make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(cudnn_set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  TRIPY_RETURN_IF_ERROR(cudnn_set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  if (axis >= 0) TRIPY_RETURN_IF_ERROR(cudnn_set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(pw.get()));
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc op, cudnn_operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                                                       {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &pw},
                                                        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &x},
                                                        {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
                                                        {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t},
                                                        {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &y}}));
  keep.push_back(std::move(pw));
  return op;
}

StatusOr<CudnnDesc> cudnn_graph(const std::vector<const CudnnDesc*>& ops) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc graph, CudnnDesc::make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const CudnnDesc* op : ops) raw.push_back(op->get());
  TRIPY_RETURN_IF_ERROR(cudnn_set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                  static_cast<int64_t>(raw.size()), raw.data()));
  TRIPY_RETURN_IF_ERROR(cudnn_set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(graph.get()));
  return graph;
}

namespace {

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

StatusOr<CudnnEngines> cudnn_rank_engines(const CudnnDesc& graph, bool exact_fp32, bool allow_runtime_compilation) {
  CudnnEngines out;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    TRIPY_ASSIGN_OR_RETURN(CudnnDesc heur, CudnnDesc::make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    TRIPY_RETURN_IF_ERROR(cudnn_set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    TRIPY_RETURN_IF_ERROR(cudnn_set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    if (api().cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    TRIPY_CUDA_TRY(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            0, &count, nullptr));
    out.configs.clear();
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc cfg, CudnnDesc::make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(cfg.get());
      out.configs.push_back(std::move(cfg));
    }
    int64_t got = 0;
    if (count > 0) {
      TRIPY_CUDA_TRY(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, raw.data()));
    }
    out.configs.resize(static_cast<size_t>(std::min(got, count)));
    out.candidates.clear();
    for (size_t i = 0; i < out.configs.size(); ++i) {
      TRIPY_ASSIGN_OR_RETURN(CudnnDesc engine, CudnnDesc::make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
      cudnnBackendDescriptor_t e = engine.get();
      int64_t n = 0;
      if (api().cudnnBackendGetAttribute(out.configs[i].get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) != CUDNN_STATUS_SUCCESS)
        continue;
      int64_t index = -1;
      (void)api().cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                           &index);
      if (!allow_runtime_compilation &&
          has_note(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                   CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION))
        continue;
      if (exact_fp32 && (has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                  CUDNN_NUMERICAL_NOTE_TYPE_COUNT, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                         has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                  CUDNN_NUMERICAL_NOTE_TYPE_COUNT, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
        continue;
      out.candidates.push_back({static_cast<int32_t>(i), index});
    }
    if (!out.candidates.empty()) return out;
  }
  return Status(StatusCode::kUnavailable, "cuDNN's heuristic offered no engine for this graph");
}

StatusOr<CudnnDesc> cudnn_plan(const CudnnDesc& config, size_t workspace_limit, size_t* workspace_bytes) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc plan, CudnnDesc::make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(cudnn_set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRIPY_RETURN_IF_ERROR(cudnn_set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(plan.get()));
  int64_t bytes = 0, n = 0;
  TRIPY_CUDA_TRY(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                          &bytes));
  // kUnavailable, not kResourceExhausted: the caller tries another engine rather than failing as if
  // the GPU were out of memory.
  if (bytes < 0 || static_cast<size_t>(bytes) > workspace_limit)
    return Status(StatusCode::kUnavailable, "the engine's workspace exceeds the " +
                                                std::to_string(workspace_limit >> 20) + " MiB limit");
  *workspace_bytes = static_cast<size_t>(bytes);
  return plan;
}

StatusOr<CudnnDesc> cudnn_variant_pack(const std::vector<int64_t>& uids, const std::vector<void*>& data,
                                       void* workspace) {
  TRIPY_ASSIGN_OR_RETURN(CudnnDesc pack, CudnnDesc::make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  TRIPY_RETURN_IF_ERROR(cudnn_set_i64s(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids));
  TRIPY_RETURN_IF_ERROR(cudnn_set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                  static_cast<int64_t>(data.size()), data.data()));
  TRIPY_RETURN_IF_ERROR(cudnn_set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  TRIPY_CUDA_TRY(cudnnBackendFinalize(pack.get()));
  return pack;
}

}  // namespace tripy::rt::cuda

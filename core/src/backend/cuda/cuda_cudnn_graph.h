// cuDNN graph API plumbing shared by the problems it runs (convolutions, cuda_conv_graph.h;
// attention, cuda_attention_cudnn.h): owned descriptors, tensors and pointwise operations, the
// heuristic's engine configurations and a plan of one of them.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_api.h"

namespace tripy::rt::cuda {

// The process-wide cuDNN handle (kUnavailable when cuDNN could not be loaded).
StatusOr<cudnnHandle_t> cudnn_handle();
// Held around cudnnSetStream and the call it is for: the handle is shared, and two programs
// running on two threads must not enqueue on each other's stream.
std::mutex& cudnn_call_mutex();
std::string cudnn_version();
// Whether environment variable `name` is set to "0" (how TRIPY_CUDNN and its kin turn cuDNN off).
bool env_is_zero(const char* name);
// TRIPY_CUDNN=0: every problem takes our own kernels (so the fallbacks are tested on GPUs too).
bool cudnn_disabled();

// Owns one cudnnBackendDescriptor_t.
class CudnnDesc {
 public:
  CudnnDesc() = default;
  ~CudnnDesc();
  CudnnDesc(CudnnDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  CudnnDesc& operator=(CudnnDesc&& o) noexcept;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  static StatusOr<CudnnDesc> make(cudnnBackendDescriptorType_t type);
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

Status cudnn_set(const CudnnDesc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                 const void* value);
Status cudnn_set_desc(const CudnnDesc& d, cudnnBackendAttributeName_t name, const CudnnDesc& value);
Status cudnn_set_i64s(const CudnnDesc& d, cudnnBackendAttributeName_t name, const std::vector<int64_t>& v);

// A finalized tensor descriptor (16-byte aligned). `by_value`: a scalar the variant pack passes
// as a host pointer.
StatusOr<CudnnDesc> cudnn_tensor(int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                 cudnnDataType_t type, bool is_virtual, bool by_value = false);

// A finalized operation descriptor of `type` with each (attribute, descriptor) pair set; null
// descriptors (optional operands) are left unset.
StatusOr<CudnnDesc> cudnn_operation(cudnnBackendDescriptorType_t type,
                                    std::initializer_list<std::pair<cudnnBackendAttributeName_t, const CudnnDesc*>> descs);

// y = mode(x[, b][, t]) as a finalized pointwise operation computing in `prec` (`axis` >= 0: the
// axis GEN_INDEX counts along); its pointwise descriptor goes to `keep` (it must outlive the graph).
StatusOr<CudnnDesc> cudnn_pointwise(cudnnPointwiseMode_t mode, const CudnnDesc& x, const CudnnDesc* b,
                                    const CudnnDesc* t, const CudnnDesc& y, std::deque<CudnnDesc>& keep,
                                    cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1);

// A finalized operation graph of `ops` (in order).
StatusOr<CudnnDesc> cudnn_graph(const std::vector<const CudnnDesc*>& ops);

// One engine configuration the heuristic offered: its rank in the heuristic's list (what an
// executable stores) and its engine's global index (checked when the list is rebuilt).
struct CudnnEngine {
  int32_t rank = 0;
  int64_t engine = -1;
};
// The heuristic's configurations for `graph` (mode A, else the fallback list), and those this
// backend would run, best first. Engines that compile at run time are left out unless
// `allow_runtime_compilation` (it costs seconds per plan); `exact_fp32` also leaves out engines
// that compute float32 on tensor cores or convert inputs down.
struct CudnnEngines {
  std::vector<CudnnDesc> configs;  // the heuristic's list, in its order
  std::vector<CudnnEngine> candidates;
};
StatusOr<CudnnEngines> cudnn_rank_engines(const CudnnDesc& graph, bool exact_fp32, bool allow_runtime_compilation);

// The execution plan of `config` and its workspace bytes; kUnavailable where cuDNN declines it or
// it needs more than `workspace_limit`.
StatusOr<CudnnDesc> cudnn_plan(const CudnnDesc& config, size_t workspace_limit, size_t* workspace_bytes);

// A finalized variant pack: data pointers by tensor uid, and the workspace.
StatusOr<CudnnDesc> cudnn_variant_pack(const std::vector<int64_t>& uids, const std::vector<void*>& data,
                                       void* workspace);

}  // namespace tripy::rt::cuda

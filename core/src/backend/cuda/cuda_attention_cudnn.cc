// cuDNN's fused attention (see cuda_attention_cudnn.h): the graph its flash-attention engines
// recognise, built from the graph API's operations.
#include "backend/cuda/cuda_attention_cudnn.h"

#include <cfloat>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_device.h"

namespace tripy::rt::cuda {
namespace {

// Tensor ids: the variant pack's, then the graph's virtual edges.
enum : int64_t {
  kQ = 1, kK, kV, kO, kScale, kMasked,
  kScores, kScaled, kRow, kCol, kKeep, kMaskedScores, kMax, kShifted, kExp, kSum, kLogSum, kStats, kProbs
};

cudnnDataType_t io_type(DType t) { return t == DType::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

}  // namespace

bool attention_cudnn_wanted(const AttentionCudnnProblem& pr, MaskKind mask, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (env_is_zero("TRIPY_ATTENTION_CUDNN") || cudnn_disabled()) return no("turned off");
  if (pr.dtype != DType::kFloat16 && pr.dtype != DType::kBFloat16) return no("float16 and bfloat16 only");
  if (mask != MaskKind::kNone) return no("explicit masks take our kernel");
  if (pr.L < kCudnnAttentionMinQueries) return no("short query sequence");
  if (pr.S == 0 || pr.Hkv == 0 || pr.Hq % pr.Hkv != 0) return no("no keys");
  for (int64_t d : {pr.D, pr.Dv})
    if (d % 8 != 0 || d > 128) return no("head size");
  for (const auto& s : pr.strides) {
    if (s[3] != 1) return no("strided head");
    for (int i = 0; i < 3; ++i)
      if (s[static_cast<size_t>(i)] % 8 != 0) return no("rows not 16-byte aligned");
  }
  // Last: the sizes alone decide most launches (decode steps), without loading cuDNN.
  if (!cudnn_loaded()) return no("cuDNN is not loaded");
  // 9.10.0 and 9.10.1 compute float16 attention wrongly in some configurations.
  const size_t version = api().cudnnGetVersion();
  if (version == 91000 || version == 91001) return no("cuDNN 9.10.0 and 9.10.1 are avoided");
  return true;
}

struct AttentionCudnnPlan::Compiled {
  std::deque<CudnnDesc> keep;  // tensors and operations: alive as long as the graph
  CudnnDesc graph;
  CudnnEngines engines;
  CudnnDesc plan;
  size_t workspace_bytes = 0;
  bool causal = false;
  float masked = 0.0f;  // what masked scores become
};

namespace {

std::string problem_key(const AttentionCudnnProblem& pr) {
  std::string key = std::to_string(static_cast<int>(pr.dtype)) + (pr.causal ? "c" : "n");
  for (int64_t v : {pr.B, pr.Hq, pr.Hkv, pr.L, pr.S, pr.D, pr.Dv}) key += "," + std::to_string(v);
  for (const auto& s : pr.strides)
    for (int64_t v : s) key += "," + std::to_string(v);
  return key;
}

Status build_graph(const AttentionCudnnProblem& pr, AttentionCudnnPlan::Compiled& c);

}  // namespace

StatusOr<std::unique_ptr<AttentionCudnnPlan>> AttentionCudnnPlan::create(const AttentionCudnnProblem& pr) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Compiled>> cache;
  // Plans are made with a GPU's cuDNN handle: one set per GPU.
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  const std::string key = "gpu:" + std::to_string(dev->index) + " " + problem_key(pr);
  std::shared_ptr<const Compiled> compiled;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) compiled = it->second;
  }
  if (!compiled) {
    auto c = std::make_shared<Compiled>();
    TRIPY_RETURN_IF_ERROR(build_graph(pr, *c));
    TRIPY_ASSIGN_OR_RETURN(c->engines, cudnn_rank_engines(c->graph, false, true));
    Status last = Status(StatusCode::kUnavailable, "no engine");
    for (const CudnnEngine& e : c->engines.candidates) {
      auto p = cudnn_plan(c->engines.configs[static_cast<size_t>(e.rank)], size_t{256} << 20, &c->workspace_bytes);
      if (p.ok()) {
        c->plan = std::move(p.value());
        break;
      }
      last = p.status();
    }
    if (!c->plan.get()) return last;
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() >= 64) cache.clear();  // many shapes: start over (plans in use stay alive)
    compiled = cache.emplace(key, std::move(c)).first->second;
  }
  std::unique_ptr<AttentionCudnnPlan> plan(new AttentionCudnnPlan());
  plan->compiled_ = std::move(compiled);
  plan->scale_ = pr.scale;
  plan->masked_ = plan->compiled_->masked;
  return plan;
}

size_t AttentionCudnnPlan::workspace_bytes() const { return compiled_->workspace_bytes; }

namespace {

Status build_graph(const AttentionCudnnProblem& pr, AttentionCudnnPlan::Compiled& c) {
  const cudnnDataType_t io = io_type(pr.dtype), f32 = CUDNN_DATA_FLOAT;
  const auto& [qs, ks, vs, os] = pr.strides;
  const std::vector<int64_t> scores = {pr.B, pr.Hq, pr.L, pr.S}, scores_strides = {pr.Hq * pr.L * pr.S, pr.L * pr.S, pr.S, 1};
  const std::vector<int64_t> rows = {pr.B, pr.Hq, pr.L, 1}, rows_strides = {pr.Hq * pr.L, pr.L, 1, 1};
  const std::vector<int64_t> one = {1, 1, 1, 1};
  auto add = [&](StatusOr<CudnnDesc> d) -> StatusOr<const CudnnDesc*> {
    if (!d.ok()) return d.status();
    c.keep.push_back(std::move(d.value()));
    return &c.keep.back();
  };
  auto scores_tensor = [&](int64_t uid, cudnnDataType_t t) { return add(cudnn_tensor(uid, scores, scores_strides, t, true)); };
  auto rows_tensor = [&](int64_t uid) { return add(cudnn_tensor(uid, rows, rows_strides, f32, true)); };
  std::vector<const CudnnDesc*> ops;
  auto push_op = [&](StatusOr<CudnnDesc> op) -> Status {
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* kept, add(std::move(op)));
    ops.push_back(kept);
    return ok_status();
  };
  auto pointwise = [&](cudnnPointwiseMode_t mode, const CudnnDesc* x, const CudnnDesc* b, const CudnnDesc* t,
                       const CudnnDesc* y, cudnnDataType_t prec, int64_t axis = -1) {
    return push_op(cudnn_pointwise(mode, *x, b, t, *y, c.keep, prec, axis));
  };
  auto matmul = [&](const CudnnDesc* a, const CudnnDesc* b, const CudnnDesc* out) -> Status {
    TRIPY_ASSIGN_OR_RETURN(CudnnDesc mm, CudnnDesc::make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    TRIPY_RETURN_IF_ERROR(cudnn_set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    TRIPY_CUDA_TRY(cudnnBackendFinalize(mm.get()));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* desc, add(std::move(mm)));
    return push_op(cudnn_operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
                                   {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
                                    {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
                                    {CUDNN_ATTR_OPERATION_MATMUL_CDESC, out},
                                    {CUDNN_ATTR_OPERATION_MATMUL_DESC, desc}}));
  };
  auto reduce = [&](cudnnReduceTensorOp_t mode, const CudnnDesc* x, const CudnnDesc* y) -> Status {
    TRIPY_ASSIGN_OR_RETURN(CudnnDesc red, CudnnDesc::make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    TRIPY_RETURN_IF_ERROR(cudnn_set(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
    TRIPY_RETURN_IF_ERROR(cudnn_set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    TRIPY_CUDA_TRY(cudnnBackendFinalize(red.get()));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* desc, add(std::move(red)));
    return push_op(cudnn_operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
                                   {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
                                    {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
                                    {CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc}}));
  };

  // K enters the first product transposed: its (head, key) dims swap, strides with them.
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* q, add(cudnn_tensor(kQ, {pr.B, pr.Hq, pr.L, pr.D}, {qs[0], qs[1], qs[2], qs[3]}, io, false)));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* kt, add(cudnn_tensor(kK, {pr.B, pr.Hkv, pr.D, pr.S}, {ks[0], ks[1], ks[3], ks[2]}, io, false)));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* v, add(cudnn_tensor(kV, {pr.B, pr.Hkv, pr.S, pr.Dv}, {vs[0], vs[1], vs[2], vs[3]}, io, false)));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* o, add(cudnn_tensor(kO, {pr.B, pr.Hq, pr.L, pr.Dv}, {os[0], os[1], os[2], os[3]}, io, false)));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* scale, add(cudnn_tensor(kScale, one, one, f32, false, true)));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* s, scores_tensor(kScores, f32));
  TRIPY_RETURN_IF_ERROR(matmul(q, kt, s));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* scaled, scores_tensor(kScaled, f32));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_MUL, s, scale, nullptr, scaled, f32));
  c.causal = pr.causal;
  const CudnnDesc* logits = scaled;
  if (pr.causal) {
    // Key j is visible to query i where i >= j (aligned at the top left, as our kernels do).
    // Older versions want a finite fill; from 9.10 on, -inf.
    c.masked = api().cudnnGetVersion() >= 91000 ? -INFINITY : -FLT_MAX;
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* fill, add(cudnn_tensor(kMasked, one, one, f32, false, true)));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* row, scores_tensor(kRow, CUDNN_DATA_INT32));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* col, scores_tensor(kCol, CUDNN_DATA_INT32));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* keep, scores_tensor(kKeep, CUDNN_DATA_BOOLEAN));
    TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* masked, scores_tensor(kMaskedScores, f32));
    TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, row, f32, 2));
    TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, col, f32, 3));
    TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN));
    TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, fill, keep, masked, f32));
    logits = masked;
  }
  // softmax: exp(x - max) / sum, with the log-sum branch the engines expect (its result unused).
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* mx, rows_tensor(kMax));
  TRIPY_RETURN_IF_ERROR(reduce(CUDNN_REDUCE_TENSOR_MAX, logits, mx));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* shifted, scores_tensor(kShifted, f32));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_SUB, logits, mx, nullptr, shifted, f32));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* e, scores_tensor(kExp, f32));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e, f32));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* sum, rows_tensor(kSum));
  TRIPY_RETURN_IF_ERROR(reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* log_sum, rows_tensor(kLogSum));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log_sum, f32));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* stats, rows_tensor(kStats));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_ADD, mx, log_sum, nullptr, stats, f32));
  TRIPY_ASSIGN_OR_RETURN(const CudnnDesc* probs, scores_tensor(kProbs, io));
  TRIPY_RETURN_IF_ERROR(pointwise(CUDNN_POINTWISE_DIV, e, sum, nullptr, probs, f32));
  TRIPY_RETURN_IF_ERROR(matmul(probs, v, o));
  TRIPY_ASSIGN_OR_RETURN(c.graph, cudnn_graph(ops));
  return ok_status();
}

}  // namespace

Status AttentionCudnnPlan::run(CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr out, CUdeviceptr workspace,
                               CUstream stream) {
  TRIPY_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  for (CUdeviceptr p : {q, k, v, out})
    if (p % 16 != 0) return Status(StatusCode::kUnavailable, "cuDNN attention needs 16-byte aligned operands");
  const std::array<CUdeviceptr, 5> ptrs = {q, k, v, out, workspace};
  if (!pack_.get() || ptrs != pack_ptrs_) {
    std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale};
    std::vector<void*> data = {reinterpret_cast<void*>(q), reinterpret_cast<void*>(k), reinterpret_cast<void*>(v),
                               reinterpret_cast<void*>(out), &scale_};
    if (compiled_->causal) uids.push_back(kMasked), data.push_back(&masked_);
    TRIPY_ASSIGN_OR_RETURN(pack_, cudnn_variant_pack(uids, data, reinterpret_cast<void*>(workspace)));
    pack_ptrs_ = ptrs;
  }
  std::lock_guard<std::mutex> lock(cudnn_call_mutex());
  TRIPY_CUDA_TRY(cudnnSetStream(h, stream));
  return TRIPY_CUDA(cudnnBackendExecute(h, compiled_->plan.get(), pack_.get()));
}

}  // namespace tripy::rt::cuda

// cuBLASLt GEMMs for kDot: problem shapes from slots, descriptor setup, heuristic or stored
// algorithms, row phases for outputs whose rows are not 16-byte aligned, and build-time timing of
// the candidates (TensorRT-style tactic selection).
#include "backend/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_kinds.h"

namespace tripy::rt::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    case DType::kInt8: return CUDA_R_8I;
    case DType::kInt32: return CUDA_R_32I;
    case DType::kFloat8E4M3: return CUDA_R_8F_E4M3;
    default: return CUDA_R_32F;
  }
}

// int8 x int8 sums in int32 with int32 alpha and beta (cuBLASLt's CUBLAS_COMPUTE_32I row with
// C = D int32); everything else, float8 included, in float32 with float alpha and beta.
bool int_scale(const DotProblem& pr) { return pr.operand_dtype() == DType::kInt8; }

int pow2_alignment(uint64_t v) {
  int a = 256;
  while (a > 1 && (v % a) != 0) a >>= 1;
  return a;
}

}  // namespace

StatusOr<cublasLtHandle_t> lt_handle() {
  static auto* handles = new PerGpu<cublasLtHandle_t>();  // never destroyed: used until exit
  return handles->get([]() -> StatusOr<cublasLtHandle_t> {
    if (!cublaslt_loaded())
      return Status(StatusCode::kUnavailable,
                    "cuBLASLt (libcublasLt.so.13) could not be loaded; matrix products need it on the GPU");
    cublasLtHandle_t h = nullptr;
    TRIPY_CUDA_TRY(cublasLtCreate(&h));
    return h;
  });
}

bool lt_runs_quantized(DType operand) {
  static std::mutex mutex;
  static std::map<DType, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(operand);
  if (it != known.end()) return it->second;
  DotProblem pr;
  pr.operand = operand;
  pr.trans_a = true;  // the weight stored [N, K]
  pr.m = pr.n = pr.k = 64;
  // float8 also writes its scaled sum in float16 and bfloat16 (fusion folds the rescale there).
  std::vector<DType> outputs{dot_accumulator_dtype(operand)};
  if (operand == DType::kFloat8E4M3) outputs.insert(outputs.end(), {DType::kFloat16, DType::kBFloat16});
  bool ok = make_current().ok();
  for (DType out : outputs) {
    pr.dtype = out;
    ok = ok && DotPlan::create(pr, nullptr, 256, kDotWorkspaceBytes).ok();
  }
  known[operand] = ok;
  return ok;
}

std::string cublaslt_version() {
  return cublaslt_loaded() ? std::to_string(api().cublasLtGetVersion()) : "none";
}

int dot_alignment(const DotProblem& pr, std::initializer_list<CUdeviceptr> addresses) {
  const int es = dtype_size(pr.dtype), eo = dtype_size(pr.operand_dtype());
  int a = 256;
  for (CUdeviceptr p : addresses)
    if (p) a = std::min(a, pow2_alignment(p));
  for (int64_t s : {pr.stride_a * eo, pr.stride_b * eo, pr.stride_c * es})
    if (s) a = std::min(a, pow2_alignment(static_cast<uint64_t>(s)));
  for (size_t i = 0; i < pr.offset_a.size(); ++i)
    for (int64_t s : {pr.offset_a[i] * eo, pr.offset_b[i] * eo, pr.offset_c[i] * es})
      if (s) a = std::min(a, pow2_alignment(static_cast<uint64_t>(s)));
  return a;
}

DotPlan::~DotPlan() {
  if (a_) (void)TRIPY_CUDA(cublasLtMatrixLayoutDestroy(a_));
  if (b_) (void)TRIPY_CUDA(cublasLtMatrixLayoutDestroy(b_));
  if (c_) (void)TRIPY_CUDA(cublasLtMatrixLayoutDestroy(c_));
  for (const Call& c : calls_)
    for (cublasLtMatrixLayout_t l : {c.a, c.b, c.d})
      if (l) (void)TRIPY_CUDA(cublasLtMatrixLayoutDestroy(l));
  if (desc_) (void)TRIPY_CUDA(cublasLtMatmulDescDestroy(desc_));
}

namespace {

Status make_layout(cublasLtMatrixLayout_t* out, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                   int64_t batch, int64_t stride) {
  TRIPY_CUDA_TRY(cublasLtMatrixLayoutCreate(out, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    TRIPY_CUDA_TRY(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    TRIPY_CUDA_TRY(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof(stride)));
  }
  return ok_status();
}

// Descriptors for `pr` (shared by create() and candidates()).
Status describe(const DotProblem& pr, cublasLtMatmulDesc_t* desc, cublasLtMatrixLayout_t* a,
                cublasLtMatrixLayout_t* b, cublasLtMatrixLayout_t* c) {
  const cudaDataType_t t = cuda_type(pr.dtype), to = cuda_type(pr.operand_dtype());
  // float32 keeps full FP32 arithmetic (no TF32); float16/bfloat16 accumulate in float32; int8
  // in int32 (exact), float8 in float32 (its A/B scale pointers stay unset: 1; the rescale by the
  // dequantize scales is alpha where fusion folded it, else the kernel after this one).
  if (int_scale(pr)) TRIPY_CUDA_TRY(cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  else TRIPY_CUDA_TRY(cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = pr.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = pr.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TRIPY_CUDA_TRY(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TRIPY_CUDA_TRY(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (pr.activation == Activation::kRelu) epi = pr.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (pr.bias) epi = CUBLASLT_EPILOGUE_BIAS;  // GELU (erf form) runs after, exactly
  TRIPY_CUDA_TRY(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (pr.bias) {
    TRIPY_CUDA_TRY(cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t)));
  }
  // A = rhs (m x k after op), B = lhs (k x n after op), C = D: m x n, ld m.
  TRIPY_RETURN_IF_ERROR(make_layout(a, to, pr.trans_a ? pr.k : pr.m, pr.trans_a ? pr.m : pr.k,
                                    pr.trans_a ? pr.k : pr.m, pr.batch, pr.stride_a));
  TRIPY_RETURN_IF_ERROR(make_layout(b, to, pr.trans_b ? pr.n : pr.k, pr.trans_b ? pr.k : pr.n,
                                    pr.trans_b ? pr.n : pr.k, pr.batch, pr.stride_b));
  TRIPY_RETURN_IF_ERROR(make_layout(c, t, pr.m, pr.n, pr.m, pr.batch, pr.stride_c));
  return ok_status();
}

// Layouts of one row-phase call: A stored k x m (trans_a), B stored k x n, D m x n.
Status describe_call(const DotProblem& pr, const GemmCall& c, cublasLtMatrixLayout_t* a, cublasLtMatrixLayout_t* b,
                     cublasLtMatrixLayout_t* d) {
  const cudaDataType_t t = cuda_type(pr.dtype);
  TRIPY_RETURN_IF_ERROR(make_layout(a, t, pr.k, c.m, c.lda, 1, 0));
  TRIPY_RETURN_IF_ERROR(make_layout(b, t, pr.k, c.n, c.ldb, 1, 0));
  return make_layout(d, t, c.m, c.n, c.ldd, 1, 0);
}

StatusOr<std::vector<cublasLtMatmulHeuristicResult_t>> heuristics(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                                                  cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                                  cublasLtMatrixLayout_t c, size_t workspace,
                                                                  int alignment, int count) {
  cublasLtMatmulPreference_t pref = nullptr;
  TRIPY_CUDA_TRY(cublasLtMatmulPreferenceCreate(&pref));
  uint32_t al = static_cast<uint32_t>(alignment);
  Status st = TRIPY_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &workspace, sizeof(workspace)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st.ok()) st = TRIPY_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  if (st.ok())
    st = TRIPY_CUDA(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, count, results.data(), &found));
  (void)TRIPY_CUDA(cublasLtMatmulPreferenceDestroy(pref));
  TRIPY_RETURN_IF_ERROR(st);
  results.resize(static_cast<size_t>(found));
  if (results.empty()) return Status(StatusCode::kInternal, "cuBLASLt found no algorithm for this matrix product");
  return results;
}

}  // namespace

StatusOr<std::unique_ptr<DotPlan>> DotPlan::create(const DotProblem& pr, const AlgoBytes* stored, int alignment,
                                                   size_t workspace_bytes) {
  if (stored && stored->size() == sizeof(cublasLtMatmulAlgo_t) + 1 && stored->back() == 'P' && alignment >= 16 &&
      !row_phase_calls(pr).empty()) {
    const AlgoBytes algo(stored->begin(), stored->end() - 1);
    auto phases = create_phases(pr, &algo, workspace_bytes);
    if (phases.ok()) return phases;
  }
  TRIPY_ASSIGN_OR_RETURN(cublasLtHandle_t h, lt_handle());
  auto plan = std::make_unique<DotPlan>();
  plan->problem_ = pr;
  plan->alignment_ = alignment;
  TRIPY_RETURN_IF_ERROR(describe(pr, &plan->desc_, &plan->a_, &plan->b_, &plan->c_));
  bool have = false;
  if (stored && stored->size() == sizeof(cublasLtMatmulAlgo_t) && alignment >= 16) {
    cublasLtMatmulAlgo_t algo;
    std::memcpy(&algo, stored->data(), sizeof(algo));
    cublasLtMatmulHeuristicResult_t check{};
    // A stored algorithm may not suit other shapes of the range: cuBLASLt says so here, and we
    // fall back to its heuristic.
    cublasStatus_t r = api().cublasLtMatmulAlgoCheck(h, plan->desc_, plan->a_, plan->b_, plan->c_, plan->c_, &algo, &check);
    if (r == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes) {
      plan->algo_ = algo;
      plan->workspace_ = check.workspaceSize;
      have = true;
    }
  }
  if (!have) {
    TRIPY_ASSIGN_OR_RETURN(auto results, heuristics(h, plan->desc_, plan->a_, plan->b_, plan->c_, workspace_bytes,
                                                    alignment, 1));
    plan->algo_ = results[0].algo;
    plan->workspace_ = results[0].workspaceSize;
  }
  return plan;
}

StatusOr<std::unique_ptr<DotPlan>> DotPlan::create_phases(const DotProblem& pr, const AlgoBytes* stored,
                                                          size_t workspace_bytes) {
  const std::vector<GemmCall> shapes = row_phase_calls(pr);
  if (shapes.empty()) return internal_error("this matrix product has no row-phase plan");
  TRIPY_ASSIGN_OR_RETURN(cublasLtHandle_t h, lt_handle());
  auto plan = std::make_unique<DotPlan>();
  plan->problem_ = pr;
  plan->alignment_ = 16;
  TRIPY_RETURN_IF_ERROR(describe(pr, &plan->desc_, &plan->a_, &plan->b_, &plan->c_));
  for (size_t i = 0; i < shapes.size(); ++i) {
    plan->calls_.push_back(Call{shapes[i]});
    Call& c = plan->calls_.back();  // owned by the plan from here on, so errors free it
    TRIPY_RETURN_IF_ERROR(describe_call(pr, shapes[i], &c.a, &c.b, &c.d));
    bool have = false;
    if (i > 0 && stored && stored->size() == sizeof(cublasLtMatmulAlgo_t)) {
      std::memcpy(&c.algo, stored->data(), sizeof(c.algo));
      cublasLtMatmulHeuristicResult_t check{};
      have = api().cublasLtMatmulAlgoCheck(h, plan->desc_, c.a, c.b, c.d, c.d, &c.algo, &check) ==
                 CUBLAS_STATUS_SUCCESS &&
             check.workspaceSize <= workspace_bytes;
      if (have) plan->workspace_ = std::max(plan->workspace_, check.workspaceSize);
    }
    if (!have) {
      TRIPY_ASSIGN_OR_RETURN(auto results, heuristics(h, plan->desc_, c.a, c.b, c.d, workspace_bytes, 16, 1));
      c.algo = results[0].algo;
      plan->workspace_ = std::max(plan->workspace_, results[0].workspaceSize);
    }
  }
  return plan;
}

StatusOr<std::vector<AlgoBytes>> DotPlan::phase_candidates(const DotProblem& pr, size_t workspace_bytes, int count) {
  TRIPY_ASSIGN_OR_RETURN(auto plan, DotPlan::create_phases(pr, nullptr, workspace_bytes));
  TRIPY_ASSIGN_OR_RETURN(cublasLtHandle_t h, lt_handle());
  const Call& c = plan->calls_.at(1);
  TRIPY_ASSIGN_OR_RETURN(auto results, heuristics(h, plan->desc_, c.a, c.b, c.d, workspace_bytes, 16, count));
  std::vector<AlgoBytes> out;
  for (const auto& r : results) {
    const auto* p = reinterpret_cast<const uint8_t*>(&r.algo);
    out.emplace_back(p, p + sizeof(r.algo));
  }
  return out;
}

StatusOr<std::vector<AlgoBytes>> DotPlan::candidates(const DotProblem& pr, size_t workspace_bytes, int count) {
  TRIPY_ASSIGN_OR_RETURN(auto plan, DotPlan::create(pr, nullptr, 256, workspace_bytes));
  TRIPY_ASSIGN_OR_RETURN(cublasLtHandle_t h, lt_handle());
  TRIPY_ASSIGN_OR_RETURN(auto results, heuristics(h, plan->desc_, plan->a_, plan->b_, plan->c_, workspace_bytes,
                                                  256, count));
  std::vector<AlgoBytes> out;
  for (const auto& r : results) {
    const auto* p = reinterpret_cast<const uint8_t*>(&r.algo);
    out.emplace_back(p, p + sizeof(r.algo));
  }
  return out;
}

Status DotPlan::run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr d, CUdeviceptr workspace,
                    size_t workspace_bytes, CUstream stream, CUdeviceptr c) const {
  TRIPY_ASSIGN_OR_RETURN(cublasLtHandle_t h, lt_handle());
  if (problem_.bias) {
    const void* bp = reinterpret_cast<const void*>(bias);
    TRIPY_CUDA_TRY(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  // alpha and beta have the descriptor's scale type: int32 for int8 operands, else float.
  const float alpha_f = static_cast<float>(problem_.scale), beta_f = problem_.residual ? 1.0f : 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const void* alpha = int_scale(problem_) ? static_cast<const void*>(&alpha_i) : &alpha_f;
  const void* beta = int_scale(problem_) ? static_cast<const void*>(&beta_i) : &beta_f;
  const int64_t es = dtype_size(problem_.dtype), eo = dtype_size(problem_.operand_dtype());
  for (const Call& c : calls_) {
    auto* pa = reinterpret_cast<const void*>(a + c.shape.offset_a * eo);
    auto* pb = reinterpret_cast<const void*>(b + c.shape.offset_b * eo);
    auto* pd = reinterpret_cast<void*>(d + c.shape.offset_d * es);
    TRIPY_CUDA_TRY(cublasLtMatmul(h, desc_, alpha, pa, c.a, pb, c.b, beta, pd, c.d, pd, c.d, &c.algo,
                                  reinterpret_cast<void*>(workspace), workspace_bytes, stream));
  }
  if (!calls_.empty()) return ok_status();
  for (size_t i = 0; i < problem_.offset_a.size(); ++i) {
    auto* pa = reinterpret_cast<const void*>(a + problem_.offset_a[i] * eo);
    auto* pb = reinterpret_cast<const void*>(b + problem_.offset_b[i] * eo);
    auto* pd = reinterpret_cast<void*>(d + problem_.offset_c[i] * es);
    const void* pc = problem_.residual ? reinterpret_cast<const void*>(c + problem_.offset_c[i] * es) : pd;
    TRIPY_CUDA_TRY(cublasLtMatmul(h, desc_, alpha, pa, a_, pb, b_, beta, pc, c_, pd, c_, &algo_,
                                  reinterpret_cast<void*>(workspace), workspace_bytes, stream));
  }
  return ok_status();
}

// kDot's step: our GEMV kernel where the build chose it and it applies at these sizes (its module
// is then in the program: load() found its functions); else the cuBLASLt plan at 256-byte
// alignment (every buffer of ours is; a run with less aligned operands plans again), and the exact
// GELU after it where the dot has one.
StatusOr<bool> plan_dot_step(PlanContext& c, const Kernel& k, Step& step) {
  const Program& p = c.program;
  TRIPY_ASSIGN_OR_RETURN(DotProblem pr, dot_problem(p, k, c.slots));
  if (pr.m * pr.n == 0) return false;  // empty output
  const AlgoBytes& stored = c.code[static_cast<size_t>(step.kernel)].algo;
  if (std::optional<GemvTactic> gemv = gemv_choice(stored); gemv && gemv_applies(pr)) {
    auto fn = c.layout_fns.find(gemv_function_for(pr, *gemv));
    auto fallback = c.layout_fns.find(gemv_fallback_for(pr, *gemv));
    if (fn != c.layout_fns.end() && fallback != c.layout_fns.end()) {
      step.launches.push_back(plan_gemv(pr, *gemv, fn->second, fallback->second, k.outputs[0], k.inputs[0],
                                        k.inputs[1], k.dot.has_bias ? k.inputs[2] : -1, pr.constant_weight));
      return true;
    }
  }
  auto plan = DotPlan::create(pr, stored.empty() ? nullptr : &stored, 256, kDotWorkspaceBytes);
  if (!plan.ok()) return Status(plan.status()).at(kernel_source(p, step.kernel));
  step.dot = std::move(plan.value());
  // The program's workspace is what its plans' algorithms ask for (often none), not the limit:
  // every executable and cached eager program holds its own.
  c.workspace = std::max(c.workspace, step.dot->workspace_bytes());
  if (k.dot.activation == Activation::kGelu) {
    const int32_t out = k.outputs[0];
    const int64_t n = numel_of(c.shapes[static_cast<size_t>(out)]);
    Launch g;
    g.fn = c.layout_fns.at(gelu_function(p.buffers[out].dtype));
    g.words = {0, n, 0};
    g.ptrs = {{0, out, 0}};
    g.vector_word = 2;
    g.scalar_grid = g.grid = grid_for(n, 256, c.sm_count);
    g.vector_grid = grid_for((n + 7) / 8, 256, c.sm_count);
    step.launches.push_back(std::move(g));
  }
  return true;
}

Status run_step_dot(Step& step, const RunContext& c, const AlgoBytes* stored, CUdeviceptr a, CUdeviceptr b,
                    CUdeviceptr bias, CUdeviceptr d, CUdeviceptr workspace, size_t workspace_bytes) {
  // Addresses less aligned than the plan assumed need an algorithm that accepts them (and the
  // workspace the program has).
  int align = dot_alignment(step.dot->problem(), {a, b, bias, d});
  if (align < step.dot->alignment()) {
    auto plan = DotPlan::create(step.dot->problem(), stored, align, workspace_bytes);
    if (!plan.ok()) return Status(plan.status()).at(kernel_source(c.program, step.kernel));
    step.dot = std::move(plan.value());
  }
  return step.dot->run(a, b, bias, d, workspace, workspace_bytes, c.stream);
}

Status run_dot_step(Step& step, const Kernel& k, const RunContext& c) {
  if (!step.dot) return ok_status();
  const std::vector<CUdeviceptr>& base = c.base;
  const CUdeviceptr bias = k.dot.has_bias ? base[k.inputs[2]] : 0;
  const AlgoBytes& stored = c.code[static_cast<size_t>(step.kernel)].algo;
  return run_step_dot(step, c, stored.empty() ? nullptr : &stored, base[k.inputs[1]], base[k.inputs[0]], bias,
                      base[k.outputs[0]], c.workspace, c.workspace_bytes);
}

}  // namespace tripy::rt::cuda

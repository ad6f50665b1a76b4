// Running a loaded program: resolve buffers to device addresses, plan each input-shape signature
// once, launch directly on its first call and replay a CUDA graph on later calls.
//
// Graphs bake in addresses. Inputs and outputs change address every call, so a signature's graph
// reads its inputs from staging buffers and writes its outputs to staging buffers; three kinds
// of node surround the captured kernels: one byte-copy node per input (user -> staging), the
// captured body, one per output (staging -> the fresh output). A replay patches those copy nodes'
// two addresses (cuGraphExecKernelNodeSetParams) and launches once. The copies cost bandwidth, so
// programs whose inputs and outputs are large (where launches are cheap next to the work) run
// without a graph.
//
// Donated inputs (a KV cache updated in place) are the exception: staging them would copy the
// whole cache twice per call. The graph uses their own addresses instead, and is captured again
// when a call passes donated tensors at other addresses (a decode loop passes the same ones).
#include "backend/cuda/cuda_program.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_error_record.h"
#include "backend/cuda/cuda_plugin.h"
#include "backend/cuda/cuda_pool.h"

namespace tripy::rt::cuda {
namespace {

// TRIPY_CUDA_GRAPHS=0 never replays graphs, =1 always does, unset: when inputs+outputs are small.
int graph_mode() {
  const char* v = std::getenv("TRIPY_CUDA_GRAPHS");
  return v == nullptr ? -1 : std::atoi(v);
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

}  // namespace

// Buffers the graph reads or writes in the caller's memory (no staging copy): donated inputs and
// the outputs that live in them.
bool CudaLoadedProgram::in_caller_memory(const BufferDesc& d) const {
  if (d.kind == BufferDesc::Kind::kInput) return program_->inputs[static_cast<size_t>(d.index)].donated;
  return d.kind == BufferDesc::Kind::kOutput && d.donor >= 0;
}

ModuleSet::~ModuleSet() {
  for (CUmodule m : modules) (void)TRIPY_CUDA(cuModuleUnload(m));
}

CudaLoadedProgram::Signature::~Signature() {
  if (exec) (void)TRIPY_CUDA(cuGraphExecDestroy(exec));
  if (graph) (void)TRIPY_CUDA(cuGraphDestroy(graph));
}

StatusOr<std::unique_ptr<CudaLoadedProgram>> CudaLoadedProgram::create(std::shared_ptr<const Program> program,
                                                                        std::shared_ptr<ModuleSet> modules,
                                                                        std::vector<KernelCode> kernels,
                                                                        LayoutFunctions layout_fns) {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  TRIPY_RETURN_IF_ERROR(make_current());
  std::unique_ptr<CudaLoadedProgram> lp(new CudaLoadedProgram());
  lp->program_ = std::move(program);
  lp->modules_ = std::move(modules);
  lp->kernels_ = std::move(kernels);
  lp->layout_fns_ = std::move(layout_fns);
  lp->sm_count_ = dev->sm_count;
  CUstream s = default_stream();
  for (const Tensor& c : lp->program_->constants) {
    TRIPY_ASSIGN_OR_RETURN(Tensor d, empty_device(c.dtype(), c.shape(), s));
    if (c.nbytes() > 0)
      TRIPY_CUDA_TRY(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(d.data()), c.data(),
                                       static_cast<size_t>(c.nbytes()), s));
    lp->constants_.push_back(std::move(d));
  }
  TRIPY_CUDA_TRY(cuStreamSynchronize(s));
  lp->last_stream_ = s;
  return lp;
}

CudaLoadedProgram::~CudaLoadedProgram() {
  if (make_current().ok() && last_stream_) (void)TRIPY_CUDA(cuStreamSynchronize(last_stream_));
  if (ready_event_) (void)TRIPY_CUDA(cuEventDestroy(ready_event_));
  if (done_event_) (void)TRIPY_CUDA(cuEventDestroy(done_event_));
  signatures_.clear();
}

Status CudaLoadedProgram::set_stream(void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Finish on the old stream now: the caller may destroy it once we stop using it.
  if (last_stream_ && last_stream_ != static_cast<CUstream>(stream)) {
    TRIPY_RETURN_IF_ERROR(make_current());
    TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
    last_stream_ = nullptr;
  }
  stream_ = stream;
  return ok_status();
}

SourceRef CudaLoadedProgram::source_of(int32_t kernel) const {
  const Kernel& k = program_->kernels[kernel];
  if (k.source >= 0 && static_cast<size_t>(k.source) < program_->sources.size())
    return std::make_shared<SourceInfo>(program_->sources[k.source]);
  return nullptr;
}

void CudaLoadedProgram::drop_signatures() {
  if (last_stream_) (void)TRIPY_CUDA(cuStreamSynchronize(last_stream_));
  signatures_.clear();
}

StatusOr<CudaLoadedProgram::Signature*> CudaLoadedProgram::signature(const std::vector<int64_t>& slots,
                                                                     CUstream stream) {
  auto it = signatures_.find(slots);
  if (it != signatures_.end()) return it->second.get();
  if (signatures_.size() >= 64) drop_signatures();  // many shapes: start over rather than grow
  const Program& p = *program_;
  auto sig = std::make_unique<Signature>();
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    sig->shapes.push_back(p.buffer_shape(static_cast<int32_t>(b), slots));
    const BufferDesc& d = p.buffers[b];
    int64_t bytes = product(sig->shapes.back()) * dtype_size(d.dtype);
    if (d.kind == BufferDesc::Kind::kTemp) sig->arena_bytes = std::max(sig->arena_bytes, d.offset + bytes);
    if ((d.kind == BufferDesc::Kind::kInput || d.kind == BufferDesc::Kind::kOutput) && !in_caller_memory(d))
      sig->io_bytes += bytes;
  }
  sig->arena_bytes = std::max(sig->arena_bytes, p.arena_bytes);
  size_t workspace = 0;
  int64_t counters = 0;
  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const Kernel& k = p.kernels[ki];
    Step step;
    step.kernel = static_cast<int32_t>(ki);
    Status st;
    if (k.kind == KernelKind::kFused) {
      auto l = plan_fused(p, k, kernels_[ki].layout, kernels_[ki].fn, slots, sm_count_);
      if (!l.ok()) return l.status();
      step.launches = std::move(l.value());
    } else if (k.kind == KernelKind::kDot) {
      TRIPY_ASSIGN_OR_RETURN(DotProblem pr, dot_problem(p, k, slots));
      if (pr.m * pr.n == 0) continue;  // empty output
      const AlgoBytes* algo = kernels_[ki].algo.empty() ? nullptr : &kernels_[ki].algo;
      auto plan = DotPlan::create(pr, algo, 256, kDotWorkspaceBytes);
      if (!plan.ok()) return Status(plan.status()).at(source_of(step.kernel));
      step.dot = std::move(plan.value());
      workspace = std::max(workspace, kDotWorkspaceBytes);
      if (k.dot.activation == Activation::kGelu) {
        const int32_t out = k.outputs[0];
        const int64_t n = product(sig->shapes[out]);
        Launch g;
        g.fn = layout_fns_.at(gelu_function(p.buffers[out].dtype));
        g.words = {0, n, 0};
        g.ptrs = {{0, out, 0}};
        g.vector_word = 2;
        g.scalar_grid = g.grid = grid_for(n, 256, sm_count_);
        g.vector_grid = grid_for((n + 7) / 8, 256, sm_count_);
        step.launches.push_back(std::move(g));
      }
    } else if (k.kind == KernelKind::kAttention) {
      TRIPY_RETURN_IF_ERROR(plan_attention_step(k, step, slots, &workspace, &counters));
    } else if (k.kind == KernelKind::kPlugin) {
      auto l = plan_plugin(p, k, kernels_[ki].fn, sig->shapes);
      if (!l.ok()) return l.status();
      step.launches = std::move(l.value());
    } else if (k.kind == KernelKind::kPooling) {
      step.launches = plan_pool_launch(p, k, kernels_[ki].fn, slots, sm_count_);
      if (step.launches.empty()) continue;  // empty output
    } else if (k.kind == KernelKind::kConvolution) {
      Status st = plan_conv_step(k, step, slots, stream, &workspace);
      if (!st.ok()) return st.at(source_of(step.kernel));
      if (step.launches.empty() && !step.convolution) continue;  // empty output
    } else {
      auto l = plan_layout(p, k, layout_fns_, slots, sm_count_);
      if (!l.ok()) return l.status();
      step.launches = std::move(l.value());
      if ((k.kind == KernelKind::kGather || k.kind == KernelKind::kUpdateSlice) && !step.launches.empty()) {
        if (!errors_) {
          auto record = ErrorRecord::create([this](const ErrorRecord::Fields& f) { return explain_error(f); }, stream);
          if (!record.ok()) return record.status();
          errors_ = std::move(record).value();
        }
        for (Launch& g : step.launches) {
          if (g.words.size() <= kGatherClaimWord) continue;  // update_slice's copy of its operand
          g.words[kGatherErrorWord] = static_cast<int64_t>(errors_->record());
          g.words[kGatherTagWord] = static_cast<int64_t>(ki) + 1;
          g.words[kGatherClaimWord] = static_cast<int64_t>(errors_->claim());
        }
      }
    }
    sig->steps.push_back(std::move(step));
  }
  TRIPY_RETURN_IF_ERROR(ensure_workspace(workspace, stream));
  TRIPY_RETURN_IF_ERROR(ensure_counters(counters, stream));
  Signature* raw = sig.get();
  signatures_[slots] = std::move(sig);
  return raw;
}

// One workspace serves every library call of the program (they run one after another on one
// stream); it grows to what the largest plan asks. Graphs hold its address: growing drops them.
Status CudaLoadedProgram::ensure_workspace(size_t bytes, CUstream stream) {
  if (static_cast<int64_t>(bytes) <= workspace_capacity_) return ok_status();
  for (auto& [key, s] : signatures_) {
    if (s->exec) (void)TRIPY_CUDA(cuGraphExecDestroy(s->exec));
    s->exec = nullptr;
  }
  if (last_stream_) TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
  TRIPY_ASSIGN_OR_RETURN(workspace_, empty_device(DType::kInt8, {static_cast<int64_t>(bytes)}, stream));
  workspace_capacity_ = static_cast<int64_t>(bytes);
  return ok_status();
}

// Split attention's counters: each launch's last block per group leaves its counter at zero
// again, so they are zeroed once, here. Graphs hold their address: growing drops them.
Status CudaLoadedProgram::ensure_counters(int64_t count, CUstream stream) {
  if (count <= counters_capacity_) return ok_status();
  for (auto& [key, s] : signatures_) {
    if (s->exec) (void)TRIPY_CUDA(cuGraphExecDestroy(s->exec));
    s->exec = nullptr;
  }
  if (last_stream_) TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
  TRIPY_ASSIGN_OR_RETURN(counters_, empty_device(DType::kInt32, {count}, stream));
  TRIPY_CUDA_TRY(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(counters_.data()), 0, static_cast<size_t>(count) * 4, stream));
  counters_capacity_ = count;
  return ok_status();
}

// cuDNN where it takes the problem (its plan, plus our epilogue if it does not fuse it), else our
// direct kernel. TRIPY_CUDNN=0 forces the direct kernel, so the fallback is tested on GPUs too.
Status CudaLoadedProgram::plan_conv_step(const Kernel& k, Step& step, const std::vector<int64_t>& slots,
                                         CUstream stream, size_t* workspace) {
  const Program& p = *program_;
  TRIPY_ASSIGN_OR_RETURN(ConvProblem pr, conv_problem(p, k, slots));
  if (pr.out_elements() == 0) return ok_status();
  const CUfunction fn = kernels_[step.kernel].fn;
  if (!fn) return kernel_failure(p, k, "no CUDA function for this convolution");
  step.conv_direct = plan_conv_launch(k, pr, fn, false, sm_count_);
  step.conv_epilogue = plan_conv_launch(k, pr, fn, true, sm_count_);
  if (numel_of(pr.x) > 0 && cudnn_usable(pr)) {
    const AlgoBytes* algo = kernels_[step.kernel].algo.empty() ? nullptr : &kernels_[step.kernel].algo;
    auto plan = ConvPlan::create(pr, algo);
    if (plan.ok()) {
      *workspace = std::max(*workspace, plan.value()->workspace_bytes());
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

Status CudaLoadedProgram::run_conv_step(Step& step, const Kernel& k, const std::vector<CUdeviceptr>& base,
                                        CUstream stream) {
  const ConvolutionAttrs& a = k.convolution;
  size_t next = 2;
  const CUdeviceptr bias = a.has_bias ? base[k.inputs[next++]] : 0;
  const CUdeviceptr residual = a.has_residual ? base[k.inputs[next++]] : 0;
  Status st = step.convolution->run(base[k.inputs[0]], base[k.inputs[1]], bias, residual, base[k.outputs[0]],
                             reinterpret_cast<CUdeviceptr>(workspace_.data()),
                             static_cast<size_t>(workspace_capacity_), stream);
  const bool epilogue = a.has_bias || a.has_residual || a.activation != Activation::kNone;
  if (st.ok() && epilogue && !step.convolution->fused()) st = launch(step.conv_epilogue, base, stream);
  if (st.ok() || st.code() == StatusCode::kResourceExhausted) return st;
  // cuDNN refused at run time (an alignment, a layout): our kernel from now on.
  if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN failed (%s); using the direct kernel\n",
                                       k.name.c_str(), st.message().c_str());
  step.convolution.reset();
  step.launches = {step.conv_direct};
  return ok_status();
}

// cuDNN's fused attention where the launch offers it (long sequences) and cuDNN makes a plan,
// else (and as the fallback) our kernel.
Status CudaLoadedProgram::plan_attention_step(const Kernel& k, Step& step, const std::vector<int64_t>& slots,
                                              size_t* workspace, int64_t* counters) {
  const Program& p = *program_;
  const AttentionFunctions& fns = kernels_[step.kernel].attention;
  TRIPY_ASSIGN_OR_RETURN(AttentionLaunch a, plan_attention_words(p, k, fns, slots, sm_count_));
  const std::optional<AttentionCudnnProblem> cudnn = a.cudnn;
  const auto offsets = a.byte_offsets;
  TRIPY_ASSIGN_OR_RETURN(step.launches, attention_launches(p, k, fns, std::move(a)));
  for (const Launch& x : step.launches) {
    *workspace = std::max(*workspace, static_cast<size_t>(x.workspace_bytes));
    *counters = std::max(*counters, x.counters);
  }
  if (!cudnn || step.launches.empty()) return ok_status();
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = AttentionCudnnPlan::create(*cudnn);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kResourceExhausted) return plan.status();
    if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN attention declined (%s); using our kernel\n",
                                         k.name.c_str(), plan.status().message().c_str());
    return ok_status();
  }
  if (debug_level() >= 1)
    std::fprintf(stderr, "tripy: %s: attention through cuDNN (plan %.1f ms, workspace %zu bytes)\n", k.name.c_str(),
                 ms_since(t0), plan.value()->workspace_bytes());
  *workspace = std::max(*workspace, plan.value()->workspace_bytes());
  step.attention = std::move(plan.value());
  step.attention_offsets = offsets;
  step.attention_fallback = std::move(step.launches);
  step.launches.clear();
  return ok_status();
}

Status CudaLoadedProgram::run_attention_step(Step& step, const Kernel& k, const std::vector<CUdeviceptr>& base,
                                             CUstream stream) {
  auto at = [&](int operand, int32_t buffer) {
    return base[buffer] + static_cast<CUdeviceptr>(step.attention_offsets[static_cast<size_t>(operand)]);
  };
  Status st = step.attention->run(at(AttentionAttrs::kQ, k.inputs[0]), at(AttentionAttrs::kK, k.inputs[1]),
                                  at(AttentionAttrs::kV, k.inputs[2]), at(AttentionAttrs::kOut, k.outputs[0]),
                                  reinterpret_cast<CUdeviceptr>(workspace_.data()), stream);
  if (st.ok() || st.code() == StatusCode::kResourceExhausted) return st;
  // cuDNN refused at run time (an address's alignment): our kernel from now on.
  if (debug_level() >= 1) std::fprintf(stderr, "tripy: %s: cuDNN attention failed (%s); using our kernel\n",
                                       k.name.c_str(), st.message().c_str());
  step.attention.reset();
  step.launches = std::move(step.attention_fallback);
  return ok_status();
}

void CudaLoadedProgram::resolve(std::vector<CUdeviceptr>& base, const std::vector<CUdeviceptr>& inputs,
                                const std::vector<CUdeviceptr>& outputs) const {
  const Program& p = *program_;
  const size_t n = p.buffers.size();
  base.assign(n, 0);
  const CUdeviceptr arena = reinterpret_cast<CUdeviceptr>(arena_.data());
  for (size_t i = 0; i < n; ++i) {
    const BufferDesc& b = p.buffers[i];
    switch (b.kind) {
      case BufferDesc::Kind::kInput: base[i] = inputs[b.index]; break;
      case BufferDesc::Kind::kConstant: base[i] = reinterpret_cast<CUdeviceptr>(constants_[b.index].data()); break;
      case BufferDesc::Kind::kTemp: base[i] = arena + static_cast<CUdeviceptr>(b.offset); break;
      case BufferDesc::Kind::kOutput: base[i] = outputs[b.index]; break;
      case BufferDesc::Kind::kAlias: break;
    }
  }
  for (size_t i = 0; i < n; ++i) base[i] = base[static_cast<size_t>(p.alias_root(static_cast<int32_t>(i)))];
}

Status CudaLoadedProgram::execute(Signature& sig, const std::vector<CUdeviceptr>& base, CUstream stream) {
  const Program& p = *program_;
  // Profiling: an event before each step and one after the last; a profile run waits for them.
  std::vector<CUevent> marks;
  auto mark = [&]() -> Status {
    if (!profile_) return ok_status();
    CUevent e = nullptr;
    TRIPY_CUDA_TRY(cuEventCreate(&e, CU_EVENT_DEFAULT));
    marks.push_back(e);
    return TRIPY_CUDA(cuEventRecord(e, stream));
  };
  Status st_all = execute_steps(sig, base, stream, mark);
  if (profile_) {
    profile_->assign(p.kernels.size(), 0.0);
    if (st_all.ok() && !marks.empty()) st_all = TRIPY_CUDA(cuEventSynchronize(marks.back()));
    for (size_t i = 0; st_all.ok() && i + 1 < marks.size() && i < sig.steps.size(); ++i) {
      float ms = 0;
      st_all = TRIPY_CUDA(cuEventElapsedTime(&ms, marks[i], marks[i + 1]));
      (*profile_)[static_cast<size_t>(sig.steps[i].kernel)] += ms;
    }
    for (CUevent e : marks) (void)TRIPY_CUDA(cuEventDestroy(e));
  }
  return st_all;
}

Status CudaLoadedProgram::execute_steps(Signature& sig, const std::vector<CUdeviceptr>& base, CUstream stream,
                                        const std::function<Status()>& mark) {
  const Program& p = *program_;
  for (Step& step : sig.steps) {
    const Kernel& k = p.kernels[step.kernel];
    TRIPY_RETURN_IF_ERROR(mark());
    Status st;
    if (step.dot) {
      const CUdeviceptr lhs = base[k.inputs[0]], rhs = base[k.inputs[1]], out = base[k.outputs[0]];
      const CUdeviceptr bias = k.dot.has_bias ? base[k.inputs[2]] : 0;
      // Addresses less aligned than the plan assumed need an algorithm that accepts them.
      int align = dot_alignment(step.dot->problem(), {lhs, rhs, bias, out});
      if (align < step.dot->alignment()) {
        const AlgoBytes* algo = kernels_[step.kernel].algo.empty() ? nullptr : &kernels_[step.kernel].algo;
        auto plan = DotPlan::create(step.dot->problem(), algo, align, kDotWorkspaceBytes);
        if (!plan.ok()) return Status(plan.status()).at(source_of(step.kernel));
        step.dot = std::move(plan.value());
      }
      st = step.dot->run(rhs, lhs, bias, out, reinterpret_cast<CUdeviceptr>(workspace_.data()),
                         kDotWorkspaceBytes, stream);
    }
    if (step.convolution) st = run_conv_step(step, k, base, stream);
    if (step.attention) st = run_attention_step(step, k, base, stream);
    for (Launch& l : step.launches) {
      if (!st.ok()) break;
      if (l.workspace_word >= 0) l.words[l.workspace_word] = reinterpret_cast<int64_t>(workspace_.data());
      if (l.counters_word >= 0) l.words[l.counters_word] = reinterpret_cast<int64_t>(counters_.data());
      st = launch(l, base, stream);
    }
    if (!st.ok()) return st.note("in kernel '" + k.name + "'").at(source_of(step.kernel));
  }
  return mark();
}

Status CudaLoadedProgram::capture(Signature& sig, const std::vector<CUdeviceptr>& caller_in,
                                  const std::vector<CUdeviceptr>& caller_out, CUstream stream) {
  const Program& p = *program_;
  // Staging buffers stand in for the inputs and outputs inside the graph; donated ones are used
  // where they are.
  std::vector<CUdeviceptr> in_ptrs(p.inputs.size(), 0), out_ptrs(p.outputs.size(), 0);
  sig.staging.clear();
  sig.donated_ptrs.clear();
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const BufferDesc& d = p.buffers[b];
    if (d.kind != BufferDesc::Kind::kInput && d.kind != BufferDesc::Kind::kOutput) continue;
    std::vector<CUdeviceptr>& ptrs = d.kind == BufferDesc::Kind::kInput ? in_ptrs : out_ptrs;
    if (in_caller_memory(d)) {
      ptrs[d.index] = (d.kind == BufferDesc::Kind::kInput ? caller_in : caller_out)[d.index];
      if (d.kind == BufferDesc::Kind::kInput) sig.donated_ptrs.push_back(ptrs[d.index]);
      continue;
    }
    TRIPY_ASSIGN_OR_RETURN(Tensor t, empty_device(d.dtype, sig.shapes[b], stream));
    ptrs[d.index] = reinterpret_cast<CUdeviceptr>(t.data());
    sig.staging.push_back(std::move(t));
  }
  std::vector<CUdeviceptr> base;
  resolve(base, in_ptrs, out_ptrs);

  CUgraph body = nullptr, outer = nullptr;
  TRIPY_CUDA_TRY(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  Status st = execute(sig, base, stream);
  Status end = TRIPY_CUDA(cuStreamEndCapture(stream, &body));
  TRIPY_RETURN_IF_ERROR(st);
  TRIPY_RETURN_IF_ERROR(end);

  st = TRIPY_CUDA(cuGraphCreate(&outer, 0));
  const CUfunction copy_fn = layout_fns_.at("tripy_copy_bytes");
  std::vector<CUgraphNode> in_nodes;
  sig.copy_nodes.clear();
  sig.copy_words.clear();
  auto add_copy = [&](CUdeviceptr dst, CUdeviceptr src, int64_t bytes, const CUgraphNode* deps, size_t ndeps) {
    sig.copy_words.push_back({static_cast<int64_t>(dst), static_cast<int64_t>(src), bytes});
    void* params[] = {sig.copy_words.back().data()};
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = copy_fn;
    kp.gridDimX = grid_for((bytes + 15) / 16, 256, sm_count_);
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    CUgraphNode node = nullptr;
    Status s = TRIPY_CUDA(cuGraphAddKernelNode(&node, outer, deps, ndeps, &kp));
    sig.copy_nodes.push_back(node);
    return s;
  };
  // Input copies first (their sources are patched per call); bytes == 0 still gets a node so
  // node i always belongs to input buffer i.
  std::vector<int64_t> io_bytes;
  for (size_t b = 0; st.ok() && b < p.buffers.size(); ++b) {
    const BufferDesc& d = p.buffers[b];
    if (d.kind != BufferDesc::Kind::kInput || in_caller_memory(d)) continue;
    int64_t bytes = product(sig.shapes[b]) * dtype_size(d.dtype);
    st = add_copy(in_ptrs[d.index], 0, bytes, nullptr, 0);
    in_nodes.push_back(sig.copy_nodes.back());
  }
  CUgraphNode child = nullptr;
  if (st.ok()) st = TRIPY_CUDA(cuGraphAddChildGraphNode(&child, outer, in_nodes.data(), in_nodes.size(), body));
  for (size_t b = 0; st.ok() && b < p.buffers.size(); ++b) {
    const BufferDesc& d = p.buffers[b];
    if (d.kind != BufferDesc::Kind::kOutput || in_caller_memory(d)) continue;
    int64_t bytes = product(sig.shapes[b]) * dtype_size(d.dtype);
    st = add_copy(0, out_ptrs[d.index], bytes, &child, 1);
  }
  if (st.ok()) st = TRIPY_CUDA(cuGraphInstantiateWithFlags(&sig.exec, outer, 0));
  if (sig.graph) (void)TRIPY_CUDA(cuGraphDestroy(sig.graph));
  sig.graph = outer;                         // the child node holds its own copy of the body
  (void)TRIPY_CUDA(cuGraphDestroy(body));
  return st;
}

Status CudaLoadedProgram::replay(Signature& sig, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& outputs, CUstream stream) {
  const Program& p = *program_;
  size_t node = 0;
  auto patch = [&](CUdeviceptr dst, CUdeviceptr src) {
    std::vector<int64_t>& w = sig.copy_words[node];
    if (dst) w[0] = static_cast<int64_t>(dst);
    if (src) w[1] = static_cast<int64_t>(src);
    void* params[] = {w.data()};
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = layout_fns_.at("tripy_copy_bytes");
    kp.gridDimX = grid_for((w[2] + 15) / 16, 256, sm_count_);
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    return TRIPY_CUDA(cuGraphExecKernelNodeSetParams(sig.exec, sig.copy_nodes[node++], &kp));
  };
  for (const BufferDesc& d : p.buffers)
    if (d.kind == BufferDesc::Kind::kInput && !in_caller_memory(d))
      TRIPY_RETURN_IF_ERROR(patch(0, reinterpret_cast<CUdeviceptr>(inputs[d.index].data())));
  for (const BufferDesc& d : p.buffers)
    if (d.kind == BufferDesc::Kind::kOutput && !in_caller_memory(d))
      TRIPY_RETURN_IF_ERROR(patch(reinterpret_cast<CUdeviceptr>(outputs[d.index].data()), 0));
  return TRIPY_CUDA(cuGraphLaunch(sig.exec, stream));
}

// Inputs are produced on the default stream (uploads, eager ops): a program on another stream
// must not start before they are complete. An event keeps this on the device, with no host wait.
Status CudaLoadedProgram::wait_for_default_stream(CUstream stream) {
  if (!ready_event_) TRIPY_CUDA_TRY(cuEventCreate(&ready_event_, CU_EVENT_DISABLE_TIMING));
  TRIPY_CUDA_TRY(cuEventRecord(ready_event_, default_stream()));
  TRIPY_CUDA_TRY(cuStreamWaitEvent(stream, ready_event_, 0));
  return ok_status();
}

// Outputs are read on the default stream (copies, eager ops): when the program ran on another
// stream, the default stream waits for it, on the device.
Status CudaLoadedProgram::make_default_stream_wait(CUstream stream) {
  if (!done_event_) TRIPY_CUDA_TRY(cuEventCreate(&done_event_, CU_EVENT_DISABLE_TIMING));
  TRIPY_CUDA_TRY(cuEventRecord(done_event_, stream));
  TRIPY_CUDA_TRY(cuStreamWaitEvent(default_stream(), done_event_, 0));
  return ok_status();
}

StatusOr<std::vector<Tensor>> CudaLoadedProgram::run(const std::vector<Tensor>& inputs,
                                                     const std::vector<int64_t>& slots) {
  auto out = run_locked(inputs, slots);
  std::lock_guard<std::mutex> lock(mutex_);
  CUstream stream = stream_ ? static_cast<CUstream>(stream_) : default_stream();
  if (out.ok() && stream != default_stream()) TRIPY_RETURN_IF_ERROR(make_default_stream_wait(stream));
  return out;
}

StatusOr<std::vector<Tensor>> CudaLoadedProgram::run_locked(const std::vector<Tensor>& inputs,
                                                            const std::vector<int64_t>& slots) {
  std::lock_guard<std::mutex> lock(mutex_);
  TRIPY_RETURN_IF_ERROR(make_current());
  const Program& p = *program_;
  CUstream stream = stream_ ? static_cast<CUstream>(stream_) : default_stream();
  if (stream != last_stream_) {
    // The previous stream's work may still use the arena and staging buffers.
    if (last_stream_) TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
    last_stream_ = stream;
  }
  if (stream != default_stream()) TRIPY_RETURN_IF_ERROR(wait_for_default_stream(stream));
  if (inputs.size() != p.inputs.size())
    return invalid_argument("expected " + std::to_string(p.inputs.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].device().kind != Device::Kind::kGpu && inputs[i].numel() > 0 &&
        p.inputs[i].kind == InputSpec::Kind::kTensor)  // shape values stay on the host
      return invalid_argument("input '" + p.inputs[i].name + "' is on " + inputs[i].device().str() +
                              ", but this executable runs on gpu:0 (use tp.copy to move it)");

  // An error an earlier call's kernels recorded (and that has reached the host by now) is this
  // call's error: no call runs on after one that failed. Checking waits for nothing.
  if (errors_) TRIPY_RETURN_IF_ERROR(errors_->take());
  TRIPY_ASSIGN_OR_RETURN(Signature * sig, signature(slots, stream));
  if (sig->arena_bytes > arena_capacity_) {
    // Graphs hold the old arena's addresses: drop them along with it.
    for (auto& [key, s] : signatures_) {
      if (s->exec) (void)TRIPY_CUDA(cuGraphExecDestroy(s->exec));
      s->exec = nullptr;
    }
    int64_t bytes = (sig->arena_bytes + 255) / 256 * 256;
    StatusOr<Tensor> arena = empty_device(DType::kInt8, {bytes}, stream);
    if (!arena.ok()) {
      Status st = arena.status();
      return st.note("The memory was for the intermediate tensors of this program (" + std::to_string(bytes) + " bytes).");
    }
    arena_ = std::move(arena).value();
    arena_capacity_ = bytes;
  }
  std::vector<Tensor> outputs(p.outputs.size());
  std::vector<CUdeviceptr> in_ptrs(inputs.size()), out_ptrs(outputs.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const BufferDesc& d = p.buffers[b];
    if (d.kind != BufferDesc::Kind::kOutput) continue;
    if (d.donor >= 0) {
      outputs[d.index] = inputs[static_cast<size_t>(d.donor)];  // updated in place, returned as itself
    } else {
      StatusOr<Tensor> out = empty_device(d.dtype, sig->shapes[b], stream);
      if (!out.ok()) {
        Status st = out.status();
        const std::string name = static_cast<size_t>(d.index) < p.output_names.size() ? p.output_names[d.index] : "";
        return st.note("The memory was for " + (name.empty() ? std::string("the result") : "output '" + name + "'") + " (" +
                       std::string(dtype_name(d.dtype)) + " " + dims_str(sig->shapes[b]) + ").");
      }
      outputs[d.index] = std::move(out).value();
    }
    out_ptrs[d.index] = reinterpret_cast<CUdeviceptr>(outputs[d.index].data());
  }
  for (size_t i = 0; i < inputs.size(); ++i) in_ptrs[i] = reinterpret_cast<CUdeviceptr>(inputs[i].data());
  // The graph holds donated tensors' addresses: other tensors need another capture.
  std::vector<CUdeviceptr> donated;
  for (const BufferDesc& d : p.buffers)
    if (d.kind == BufferDesc::Kind::kInput && in_caller_memory(d)) donated.push_back(in_ptrs[d.index]);
  if (sig->exec && donated != sig->donated_ptrs) {
    (void)TRIPY_CUDA(cuGraphExecDestroy(sig->exec));
    sig->exec = nullptr;
  }

  const int mode = graph_mode();
  const int64_t graph_limit = (int64_t{2} << 20) + (int64_t{512} << 10) * static_cast<int64_t>(sig->steps.size());
  bool use_graph = mode != 0 && !sig->graph_failed && stream != nullptr && ++sig->calls >= 2 &&
                   (mode == 1 || sig->io_bytes <= graph_limit);
  if (profile_) use_graph = false;  // events between kernels need direct launches
  if (use_graph && !sig->exec) {
    Status st = capture(*sig, in_ptrs, out_ptrs, stream);
    if (!st.ok()) {
      // Capture is an optimisation: fall back to direct launches for this signature.
      sig->graph_failed = true;
      if (sig->exec) (void)TRIPY_CUDA(cuGraphExecDestroy(sig->exec));
      sig->exec = nullptr;
      use_graph = false;
    }
  }
  if (use_graph) {
    TRIPY_RETURN_IF_ERROR(replay(*sig, inputs, outputs, stream));
  } else {
    std::vector<CUdeviceptr> base;
    resolve(base, in_ptrs, out_ptrs);
    TRIPY_RETURN_IF_ERROR(execute(*sig, base, stream));
  }
  return outputs;
}

// A recorded gather or update_slice error as the user's error, naming the kernel's line.
Status CudaLoadedProgram::explain_error(const ErrorRecord::Fields& f) const {
  if (f.tag <= 0 || f.tag > static_cast<int64_t>(program_->kernels.size()))
    return internal_error("a GPU kernel recorded an error with an unknown tag " + std::to_string(f.tag));
  const int32_t ki = static_cast<int32_t>(f.tag - 1);
  const Kernel& k = program_->kernels[ki];
  if (k.kind == KernelKind::kUpdateSlice) {
    return Status(StatusCode::kOutOfRange,
                  "kernel '" + k.name + "': writes " + std::to_string(f.rows) + " row(s) at " + std::to_string(f.value) +
                      " along dimension " + std::to_string(k.update_slice.axis) + ", but that dimension has size " +
                      std::to_string(f.dim) + ": the start must lie in [0, " + std::to_string(f.dim - f.rows) + "]",
                  source_of(ki));
  }
  return Status(StatusCode::kInvalidArgument,
                "index " + std::to_string(f.value) + " is out of bounds for axis " + std::to_string(k.gather.axis) +
                    " with size " + std::to_string(f.dim),
                source_of(ki));
}

}  // namespace tripy::rt::cuda

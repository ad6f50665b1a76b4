// Running a loaded program: resolve buffers to device addresses, plan each input-shape signature
// once (a step per kernel, through the kind table: cuda_kinds.h), launch directly on its first
// call and replay its CUDA graph (cuda_graph.h) on later calls.
#include "backend/cuda/cuda_program.h"

#include <algorithm>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_nccl.h"
#include "runtime/collectives.h"
#include "runtime/gpu_scope.h"

namespace tripy::rt::cuda {

// Buffers the graph reads or writes in the caller's memory (no staging copy): donated inputs and
// the outputs that live in them.
bool CudaLoadedProgram::in_caller_memory(const BufferDesc& d) const {
  if (d.kind == BufferDesc::Kind::kInput) return program_->inputs[static_cast<size_t>(d.index)].donated;
  return d.kind == BufferDesc::Kind::kOutput && d.donor >= 0;
}

ModuleSet::~ModuleSet() {
  GpuScope on(device_index);
  if (!modules.empty() && !make_current().ok()) return;
  for (CUmodule m : modules) (void)TRIPY_CUDA(cuModuleUnload(m));
}

StatusOr<std::unique_ptr<CudaLoadedProgram>> CudaLoadedProgram::create(std::shared_ptr<const Program> program,
                                                                        std::shared_ptr<ModuleSet> modules,
                                                                        std::vector<KernelCode> kernels,
                                                                        LayoutFunctions layout_fns) {
  TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
  TRIPY_RETURN_IF_ERROR(make_current());
  std::unique_ptr<CudaLoadedProgram> lp(new CudaLoadedProgram());
  lp->device_index_ = dev->index;
  lp->program_ = std::move(program);
  lp->modules_ = std::move(modules);
  lp->kernels_ = std::move(kernels);
  lp->layout_fns_ = std::move(layout_fns);
  lp->sm_count_ = dev->sm_count;
  lp->has_collectives_ = std::any_of(lp->program_->kernels.begin(), lp->program_->kernels.end(),
                                     [](const Kernel& k) { return k.kind == KernelKind::kCollective; });
  CUstream s = default_stream();
  bool shares = false;
  for (const Tensor& c : lp->program_->constants) {
    // A constant already in this GPU's memory (a weight the user's tensor holds) is shared, not
    // copied: the program keeps it alive, and every executable of one model reads one copy.
    if (c.device() == Device{Device::Kind::kGpu, dev->index}) {
      lp->constants_.push_back(c);
      shares = true;
      continue;
    }
    TRIPY_ASSIGN_OR_RETURN(Tensor d, empty_device(c.dtype(), c.shape(), s));
    if (c.nbytes() > 0 && c.device().kind == Device::Kind::kGpu) {  // another GPU's
      TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* from, device(c.device().index));
      TRIPY_CUDA_TRY(cuMemcpyPeerAsync(reinterpret_cast<CUdeviceptr>(d.data()), dev->context,
                                       reinterpret_cast<CUdeviceptr>(c.data()), from->context,
                                       static_cast<size_t>(c.nbytes()), s));
      shares = true;  // it too may still be being written
    } else if (c.nbytes() > 0) {
      TRIPY_CUDA_TRY(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(d.data()), c.data(),
                                       static_cast<size_t>(c.nbytes()), s));
    }
    lp->constants_.push_back(std::move(d));
  }
  TRIPY_CUDA_TRY(cuStreamSynchronize(s));
  // A shared constant may still be being written by the eager work (on any stream) that made it.
  if (shares) TRIPY_CUDA_TRY(cuCtxSynchronize());
  lp->last_stream_ = s;
  return lp;
}

CudaLoadedProgram::~CudaLoadedProgram() {
  GpuScope on(device_index_);  // whichever thread lets the program go
  if (make_current().ok() && last_stream_) (void)TRIPY_CUDA(cuStreamSynchronize(last_stream_));
  if (ready_event_) (void)TRIPY_CUDA(cuEventDestroy(ready_event_));
  if (done_event_) (void)TRIPY_CUDA(cuEventDestroy(done_event_));
  signatures_.clear();
}

Status CudaLoadedProgram::set_stream(void* stream) {
  GpuScope on(device_index_);
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
    int64_t bytes = numel_of(sig->shapes.back()) * dtype_size(d.dtype);
    if (d.kind == BufferDesc::Kind::kTemp) sig->arena_bytes = std::max(sig->arena_bytes, d.offset + bytes);
    if ((d.kind == BufferDesc::Kind::kInput || d.kind == BufferDesc::Kind::kOutput) && !in_caller_memory(d)) {
      sig->io_bytes += bytes;
      ++sig->io_count;
    }
  }
  sig->arena_bytes = std::max(sig->arena_bytes, p.arena_bytes);
  PlanContext c{p, kernels_, layout_fns_, slots, sig->shapes, sm_count_, stream, /*workspace=*/0, /*counters=*/0,
                [this, stream] { return error_record(stream); }};
  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const Kernel& k = p.kernels[ki];
    Step step;
    step.kernel = static_cast<int32_t>(ki);
    TRIPY_ASSIGN_OR_RETURN(const bool keep, kind_rule(k.kind).plan(c, k, step));
    if (keep) sig->steps.push_back(std::move(step));
  }
  fold_cache_writes(p, kernels_, sig->steps);
  sig->workspace_bytes = static_cast<int64_t>(c.workspace);
  TRIPY_RETURN_IF_ERROR(ensure_counters(c.counters, stream));
  Signature* raw = sig.get();
  signatures_[slots] = std::move(sig);
  return raw;
}

// The record gathers and update_slices write an out-of-range index or start to, made with the
// first such kernel that launches.
StatusOr<ErrorRecord*> CudaLoadedProgram::error_record(CUstream stream) {
  if (!errors_) {
    auto record = ErrorRecord::create([this](const ErrorRecord::Fields& f) { return explain_error(f); }, stream);
    if (!record.ok()) return record.status();
    errors_ = std::move(record).value();
  }
  return errors_.get();
}

void CudaLoadedProgram::release_scratch(int64_t min_bytes) {
  GpuScope on(device_index_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (arena_capacity_ + workspace_capacity_ < min_bytes || arena_capacity_ + workspace_capacity_ == 0) return;
  invalidate_graphs();
  arena_ = Tensor();
  workspace_ = Tensor();
  arena_capacity_ = workspace_capacity_ = 0;
}

void CudaLoadedProgram::invalidate_graphs() {
  for (auto& [key, s] : signatures_) s->graph.invalidate();
}

// One workspace serves every library call of the program (they run one after another on one
// stream); it grows to what the largest plan asks. Graphs hold its address: growing drops them.
Status CudaLoadedProgram::ensure_workspace(size_t bytes, CUstream stream) {
  if (static_cast<int64_t>(bytes) <= workspace_capacity_) return ok_status();
  invalidate_graphs();
  if (last_stream_) TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
  TRIPY_ASSIGN_OR_RETURN(workspace_, empty_device(DType::kInt8, {static_cast<int64_t>(bytes)}, stream));
  workspace_capacity_ = static_cast<int64_t>(bytes);
  return ok_status();
}

// Split attention's counters: each launch's last block per group leaves its counter at zero
// again, so they are zeroed once, here. Graphs hold their address: growing drops them.
Status CudaLoadedProgram::ensure_counters(int64_t count, CUstream stream) {
  if (count <= counters_capacity_) return ok_status();
  invalidate_graphs();
  if (last_stream_) TRIPY_CUDA_TRY(cuStreamSynchronize(last_stream_));
  TRIPY_ASSIGN_OR_RETURN(counters_, empty_device(DType::kInt32, {count}, stream));
  TRIPY_CUDA_TRY(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(counters_.data()), 0, static_cast<size_t>(count) * 4, stream));
  counters_capacity_ = count;
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
  const RunContext c{p, kernels_, base, reinterpret_cast<CUdeviceptr>(workspace_.data()),
                     static_cast<size_t>(workspace_capacity_), stream};
  for (Step& step : sig.steps) {
    const Kernel& k = p.kernels[step.kernel];
    TRIPY_RETURN_IF_ERROR(mark());
    Status st;
    if (auto run = kind_rule(k.kind).run) st = run(step, k, c);
    for (Launch& l : step.launches) {
      if (!st.ok()) break;
      if (l.workspace_word >= 0) l.words[l.workspace_word] = reinterpret_cast<int64_t>(workspace_.data());
      if (l.counters_word >= 0) l.words[l.counters_word] = reinterpret_cast<int64_t>(counters_.data());
      st = launch(l, base, stream);
    }
    if (!st.ok()) return st.note("in kernel '" + k.name + "'").at(kernel_source(p, step.kernel));
  }
  return mark();
}

std::vector<GraphIo> CudaLoadedProgram::graph_io(const Signature& sig) const {
  std::vector<GraphIo> io;
  for (size_t b = 0; b < program_->buffers.size(); ++b) {
    const BufferDesc& d = program_->buffers[b];
    if (d.kind != BufferDesc::Kind::kInput && d.kind != BufferDesc::Kind::kOutput) continue;
    io.push_back({d.kind == BufferDesc::Kind::kInput, d.index, d.dtype, sig.shapes[b], in_caller_memory(d)});
  }
  return io;
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
  GpuScope on(device_index_);
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
  const Device here{Device::Kind::kGpu, device_index_};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].device() != here && inputs[i].numel() > 0 &&
        p.inputs[i].kind == InputSpec::Kind::kTensor)  // shape values stay on the host
      return invalid_argument("input '" + p.inputs[i].name + "' is on " + inputs[i].device().str() +
                              ", but this executable runs on " + here.str() + " (use tp.copy to move it)");

  // An error an earlier call's kernels recorded (and that has reached the host by now) is this
  // call's error: no call runs on after one that failed. Checking waits for nothing.
  if (errors_) TRIPY_RETURN_IF_ERROR(errors_->take());
  TRIPY_ASSIGN_OR_RETURN(Signature * sig, signature(slots, stream));
  TRIPY_RETURN_IF_ERROR(ensure_workspace(static_cast<size_t>(sig->workspace_bytes), stream));
  if (sig->arena_bytes > arena_capacity_) {
    // Graphs hold the old arena's addresses: drop them along with it.
    invalidate_graphs();
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
  sig->graph.check_donated(donated);

  bool use_graph = sig->graph.wanted(stream, sig->io_bytes, sig->io_count, sig->steps.size());
  if (profile_) use_graph = false;  // events between kernels need direct launches
  if (use_graph && !sig->graph.ready()) {
    auto body = [&](const std::vector<CUdeviceptr>& staged_in, const std::vector<CUdeviceptr>& staged_out) {
      std::vector<CUdeviceptr> base;
      resolve(base, staged_in, staged_out);
      return execute(*sig, base, stream);
    };
    // Capture is an optimisation: on failure this signature launches directly.
    const CUfunction copy_fn = layout_fns_.at("tripy_copy_bytes");
    if (!sig->graph.capture(graph_io(*sig), in_ptrs, out_ptrs, copy_fn, sm_count_, stream, body).ok())
      use_graph = false;
  }
  if (use_graph) {
    TRIPY_RETURN_IF_ERROR(sig->graph.replay(in_ptrs, out_ptrs, stream));
  } else {
    std::vector<CUdeviceptr> base;
    resolve(base, in_ptrs, out_ptrs);
    TRIPY_RETURN_IF_ERROR(execute(*sig, base, stream));
  }
  // On an NCCL rank, the watchdog aborts a run whose collectives never finish (cuda_nccl.h).
  if (has_collectives_) TRIPY_RETURN_IF_ERROR(watch_run(stream));
  return outputs;
}

// A recorded gather or update_slice error as the user's error, naming the kernel's line.
Status CudaLoadedProgram::explain_error(const ErrorRecord::Fields& f) const {
  if (f.tag <= 0 || f.tag > static_cast<int64_t>(program_->kernels.size()))
    return internal_error("a GPU kernel recorded an error with an unknown tag " + std::to_string(f.tag));
  const int32_t ki = static_cast<int32_t>(f.tag - 1);
  const Kernel& k = program_->kernels[ki];
  if (k.kind == KernelKind::kCollective) {  // a one-shot collective's wait (kernels/one_shot_collective.cuh)
    return Status(StatusCode::kUnavailable,
                  "kernel '" + k.name + "': rank " + std::to_string(f.dim) + " waited more than " +
                      std::to_string(static_cast<int64_t>(collective_timeout_seconds())) + " s for rank " +
                      std::to_string(f.value) +
                      " at this " + (k.collective.op == CollectiveAttrs::Op::kAllReduce ? "all-reduce" : "all-gather") +
                      " (that rank failed, stopped or runs another program; "
                      "TRIPY_COLLECTIVE_TIMEOUT sets the wait in seconds)",
                  kernel_source(*program_, ki));
  }
  if (k.kind == KernelKind::kUpdateSlice) {
    return Status(StatusCode::kOutOfRange,
                  "kernel '" + k.name + "': writes " + std::to_string(f.rows) + " row(s) at " + std::to_string(f.value) +
                      " along dimension " + std::to_string(k.update_slice.axis) + ", but that dimension has size " +
                      std::to_string(f.dim) + ": the start must lie in [0, " + std::to_string(f.dim - f.rows) + "]",
                  kernel_source(*program_, ki));
  }
  return Status(StatusCode::kInvalidArgument,
                "index " + std::to_string(f.value) + " is out of bounds for axis " + std::to_string(k.gather.axis) +
                    " with size " + std::to_string(f.dim),
                kernel_source(*program_, ki));
}

}  // namespace tripy::rt::cuda

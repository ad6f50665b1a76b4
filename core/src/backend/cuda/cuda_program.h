// A Program loaded on the GPU: modules, device constants, arena, and per input-shape signature a
// plan of steps (cuda_kinds.h) that is replayed as one CUDA graph from its second call on
// (cuda_graph.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/backend.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_error_record.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_launch.h"

namespace tripy::rt::cuda {

// Loaded modules, unloaded when the last program using them goes.
struct ModuleSet {
  std::vector<CUmodule> modules;
  int device_index = 0;  // the GPU they were loaded on (gpu:index): unloaded there, from any thread
  ~ModuleSet();
};

class CudaLoadedProgram final : public LoadedProgram {
 public:
  static StatusOr<std::unique_ptr<CudaLoadedProgram>> create(std::shared_ptr<const Program> program,
                                                             std::shared_ptr<ModuleSet> modules,
                                                             std::vector<KernelCode> kernels,
                                                             LayoutFunctions layout_fns);
  ~CudaLoadedProgram() override;

  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs,
                                    const std::vector<int64_t>& slots) override;

  // The stream runs are enqueued on (a CUstream; nullptr: the backend's default stream). Switching
  // waits for the work already enqueued on the old one (both would share the arena); after that
  // the old stream may be destroyed. A stream must outlive the runs enqueued on it.
  Status set_stream(void* stream) override;
  void* stream() const override { return stream_; }
  // Profiled runs launch directly (no graph replay) and time each kernel between CUDA events.
  void set_profile(std::vector<double>* kernel_ms) override { profile_ = kernel_ms; }
  // Drops the arena and the workspace (with the graphs that hold their addresses) when together
  // they are at least `min_bytes`. Their memory returns to the stream's cache in stream order.
  void release_scratch(int64_t min_bytes) override;

 private:
  struct Signature {
    std::vector<std::vector<int64_t>> shapes;  // per buffer
    std::vector<Step> steps;
    int64_t arena_bytes = 0;
    int64_t workspace_bytes = 0;  // what its library calls ask (ensured each run: release_scratch frees it)
    int64_t io_bytes = 0;    // inputs and outputs the graph stages
    size_t io_count = 0;     // ... and how many
    SignatureGraph graph;  // last: its graph goes before the steps' plans
  };

  CudaLoadedProgram() = default;
  StatusOr<Signature*> signature(const std::vector<int64_t>& slots, CUstream stream);
  StatusOr<ErrorRecord*> error_record(CUstream stream);
  Status ensure_workspace(size_t bytes, CUstream stream);
  Status ensure_counters(int64_t count, CUstream stream);
  // Drops every signature's instantiated graph: an address the graphs hold is about to change.
  void invalidate_graphs();
  Status execute(Signature& sig, const std::vector<CUdeviceptr>& base, CUstream stream);
  // The steps in order, calling `mark` before each and after the last (profiling events).
  Status execute_steps(Signature& sig, const std::vector<CUdeviceptr>& base, CUstream stream,
                       const std::function<Status()>& mark);
  Status wait_for_default_stream(CUstream stream);
  Status make_default_stream_wait(CUstream stream);
  StatusOr<std::vector<Tensor>> run_locked(const std::vector<Tensor>& inputs, const std::vector<int64_t>& slots);
  // The signature's inputs and outputs, in buffer order, as its graph stages them.
  std::vector<GraphIo> graph_io(const Signature& sig) const;
  bool in_caller_memory(const BufferDesc& d) const;
  Status explain_error(const ErrorRecord::Fields& f) const;
  void resolve(std::vector<CUdeviceptr>& base, const std::vector<CUdeviceptr>& inputs,
               const std::vector<CUdeviceptr>& outputs) const;
  void drop_signatures();

  std::shared_ptr<const Program> program_;
  std::shared_ptr<ModuleSet> modules_;
  std::vector<KernelCode> kernels_;
  LayoutFunctions layout_fns_;
  int sm_count_ = 1;
  int device_index_ = 0;  // gpu:index, where it was loaded: every entry point works there
  bool has_collectives_ = false;  // the NCCL watchdog marks the end of each run (cuda_nccl.h)
  std::vector<Tensor> constants_;  // on the device
  Tensor arena_, workspace_;
  int64_t workspace_capacity_ = 0;
  Tensor counters_;  // int32, zero between launches: arrival counters (split attention, the sampler)
  int64_t counters_capacity_ = 0;
  // The first out-of-range gather index or update_slice start of a run, read without waiting
  // (created with the first such kernel; cuda_error_record.h).
  std::unique_ptr<ErrorRecord> errors_;
  int64_t arena_capacity_ = 0;
  std::map<std::vector<int64_t>, std::unique_ptr<Signature>> signatures_;
  void* stream_ = nullptr;
  std::vector<double>* profile_ = nullptr;
  CUstream last_stream_ = nullptr;
  std::mutex mutex_;
  CUevent ready_event_ = nullptr;  // orders a custom stream after the default one
  CUevent done_event_ = nullptr;   // and the default stream after the custom one
};

}  // namespace tripy::rt::cuda

// The CPU backend's kernel entry points and the resolved view of buffers they run on. The
// loaded program resolves every buffer to memory once per run and hands kernels these views.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/program.h"
#include "tripy/status.h"

namespace tripy::cpu {

// One buffer as a kernel sees it during a run: dense, row-major.
struct View {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct KernelArgs {
  const rt::Program* program = nullptr;
  const rt::Kernel* kernel = nullptr;
  const std::vector<int64_t>* slots = nullptr;
  SourceRef where;  // the kernel's user source, or null
  std::vector<const View*> inputs, outputs;

  int64_t slot(rt::Slot s) const { return (*slots)[static_cast<size_t>(s)]; }
};

// A failure of this kernel: the message names the kernel and carries its source location.
Status kernel_error(const KernelArgs& args, const std::string& message,
                    StatusCode code = StatusCode::kInvalidArgument);
Status kernel_error(const rt::Kernel& kernel, SourceRef where, const std::string& message,
                    StatusCode code = StatusCode::kInvalidArgument);

// Per-kernel state prepared at load time (fused plans, cached GEMM primitives).
class KernelState {
 public:
  virtual ~KernelState() = default;
};

// How the CPU runs one kernel kind: `prepare` (null when the kind keeps no state) builds a
// kernel's state once, at load; `run` runs it. Each kind's entry is defined beside its kernel and
// named after its row of runtime/kernel_kinds.h (kDotKernel for Dot), so a kind that the CPU
// backend does not cover fails to link, and the backend's table (cpu_backend.cc) is made from
// the same rows.
struct CpuKernel {
  StatusOr<std::unique_ptr<KernelState>> (*prepare)(const rt::Program&, const rt::Kernel&, SourceRef);
  Status (*run)(const KernelArgs& args, KernelState* state);
};
#define TRIPY_CPU_KERNEL_DECLARE_(Enum, name, Attrs, member) extern const CpuKernel k##Enum##Kernel;
TRIPY_KERNEL_KINDS(TRIPY_CPU_KERNEL_DECLARE_)
#undef TRIPY_CPU_KERNEL_DECLARE_

// kFused: prepares the interpreter plan (validating the instructions) and runs it.
StatusOr<std::unique_ptr<KernelState>> prepare_fused(const rt::Program& program,
                                                     const rt::Kernel& kernel, SourceRef where);
Status run_fused(const KernelArgs& args, KernelState& state);

// kDot: state holds the primitive cache.
std::unique_ptr<KernelState> prepare_dot();
Status run_dot(const KernelArgs& args, KernelState& state);

// kConvolution: state holds the oneDNN primitive cache (conv.cc).
std::unique_ptr<KernelState> prepare_conv();
Status run_conv(const KernelArgs& args, KernelState& state);

// Layout kernels: pure data movement, any dtype.
Status run_transpose(const KernelArgs& args);
Status run_slice(const KernelArgs& args);
Status run_concat(const KernelArgs& args);
Status run_gather(const KernelArgs& args);
Status run_copy(const KernelArgs& args);
// kUpdateSlice: copies the operand unless the output is the operand's memory, then writes the
// update's rows at the start read from the start buffer (checked before anything is written).
Status run_update_slice(const KernelArgs& args);

// kPooling: max/average pooling, direct loops (pool.cc).
Status run_pool(const KernelArgs& args);

// kAttention: tiled attention with an online softmax (attention.cc).
Status run_attention(const KernelArgs& args);

// kPlugin: the registered plugin's CPU implementation (plugin.cc).
Status run_plugin(const KernelArgs& args);

}  // namespace tripy::cpu

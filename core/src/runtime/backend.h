// The backend interface: one implementation per device kind (cpu, cuda). A Backend loads and runs
// programs and needs no compiler; a Builder runs at compile time (e.g. NVRTC, tactic timing) and
// produces the artifacts saved with the executable. Builders are the compiler side's
// (src/backend/cuda/codegen/ is linked by tripy_compiler, not by the runtime library); the runtime
// only keeps their registry, so that load() can compile a program saved without device code when
// a builder is linked in, and say "compile it for this device" when none is.
//
// The runtime defines the interface and keeps the registry; the backends (src/backend/*), a layer
// above it, register themselves when their code is loaded. So the runtime (Executable::run, the
// file loader) finds a backend without including one. Each registration is an extern "C" bool
// (tripy_<name>_backend_registered) that programs linking the static runtime are told to keep
// (core/CMakeLists.txt: -u), since nothing refers to it by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/collectives.h"
#include "runtime/program.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt {

// Named binary sections a backend stores in the executable (e.g. "cuda.cubin", "cuda.meta").
using Artifacts = std::map<std::string, std::vector<uint8_t>>;

struct BuildOptions {
  int optimization_level = 3;
};

// A program prepared to run on one device.
class LoadedProgram {
 public:
  virtual ~LoadedProgram() = default;
  // `inputs` are validated and on this device; `slots` is the evaluated shape program.
  // Returns the outputs, on this device.
  virtual StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs,
                                            const std::vector<int64_t>& slots) = 0;
  // While `kernel_ms` is set, each run fills it with the milliseconds each kernel took, in kernel
  // order (0 for a kernel that launched nothing). It may cost speed (the GPU runs without graph
  // replay and waits for each run); backends that cannot time kernels leave it empty.
  virtual void set_profile(std::vector<double>* kernel_ms) { (void)kernel_ms; }
  // The stream runs are enqueued on (an opaque handle, see Backend; nullptr: the backend's default
  // stream). Switching waits for the work already enqueued on the old stream, which may then be
  // destroyed. A backend without streams accepts only nullptr.
  virtual Status set_stream(void* stream) {
    return stream == nullptr ? ok_status() : invalid_argument("this program's device has no streams");
  }
  virtual void* stream() const { return nullptr; }
  // Frees the program's scratch (its arena of intermediates, workspaces) when it holds at least
  // `min_bytes` of it; the next run allocates it again. Eager mode calls it after each run of a
  // cached program, whose scratch would otherwise stay for the process's life.
  virtual void release_scratch(int64_t min_bytes) { (void)min_bytes; }
};

// The low-precision GEMMs a device runs natively: the compiler rewrites dequantize -> dot into
// them (flat::quantized_dot) only where they apply.
struct LowPrecisionGemms {
  bool int8 = false, float8 = false;
  bool weight_nk = false;  // the weight must be read [N, K] (cuBLASLt's "TN")
  int64_t int8_multiple = 1, float8_multiple = 1;  // K and N must be static multiples of these
  // An int8 dot of at most this many rows whose weight is a constant is left to the weight-only
  // product, which reads the int8 weight as stored where the int8 GEMM runs no faster than the
  // float one (a GPU's decode sizes; 0: none, -1: any rows).
  int64_t int8_weight_only_rows = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device::Kind kind() const = 0;
  virtual bool available() const = 0;
  virtual LowPrecisionGemms low_precision_gemms() const { return {}; }
  virtual StatusOr<std::unique_ptr<LoadedProgram>> load(std::shared_ptr<const Program> program,
                                                        const Artifacts& artifacts) = 0;
  // Host <-> device copies for tp.copy and for eager inputs.
  virtual StatusOr<Tensor> copy_from_host(const Tensor& host) = 0;
  virtual StatusOr<Tensor> copy_to_host(const Tensor& device) = 0;
  // A new copy, on the same device, of a tensor on this device: how imported memory (DLPack) is
  // detached from its exporter, so later writes to the source cannot reach lazy ops.
  virtual StatusOr<Tensor> duplicate(const Tensor& t) = 0;
  // An uninitialised tensor on this device (kResourceExhausted when out of memory).
  virtual StatusOr<Tensor> allocate(DType dtype, std::vector<int64_t> shape) = 0;
  // What the device is ("NVIDIA H100 80GB HBM3 (sm_90)"), or why it cannot be used.
  virtual std::string device_description() const = 0;

  // Streams: queues of device work (tp.Stream), as opaque handles (a CUstream on the GPU). Programs
  // and copies use the default stream unless told otherwise (LoadedProgram::set_stream); nullptr
  // stands for it. A device whose work is done when the call returns has none: creating one is
  // kUnavailable and synchronising returns at once.
  virtual StatusOr<void*> create_stream() {
    return Status(StatusCode::kUnavailable, "this device has no streams");
  }
  virtual Status destroy_stream(void* stream) { return ok_status(); }
  // Waits for all work enqueued on `stream` (nullptr: the default stream), then raises any error
  // that work recorded (a gather index out of range).
  virtual Status synchronize(void* stream) { return ok_status(); }
  virtual void* default_stream() { return nullptr; }
  virtual void set_default_stream(void* stream) {}
  // GPUs: gpu:N's CUDA device number (DLPack's device_id) and back (-1: a device this process
  // does not drive); the same but in a process pinned to one GPU (cuda_device.h).
  virtual int cuda_ordinal(int gpu_index) const { return gpu_index; }
  virtual int gpu_index(int cuda_ordinal) const { return cuda_ordinal; }
  // How often the host has waited for the device so far (tests: a steady-state call never waits).
  virtual int64_t host_waits() const { return 0; }
  // Communicators for the ranks of a sharded program (runtime/collectives.h), one per device of
  // `ranks` (rank r's), all of this process: the CPU's meet in host memory; the GPU's are NCCL's.
  virtual StatusOr<std::vector<std::shared_ptr<Communicator>>> create_communicators(const std::vector<Device>& ranks) {
    return Status(StatusCode::kUnavailable, "this device has no collectives");
  }
  // Ranks in several processes (torchrun): rank 0 makes a unique id, which reaches every rank by
  // other means (tp.DeviceMesh.from_environment sends it over a socket), and each rank joins with it.
  virtual StatusOr<std::string> communicator_unique_id() {
    return Status(StatusCode::kUnavailable, "this device has no collectives across processes");
  }
  virtual StatusOr<std::shared_ptr<Communicator>> join_communicator(const std::string& unique_id, int rank,
                                                                    int world_size) {
    return Status(StatusCode::kUnavailable, "this device has no collectives across processes");
  }
  // Device memory that live tensors and loaded programs hold (not what an allocator keeps cached
  // for reuse), in bytes; -1 where the backend does not count it.
  virtual int64_t bytes_in_use() const { return -1; }
};

// The backend for a device kind; nullptr when this build or machine has none (none registered, or
// the registered one is not available(), e.g. no GPU).
Backend* backend_for(Device::Kind kind);

// Makes `factory` the backend for `kind`; called once per backend, during static initialisation
// (`const bool tripy_<name>_backend_registered = register_backend(...)`). Returns true.
using BackendFactory = Backend* (*)();
bool register_backend(Device::Kind kind, BackendFactory factory);

// What a device asks of the compiler's passes. The passes are the same for every device; these
// say where they apply. Each device's builder states its own (Builder::pass_rules).
struct PassRules {
  bool pad_dot_columns = false;             // GEMM widths padded to aligned rows (cuBLASLt's fast kernels)
  std::vector<DType> channels_last_dtypes;  // convolutions of these dtypes run channels-last,
  int channels_last_min_chain = 1;          // where a chain has at least this many of them
  // The quantized GEMMs dequantize -> dot may become, asked only of a graph that converts int8 or
  // float8 values (the GPU's answer loads cuBLASLt).
  std::function<LowPrecisionGemms()> low_precision_gemms = [] { return LowPrecisionGemms{}; };
  int64_t weight_only_dot_max_rows = -1;    // rows of x up to which weight-only dots read packed weights (-1: any)
  // Where a weight-only dot may form its x itself (RMSNorm, or SiLU(gate) * up), add the residual
  // after it or write SiLU(gate) * up of its own halves (flat::normed_weight_only_dot,
  // gated_weight_only_dot, residual_weight_only_dot, gate_weight_only_output); empty: everywhere.
  std::function<bool(const WeightOnlyFold&)> weight_only_fold;
};

// Compile-time preparation of a program for one device kind: what is saved with the executable.
class Builder {
 public:
  virtual ~Builder() = default;
  // What a graph's build will time, so that prepare() loads just the libraries it needs.
  struct Tunes {
    bool gemms = false;
    bool convolutions = false;
  };
  // Called as a compile starts: one-time set-up that is slow (code every build needs, libraries
  // that load on first use) may get under way while the compiler runs its passes. build() waits
  // for it.
  virtual void prepare(Tunes tunes) { (void)tunes; }
  // The rules the passes follow for this device.
  virtual PassRules pass_rules() const { return {}; }
  virtual StatusOr<Artifacts> build(const Program& program, const BuildOptions& options) = 0;
  // For debugging: the device source generated for each kernel that has its own (the GPU's fused
  // and attention kernels), in kernel order; needs no device.
  virtual StatusOr<std::vector<std::string>> kernel_sources(const Program& program) {
    return std::vector<std::string>{};
  }
  // For tests: what a plugin's device code compiles to for architecture `arch` (PTX on the GPU),
  // needing no device; nullopt where this builder compiles no plugins or its compiler (NVRTC)
  // cannot be loaded.
  virtual StatusOr<std::optional<std::string>> compile_plugin(const PluginAttrs& plugin, int arch) {
    return std::optional<std::string>();
  }
};

// The builder for a device kind; nullptr when none is linked into this program (the runtime
// library alone has the CPU's, which has nothing to build).
Builder* builder_for(Device::Kind kind);

// Makes `factory` the builder for `kind`, like register_backend (the registration's extern "C" bool
// is tripy_<name>_builder_registered, kept by the linker with -u). Returns true.
using BuilderFactory = Builder* (*)();
bool register_builder(Device::Kind kind, BuilderFactory factory);

// The pass rules of `kind`'s builder (none without one), with the environment's switches applied,
// the one place that reads them: TRIPY_CHANNELS_LAST=0 runs no convolution channels-last and =1
// every float one on every device (so tests run those kernels on the CPU); TRIPY_QUANTIZED_DOT=0
// keeps dequantize -> dot as written, for comparison; TRIPY_WEIGHT_ONLY_DOT=0 does too for
// weight-only quantization, and =1 reads packed weights at any number of rows (tests of the GPU's
// kernel past its decode sizes); TRIPY_WEIGHT_ONLY_FOLD=0 leaves the norms, SwiGLU gates and
// residual adds around weight-only products to kernels of their own, TRIPY_WEIGHT_ONLY_GATE=0 the
// SwiGLU gates alone.
PassRules pass_rules_for(Device::Kind kind);

}  // namespace tripy::rt

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
#include <map>
#include <memory>
#include <string>
#include <vector>

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
};

// The low-precision GEMMs a device runs natively: the compiler rewrites dequantize -> dot into
// them (flat::quantized_dot) only where they apply.
struct LowPrecisionGemms {
  bool int8 = false, float8 = false;
  bool weight_nk = false;  // the weight must be read [N, K] (cuBLASLt's "TN")
  int64_t int8_multiple = 1, float8_multiple = 1;  // K and N must be static multiples of these
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
};

// The backend for a device kind; nullptr when this build or machine has none (none registered, or
// the registered one is not available(), e.g. no GPU).
Backend* backend_for(Device::Kind kind);

// Makes `factory` the backend for `kind`; called once per backend, during static initialisation
// (`const bool tripy_<name>_backend_registered = register_backend(...)`). Returns true.
using BackendFactory = Backend* (*)();
bool register_backend(Device::Kind kind, BackendFactory factory);

// Compile-time preparation of a program for one device kind: what is saved with the executable.
class Builder {
 public:
  virtual ~Builder() = default;
  // Called as a compile starts: one-time set-up that is slow (code every build needs, libraries
  // that load on first use) may get under way while the compiler runs its passes. build() waits
  // for it. `tunes`: the graph has GEMMs or convolutions, whose libraries the build will time.
  virtual void prepare(bool tunes) { (void)tunes; }
  virtual StatusOr<Artifacts> build(const Program& program, const BuildOptions& options) = 0;
};

// The builder for a device kind; nullptr when none is linked into this program (the runtime
// library alone has the CPU's, which has nothing to build).
Builder* builder_for(Device::Kind kind);

// Makes `factory` the builder for `kind`, like register_backend (the registration's extern "C" bool
// is tripy_<name>_builder_registered, kept by the linker with -u). Returns true.
using BuilderFactory = Builder* (*)();
bool register_builder(Device::Kind kind, BuilderFactory factory);

}  // namespace tripy::rt

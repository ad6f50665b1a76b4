// The CPU backend object and its LoadedProgram: resolves buffers to memory (inputs, constants,
// one reused arena, fresh outputs) and runs the kernels in order.
#include "backend/cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/cpu/kernels.h"

namespace tripy::cpu {

Status kernel_error(const rt::Kernel& kernel, SourceRef where, const std::string& message,
                    StatusCode code) {
  return Status(code, "kernel '" + kernel.name + "': " + message, std::move(where));
}

Status kernel_error(const KernelArgs& args, const std::string& message, StatusCode code) {
  return kernel_error(*args.kernel, args.where, message, code);
}

namespace {

using rt::BufferDesc;

// The CPU kernel of each kind, in runtime/kernel_kinds.h's order (prepare() checks a kind is in range).
const CpuKernel* const kKernels[] = {
#define TRIPY_CPU_KERNEL_ROW_(Enum, name, Attrs, member) &k##Enum##Kernel,
    TRIPY_KERNEL_KINDS(TRIPY_CPU_KERNEL_ROW_)
#undef TRIPY_CPU_KERNEL_ROW_
};
static_assert(std::size(kKernels) == rt::kNumKernelKinds);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class CpuLoadedProgram final : public rt::LoadedProgram {
 public:
  explicit CpuLoadedProgram(std::shared_ptr<const rt::Program> program)
      : program_(std::move(program)) {}

  Status prepare() {
    const rt::Program& p = *program_;
    for (const SourceInfo& s : p.sources) sources_.push_back(std::make_shared<SourceInfo>(s));
    const int32_t nbuf = static_cast<int32_t>(p.buffers.size());
    for (const rt::Kernel& k : p.kernels) {
      SourceRef where = source_of(k);
      for (int32_t b : k.inputs)
        if (b < 0 || b >= nbuf) return kernel_error(k, where, "input buffer id out of range",
                                                     StatusCode::kInternal);
      for (int32_t b : k.outputs)
        if (b < 0 || b >= nbuf) return kernel_error(k, where, "output buffer id out of range",
                                                     StatusCode::kInternal);
      if (static_cast<size_t>(k.kind) >= rt::kNumKernelKinds)
        return kernel_error(k, where, "unknown kernel kind", StatusCode::kInternal);
      std::unique_ptr<KernelState> state;
      if (const CpuKernel& entry = *kKernels[static_cast<size_t>(k.kind)]; entry.prepare) {
        TRIPY_ASSIGN_OR_RETURN(state, entry.prepare(p, k, where));
      }
      states_.push_back(std::move(state));
      for (int32_t b : k.outputs) writer_.emplace(b, where);
    }
    // Alias chains must end in a real buffer: follow each at most nbuf steps.
    for (int32_t i = 0; i < nbuf; ++i) {
      int32_t b = i, steps = 0;
      while (p.buffers[b].kind == BufferDesc::Kind::kAlias) {
        b = p.buffers[b].index;
        if (b < 0 || b >= nbuf || ++steps > nbuf)
          return internal_error("buffer " + std::to_string(i) + " is a broken alias");
      }
    }
    views_.resize(nbuf);
    return ok_status();
  }

  void release_scratch(int64_t min_bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (arena_bytes_ == 0 || arena_bytes_ < min_bytes) return;
    arena_.reset();
    arena_bytes_ = 0;
  }

  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs,
                                    const std::vector<int64_t>& slots) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const rt::Program& p = *program_;
    for (size_t i = 0; i < p.buffers.size(); ++i) TRIPY_RETURN_IF_ERROR(shape_of(i, slots));

    // The arena is planned for the largest inputs; grow it if the planner's bound was exceeded.
    int64_t need = p.arena_bytes;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const BufferDesc& b = p.buffers[i];
      if (b.kind == BufferDesc::Kind::kTemp)
        need = std::max(need, b.offset + views_[i].numel() * dtype_size(b.dtype));
    }
    if (need > arena_bytes_) {
      int64_t bytes = (need + 255) / 256 * 256;
      arena_.reset(static_cast<uint8_t*>(std::aligned_alloc(256, static_cast<size_t>(bytes))));
      if (!arena_) {
        arena_bytes_ = 0;
        // Blame the op that makes the largest intermediate: the likeliest reason for the size.
        size_t largest = 0;
        int64_t largest_bytes = -1;
        for (size_t i = 0; i < p.buffers.size(); ++i) {
          const int64_t b = views_[i].numel() * dtype_size(p.buffers[i].dtype);
          if (p.buffers[i].kind == BufferDesc::Kind::kTemp && b > largest_bytes) largest = i, largest_bytes = b;
        }
        return Status(StatusCode::kResourceExhausted,
                      "Out of host memory: cannot allocate " + std::to_string(bytes) +
                          " bytes of scratch memory for the intermediate tensors of this program (the largest is " +
                          std::string(dtype_name(p.buffers[largest].dtype)) + " " + dims_str(views_[largest].shape) + ").",
                      writer_of(static_cast<int32_t>(largest)));
      }
      arena_bytes_ = bytes;
    }

    std::vector<Tensor> outputs(p.outputs.size());
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const BufferDesc& b = p.buffers[i];
      View& v = views_[i];
      v.dtype = b.dtype;
      switch (b.kind) {
        case BufferDesc::Kind::kInput:
          if (b.index < 0 || static_cast<size_t>(b.index) >= inputs.size())
            return internal_error("input buffer refers to a missing input");
          v.data = inputs[b.index].data();
          break;
        case BufferDesc::Kind::kConstant:
          if (b.index < 0 || static_cast<size_t>(b.index) >= p.constants.size())
            return internal_error("constant buffer refers to a missing constant");
          v.data = p.constants[b.index].data();
          break;
        case BufferDesc::Kind::kTemp:
          v.data = arena_.get() + b.offset;
          break;
        case BufferDesc::Kind::kOutput:
          if (b.index < 0 || static_cast<size_t>(b.index) >= outputs.size())
            return internal_error("output buffer refers to a missing output");
        {
          // An output in a donated input's memory is that input (update_slice writes it in place).
          if (b.donor >= 0) {
            outputs[b.index] = inputs[b.donor];
          } else {
            auto out = Tensor::try_empty_host(b.dtype, v.shape, output_what(b.index));
            if (!out.ok()) {
              Status st = out.status();
              return st.at(writer_of(static_cast<int32_t>(i)));
            }
            outputs[b.index] = std::move(out).value();
          }
          v.data = outputs[b.index].data();
        }
          break;
        case BufferDesc::Kind::kAlias:
          v.data = nullptr;  // resolved below, once its target is
          break;
      }
    }
    for (size_t i = 0; i < p.buffers.size(); ++i) views_[i].data = views_[p.alias_root(static_cast<int32_t>(i))].data;

    KernelArgs& args = args_;  // reused: its lists keep their memory from run to run
    args.program = &p;
    args.slots = &slots;
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      const rt::Kernel& kernel = p.kernels[k];
      args.kernel = &kernel;
      args.where = source_of(kernel);
      args.inputs.clear();
      args.outputs.clear();
      for (int32_t b : kernel.inputs) args.inputs.push_back(&views_[b]);
      for (int32_t b : kernel.outputs) args.outputs.push_back(&views_[b]);
      // Timed only when profiled: a clock read per kernel is a measurable share of an eager step.
      const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      TRIPY_RETURN_IF_ERROR(run_kernel(args, k));
      if (profile_) {
        profile_->resize(p.kernels.size());
        (*profile_)[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
    }
    return outputs;
  }

  void set_profile(std::vector<double>* kernel_ms) override { profile_ = kernel_ms; }

 private:
  SourceRef source_of(const rt::Kernel& k) const {
    if (k.source >= 0 && static_cast<size_t>(k.source) < sources_.size()) return sources_[k.source];
    return nullptr;
  }

  // How an allocation failure names output `index`: "output 'logits'", or "the result".
  const std::string& output_what(int32_t index) {
    const rt::Program& p = *program_;
    if (output_what_.empty()) {
      for (size_t i = 0; i < p.outputs.size(); ++i) {
        const std::string name = i < p.output_names.size() ? p.output_names[i] : "";
        output_what_.push_back(name.empty() ? "the result" : "output '" + name + "'");
      }
    }
    static const std::string kResult = "the result";
    return static_cast<size_t>(index) < output_what_.size() ? output_what_[index] : kResult;
  }

  // The user's line of the kernel that writes buffer `b` (nullptr when none does).
  SourceRef writer_of(int32_t b) const {
    auto it = writer_.find(b);
    return it == writer_.end() ? nullptr : it->second;
  }

  Status shape_of(size_t i, const std::vector<int64_t>& slots) {
    const BufferDesc& b = program_->buffers[i];
    std::vector<int64_t>& shape = views_[i].shape;
    shape.resize(b.shape.size());
    for (size_t d = 0; d < b.shape.size(); ++d) {
      rt::Slot s = b.shape[d];
      if (s < 0 || static_cast<size_t>(s) >= slots.size())
        return internal_error("buffer " + std::to_string(i) + " refers to a missing shape slot");
      shape[d] = slots[s];
    }
    return ok_status();
  }

  Status run_kernel(const KernelArgs& args, size_t k) {
    return kKernels[static_cast<size_t>(args.kernel->kind)]->run(args, states_[k].get());
  }

  std::shared_ptr<const rt::Program> program_;
  std::vector<SourceRef> sources_;
  std::map<int32_t, SourceRef> writer_;  // buffer id -> the source of the first kernel writing it
  std::vector<std::unique_ptr<KernelState>> states_;
  std::vector<double>* profile_ = nullptr;  // per-kernel wall time of each run, when set
  std::mutex mutex_;  // one run at a time: the arena and views are shared
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  int64_t arena_bytes_ = 0;
  std::vector<View> views_;
  KernelArgs args_;
  std::vector<std::string> output_what_;  // output_what's names, made on the first run
};

// The CPU needs nothing prepared at compile time: its kernels are the runtime's own.
class CpuBuilder final : public rt::Builder {
 public:
  // float32 chains of three or more convolutions run channels-last: oneDNN's float32 kernels read
  // NHWC, and a chain then changes layout twice in all instead of twice per convolution (ResNet-50
  // B1, 2 cores: 31 ms against 44 ms), but a lone convolution's two transposes cost more than
  // oneDNN's own reorders. GEMMs: see CpuBackend::low_precision_gemms.
  rt::PassRules pass_rules() const override {
    rt::PassRules rules;
    rules.channels_last_dtypes = {DType::kFloat32};
    rules.channels_last_min_chain = 3;
    rules.low_precision_gemms = [] { return rt::cpu_backend()->low_precision_gemms(); };
    return rules;
  }
  StatusOr<rt::Artifacts> build(const rt::Program&, const rt::BuildOptions&) override {
    return rt::Artifacts{};
  }
};

class CpuBackend final : public rt::Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kCpu; }
  bool available() const override { return true; }
  // int8 runs its int32-accumulating kernel; float8 widens exactly to float32 (no faster, but the
  // weight stays one byte an element in memory).
  // An int8 dot with a constant weight takes the weight-only product at any rows: 16 x 4096 x 4096
  // in 10.2 ms against the int8 GEMM's 20.8 ms, 512 x 4096 x 4096 in 80 ms against 305 ms (two
  // cores; float32's GEMM 3.1 and 57 ms).
  rt::LowPrecisionGemms low_precision_gemms() const override { return {true, true, false, 1, 1, -1}; }
  StatusOr<std::unique_ptr<rt::LoadedProgram>> load(std::shared_ptr<const rt::Program> program,
                                                    const rt::Artifacts&) override {
    if (!program) return internal_error("load: no program");
    for (const Tensor& c : program->constants)
      if (c.device().kind != Device::Kind::kCpu)
        return internal_error("load: a CPU program's constant is on " + c.device().str());
    auto loaded = std::make_unique<CpuLoadedProgram>(std::move(program));
    TRIPY_RETURN_IF_ERROR(loaded->prepare());
    return std::unique_ptr<rt::LoadedProgram>(std::move(loaded));
  }
  // Host memory is the CPU's memory: copies are the identity and share the bytes.
  StatusOr<Tensor> copy_from_host(const Tensor& host) override { return host; }
  StatusOr<Tensor> copy_to_host(const Tensor& t) override {
    if (t.device().kind != Device::Kind::kCpu)
      return invalid_argument("the CPU backend cannot read a tensor on " + t.device().str());
    return t;
  }
  StatusOr<Tensor> duplicate(const Tensor& t) override {
    TRIPY_ASSIGN_OR_RETURN(Tensor copy, Tensor::try_empty_host(t.dtype(), t.shape(), "a copy of imported data"));
    if (t.nbytes() > 0) std::memcpy(copy.data(), t.data(), static_cast<size_t>(t.nbytes()));
    return copy;
  }
  StatusOr<Tensor> allocate(DType dtype, std::vector<int64_t> shape) override {
    return Tensor::try_empty_host(dtype, std::move(shape), "a new tensor");
  }
  std::string device_description() const override { return "CPU"; }
  // The ranks of one process, meeting in host memory (runtime/collectives.h).
  StatusOr<std::vector<std::shared_ptr<rt::Communicator>>> create_communicators(const std::vector<Device>& ranks) override {
    const int world_size = static_cast<int>(ranks.size());
    if (world_size < 1 || world_size > rt::kMaxWorldSize)
      return invalid_argument("a mesh has 1 to " + std::to_string(rt::kMaxWorldSize) + " ranks, not " + std::to_string(world_size));
    return rt::make_host_communicators(world_size);
  }
  // No streams: every kernel has finished when run() returns (the Backend defaults).
};

}  // namespace
}  // namespace tripy::cpu

namespace tripy::rt {
Backend* cpu_backend() {
  static cpu::CpuBackend* backend = new cpu::CpuBackend();
  return backend;
}

Builder* cpu_builder() {
  static cpu::CpuBuilder* builder = new cpu::CpuBuilder();
  return builder;
}

}  // namespace tripy::rt

// The runtime finds this backend (and its trivial builder) through its registries
// (runtime/backend.h). The unmangled name is what the build asks the linker to keep
// (core/CMakeLists.txt: -u), so static links run this too.
extern "C" {
extern const bool tripy_cpu_backend_registered;
const bool tripy_cpu_backend_registered =
    tripy::rt::register_backend(tripy::Device::Kind::kCpu, tripy::rt::cpu_backend) &&
    tripy::rt::register_builder(tripy::Device::Kind::kCpu, tripy::rt::cpu_builder);
}

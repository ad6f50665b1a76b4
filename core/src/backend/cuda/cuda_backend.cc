// The CUDA Backend: load() needs only the driver: it loads the stored cubins (or PTX), replays the
// algorithms chosen at build time and prepares the program; host<->device copies for tp.copy and
// eager inputs. Building (code generation, NVRTC, tactic timing) is the compiler side's:
// codegen/cuda_builder.cc.
#include "backend/cuda/cuda_backend.h"

#include <chrono>
#include <cstdio>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_artifacts.h"
#include "backend/cuda/cuda_error_record.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_nccl.h"
#include "backend/cuda/cuda_program.h"
#include "runtime/gpu_scope.h"

namespace tripy::rt {
namespace cuda {
namespace {

std::string arch_name(int arch) { return "sm_" + std::to_string(arch); }

// Loads one module from the cubin when this GPU can run it, else from the PTX.
StatusOr<CUmodule> load_module(const CompiledModule& m, int built_arch, int device_arch) {
  CUmodule mod = nullptr;
  const bool cubin_fits = built_arch / 10 == device_arch / 10 && device_arch >= built_arch && !m.cubin.empty();
  if (cubin_fits && api().cuModuleLoadData(&mod, m.cubin.data()) == CUDA_SUCCESS) return mod;
  if (!m.ptx.empty() && device_arch >= built_arch) {
    std::string ptx = m.ptx;  // NUL-terminated copy for the driver's JIT
    TRIPY_CUDA_TRY(cuModuleLoadData(&mod, ptx.c_str()));
    return mod;
  }
  return Status(StatusCode::kUnavailable,
                "this executable's CUDA code was compiled for " + arch_name(built_arch) +
                    " and holds no code that this GPU (" + arch_name(device_arch) +
                    ") can run; compile it again on this GPU");
}

class CudaBackend final : public Backend {
 public:
  Device::Kind kind() const override { return Device::Kind::kGpu; }
  bool available() const override { return device_available(); }
  LowPrecisionGemms low_precision_gemms() const override {
    auto dev = device();
    if (!dev.ok() || !cublaslt_loaded()) return {};
    LowPrecisionGemms g = low_precision_gemms_for(dev.value()->arch);
    g.int8 = g.int8 && lt_runs_quantized(DType::kInt8);
    g.float8 = g.float8 && lt_runs_quantized(DType::kFloat8E4M3);
    return g;
  }

  StatusOr<std::unique_ptr<LoadedProgram>> load(std::shared_ptr<const Program> program,
                                                const Artifacts& artifacts) override {
    if (!program) return internal_error("load: no program");
    TRIPY_RETURN_IF_ERROR(check_supported(*program));
    const auto start = std::chrono::steady_clock::now();
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    TRIPY_RETURN_IF_ERROR(make_current());
    Artifacts built;
    const Artifacts* use = &artifacts;
    if (artifacts.find("cuda.meta") == artifacts.end()) {
      // A program without device code (built for another device, or by hand): compile it now if
      // the compiler side is linked in (it registers the builder), else say what to do.
      Builder* builder = builder_for(Device::Kind::kGpu);
      if (builder == nullptr)
        return Status(StatusCode::kUnavailable,
                      "this executable holds no GPU code and this program has no CUDA compiler (the runtime "
                      "library alone loads device code, it does not generate it): compile this executable "
                      "for the GPU");
      TRIPY_ASSIGN_OR_RETURN(built, builder->build(*program, BuildOptions{0}));
      use = &built;
    }
    TRIPY_ASSIGN_OR_RETURN(CudaArtifacts art, parse_artifacts(*use, program->kernels.size()));
    auto modules = std::make_shared<ModuleSet>();
    modules->device_index = dev->index;
    for (const CompiledModule& m : art.modules) {
      TRIPY_ASSIGN_OR_RETURN(CUmodule mod, load_module(m, art.arch, dev->arch));
      modules->modules.push_back(mod);
    }
    LayoutFunctions fns;
    // In the layout module, or (the gathers and updates, since they compile apart) another one.
    // The index module's functions exist only in programs that gather or update: a launch that
    // needs a missing one says so (plan_gather, plan_update_slice).
    auto find = [&](const std::string& name) {
      CUfunction f = nullptr;
      if (api().cuModuleGetFunction(&f, modules->modules[art.layout_module], name.c_str()) != CUDA_SUCCESS)
        for (size_t m = 0; m < modules->modules.size() && !f; ++m)
          if (api().cuModuleGetFunction(&f, modules->modules[m], name.c_str()) != CUDA_SUCCESS) f = nullptr;
      if (f) fns[name] = f;
      return f != nullptr;
    };
    for (const std::string& name : layout_module_functions())
      if (!find(name))
        return Status(StatusCode::kDataLoss, "the executable's CUDA modules lack the layout function " + name);
    for (const std::string& name : index_module_functions()) find(name);
    std::vector<KernelCode> code(program->kernels.size());
    const bool same_cublaslt = art.cublaslt_version == cublaslt_version();
    for (size_t i = 0; i < program->kernels.size(); ++i) {
      const Kernel& k = program->kernels[i];
      const KindRule& rule = kind_rule(k.kind);
      if (rule.load && (art.kernel_module[i] >= 0 || !rule.module_optional)) {
        if (art.kernel_module[i] < 0) return Status(StatusCode::kDataLoss, "no CUDA module for kernel '" + k.name + "'");
        TRIPY_RETURN_IF_ERROR(
            rule.load(*program, k, modules->modules[art.kernel_module[i]], art.kernel_function[i], code[i]));
      }
      auto algo = art.algos.find(static_cast<int32_t>(i));
      // Algorithms are only meaningful to the library version that chose them (a convolution's
      // records its cuDNN version itself; a dot's GEMV is our own kernel).
      if (algo != art.algos.end() &&
          ((rule.algo == StoredAlgo::kCublasLt && (same_cublaslt || gemv_choice(algo->second))) ||
           rule.algo == StoredAlgo::kOwn))
        code[i].algo = algo->second;
      // A dot that chose our GEMV: its dtype's module is one of the program's (cuda_gemv.h).
      if (k.kind == KernelKind::kDot && gemv_choice(code[i].algo))
        for (const std::string& name : gemv_functions(program->buffers[k.outputs.at(0)].dtype))
          if (!fns.count(name)) find(name);
    }
    const size_t kernels = program->kernels.size();
    TRIPY_ASSIGN_OR_RETURN(auto lp, CudaLoadedProgram::create(std::move(program), std::move(modules),
                                                              std::move(code), std::move(fns)));
    if (debug_level() >= 1)
      std::fprintf(stderr, "tripy: load: %zu kernels in %.1f ms\n", kernels, ms_since(start));
    return std::unique_ptr<LoadedProgram>(std::move(lp));
  }

  StatusOr<Tensor> copy_from_host(const Tensor& host) override {
    if (host.device().kind == Device::Kind::kGpu) return host;
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = cuda::default_stream();
    TRIPY_ASSIGN_OR_RETURN(Tensor d, empty_device(host.dtype(), host.shape(), s));
    if (host.nbytes() == 0) return d;
    TRIPY_CUDA_TRY(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(d.data()), host.data(),
                                     static_cast<size_t>(host.nbytes()), s));
    // From pageable memory the call returns once the bytes are staged; from pinned memory it
    // returns at once, and the caller may free the source: wait then.
    unsigned int type = 0;
    if (api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    reinterpret_cast<CUdeviceptr>(host.data())) == CUDA_SUCCESS) {
      TRIPY_CUDA_TRY(cuStreamSynchronize(s));
    }
    return d;
  }

  StatusOr<Tensor> duplicate(const Tensor& t) override {
    if (t.device().kind != Device::Kind::kGpu) return internal_error("duplicate: not a GPU tensor");
    GpuScope on(t.device().index);
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = cuda::default_stream();
    TRIPY_ASSIGN_OR_RETURN(Tensor d, empty_device(t.dtype(), t.shape(), s));
    if (t.nbytes() == 0) return d;
    TRIPY_CUDA_TRY(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(d.data()), reinterpret_cast<CUdeviceptr>(t.data()),
                                     static_cast<size_t>(t.nbytes()), s));
    // The source may be released (or rewritten by its owner) once the import returns.
    TRIPY_CUDA_TRY(cuStreamSynchronize(s));
    return d;
  }

  StatusOr<Tensor> copy_to_host(const Tensor& t) override {
    if (t.device().kind == Device::Kind::kCpu) return t;
    GpuScope on(t.device().index);
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = cuda::default_stream();
    TRIPY_ASSIGN_OR_RETURN(Tensor h, Tensor::try_empty_host(t.dtype(), t.shape(), "a copy from the GPU"));
    if (t.nbytes() == 0) return h;
    // Programs on other streams make the default stream wait for them (see CudaLoadedProgram::run),
    // so this copy is ordered after whatever wrote the tensor.
    TRIPY_CUDA_TRY(cuMemcpyDtoHAsync(h.data(), reinterpret_cast<CUdeviceptr>(t.data()),
                                     static_cast<size_t>(t.nbytes()), s));
    TRIPY_CUDA_TRY(cuStreamSynchronize(s));
    // The values may come from a run whose gather or update_slice failed: raise that instead.
    TRIPY_RETURN_IF_ERROR(check_device_errors());
    return h;
  }

  StatusOr<Tensor> allocate(DType dtype, std::vector<int64_t> shape) override {
    TRIPY_RETURN_IF_ERROR(make_current());
    return empty_device(dtype, std::move(shape), cuda::default_stream());
  }

  std::string device_description() const override { return cuda_device_description(); }

  // A new stream is blocking: ordered with the legacy default stream other libraries use.
  StatusOr<void*> create_stream() override {
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = nullptr;
    TRIPY_CUDA_TRY(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    return static_cast<void*>(s);
  }

  Status destroy_stream(void* stream) override {
    if (!stream) return ok_status();
    TRIPY_RETURN_IF_ERROR(make_current());
    return TRIPY_CUDA(cuStreamDestroy(static_cast<CUstream>(stream)));
  }

  Status synchronize(void* stream) override { return cuda_synchronize(stream); }

  void* default_stream() override { return device_available() ? cuda::default_stream() : nullptr; }

  void set_default_stream(void* stream) override { cuda::set_default_stream(static_cast<CUstream>(stream)); }

  int cuda_ordinal(int gpu_index) const override { return cuda::cuda_ordinal(gpu_index); }
  int gpu_index(int cuda_ordinal) const override { return cuda::gpu_index(cuda_ordinal); }
  int64_t host_waits() const override { return api().driver_ok ? cuda::host_waits() : 0; }
  // NCCL (cuda_nccl.h): GPUs of this process, or one rank of several processes.
  StatusOr<std::vector<std::shared_ptr<Communicator>>> create_communicators(const std::vector<Device>& ranks) override {
    std::vector<int> gpus;
    for (const Device& d : ranks) gpus.push_back(d.index);
    return nccl_communicators(gpus);
  }
  StatusOr<std::string> communicator_unique_id() override { return nccl_unique_id(); }
  StatusOr<std::shared_ptr<Communicator>> join_communicator(const std::string& id, int rank, int world_size) override {
    return nccl_join(id, rank, world_size);
  }
  int64_t bytes_in_use() const override { return static_cast<int64_t>(cuda::allocator_stats().in_use_bytes); }
};

}  // namespace
}  // namespace cuda

Backend* cuda_backend() {
  static cuda::CudaBackend* backend = new cuda::CudaBackend();
  return backend;
}


Status cuda_synchronize(void* stream) {
  TRIPY_RETURN_IF_ERROR(cuda::make_current());
  CUstream s = stream ? static_cast<CUstream>(stream) : cuda::default_stream();
  TRIPY_CUDA_TRY(cuStreamSynchronize(s));
  // Work that finished may have recorded errors (cuda_error_record.h): they surface here.
  return cuda::check_device_errors();
}

std::string cuda_device_description() {
  auto dev = cuda::device();
  if (!dev.ok()) return dev.status().message();
  return dev.value()->name + " (sm_" + std::to_string(dev.value()->arch) + ")";
}

}  // namespace tripy::rt

// The runtime finds this backend through its registry (runtime/backend.h); backend_for() asks
// available() before handing it out, so machines without a GPU get "unavailable". The unmangled
// name is what the build asks the linker to keep (core/CMakeLists.txt: -u).
extern "C" {
extern const bool tripy_cuda_backend_registered;
const bool tripy_cuda_backend_registered = tripy::rt::register_backend(tripy::Device::Kind::kGpu, tripy::rt::cuda_backend);
}

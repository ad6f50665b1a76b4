// The CUDA Backend: build() generates and compiles every kernel (NVRTC, deduplicated, parallel,
// cached, on other threads while it tunes GEMMs and convolutions); load() needs only the driver:
// it loads the stored cubins (or PTX) and prepares the program; host<->device copies for tp.copy
// and eager inputs.
#include "backend/cuda/cuda_backend.h"

#include <future>
#include <unordered_map>

#include "backend/cuda/cuda_allocator.h"
#include "backend/cuda/cuda_artifacts.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_error_record.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_plugin.h"
#include "backend/cuda/cuda_pool.h"
#include "backend/cuda/cuda_program.h"

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
    if (!dev.ok() || !api().cublaslt_ok) return {};
    LowPrecisionGemms g = low_precision_gemms_for(dev.value()->arch);
    g.int8 = g.int8 && lt_runs_quantized(DType::kInt8);
    g.float8 = g.float8 && lt_runs_quantized(DType::kFloat8E4M3);
    return g;
  }

  StatusOr<Artifacts> build(const Program& program, const BuildOptions& options) override {
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    TRIPY_RETURN_IF_ERROR(make_current());
    CudaArtifacts art;
    art.arch = dev->arch;
    art.cublaslt_version = cublaslt_version();
    std::vector<std::string> sources{layout_module_source()}, names{"tripy_layout"};
    std::unordered_map<std::string, int32_t> by_source{{layout_module_source(), 0}};
    art.layout_module = 0;
    bool has_dot = false, has_conv = false;
    for (const Kernel& k : program.kernels) {
      int32_t module = -1;
      std::string function;
      if (k.kind == KernelKind::kConv) {
        // The fixed convolution module (direct kernel and epilogue), compiled once per program.
        auto [it, fresh] = by_source.emplace(conv_module_source(), static_cast<int32_t>(sources.size()));
        if (fresh) {
          sources.push_back(conv_module_source());
          names.push_back("tripy_conv");
        }
        module = it->second;
        function = conv_function(program.buffers[k.outputs.at(0)].dtype);
        has_conv = true;
      } else if (k.kind == KernelKind::kPlugin) {
        if (k.plugin.cuda_source.empty())
          return kernel_failure(program, k, "the plugin '" + k.plugin.name + "' has no CUDA implementation; run it on the CPU",
                                StatusCode::kUnavailable);
        TRIPY_ASSIGN_OR_RETURN(std::string source, plugin_module_source(k.plugin));
        auto [it, fresh] = by_source.emplace(source, static_cast<int32_t>(sources.size()));
        if (fresh) {
          sources.push_back(source);
          names.push_back(k.plugin.cuda_entry);
        }
        module = it->second;
        function = k.plugin.cuda_entry;
      } else if (k.kind == KernelKind::kPool) {
        auto [it, fresh] = by_source.emplace(pool_module_source(), static_cast<int32_t>(sources.size()));
        if (fresh) {
          sources.push_back(pool_module_source());
          names.push_back("tripy_pool");
        }
        module = it->second;
        function = pool_function(program.buffers[k.outputs.at(0)].dtype);
      } else if (k.kind == KernelKind::kFused || k.kind == KernelKind::kAttention) {
        TRIPY_ASSIGN_OR_RETURN(GeneratedKernel g, k.kind == KernelKind::kFused ? generate_fused(program, k)
                                                                                : generate_attention(program, k));
        auto [it, fresh] = by_source.emplace(g.source, static_cast<int32_t>(sources.size()));
        if (fresh) {
          sources.push_back(g.source);
          names.push_back(g.function);
        }
        module = it->second;
        function = g.function;
      }
      has_dot |= k.kind == KernelKind::kDot;
      art.kernel_module.push_back(module);
      art.kernel_function.push_back(function);
    }
    // The layout module first: tuning fills its scratch operands with it. The other modules
    // compile on other threads (NVRTC is CPU work) while tuning times GEMMs and convolutions on
    // the GPU, so a cold build pays the longer of the two, not their sum.
    TRIPY_ASSIGN_OR_RETURN(art.modules, compile_modules({sources[0]}, {names[0]}, dev->arch));
    const std::vector<std::string> rest_sources(sources.begin() + 1, sources.end()), rest_names(names.begin() + 1, names.end());
    std::future<StatusOr<std::vector<CompiledModule>>> rest = std::async(std::launch::async, [&] {
      return compile_modules(rest_sources, rest_names, dev->arch, /*spare_cores=*/1);  // the tuner's
    });
    Status tuned = ok_status();
    if ((has_dot || has_conv) && options.optimization_level >= 1) tuned = tune(program, art);
    StatusOr<std::vector<CompiledModule>> compiled = rest.get();
    TRIPY_RETURN_IF_ERROR(compiled.status());  // a kernel that does not compile says so first
    TRIPY_RETURN_IF_ERROR(tuned);
    for (CompiledModule& m : compiled.value()) art.modules.push_back(std::move(m));
    return serialize_artifacts(art);
  }

  StatusOr<std::unique_ptr<LoadedProgram>> load(std::shared_ptr<const Program> program,
                                                const Artifacts& artifacts) override {
    if (!program) return internal_error("load: no program");
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    TRIPY_RETURN_IF_ERROR(make_current());
    Artifacts built;
    const Artifacts* use = &artifacts;
    if (artifacts.find("cuda.meta") == artifacts.end()) {
      // A program without device code (built for another device, or by hand): compile it now.
      TRIPY_ASSIGN_OR_RETURN(built, build(*program, BuildOptions{0}));
      use = &built;
    }
    TRIPY_ASSIGN_OR_RETURN(CudaArtifacts art, parse_artifacts(*use, program->kernels.size()));
    auto modules = std::make_shared<ModuleSet>();
    for (const CompiledModule& m : art.modules) {
      TRIPY_ASSIGN_OR_RETURN(CUmodule mod, load_module(m, art.arch, dev->arch));
      modules->modules.push_back(mod);
    }
    LayoutFunctions fns;
    for (const std::string& name : layout_module_functions()) {
      CUfunction f = nullptr;
      TRIPY_CUDA_TRY(cuModuleGetFunction(&f, modules->modules[art.layout_module], name.c_str()));
      fns[name] = f;
    }
    std::vector<KernelCode> code(program->kernels.size());
    const bool same_cublaslt = art.cublaslt_version == cublaslt_version();
    for (size_t i = 0; i < program->kernels.size(); ++i) {
      const Kernel& k = program->kernels[i];
      if (k.kind == KernelKind::kFused || k.kind == KernelKind::kConv || k.kind == KernelKind::kPlugin ||
          k.kind == KernelKind::kPool) {
        if (art.kernel_module[i] < 0) return Status(StatusCode::kDataLoss, "no CUDA module for kernel '" + k.name + "'");
        if (k.kind == KernelKind::kFused) {
          TRIPY_ASSIGN_OR_RETURN(code[i].layout, analyze_fused(*program, k));
        }
        TRIPY_CUDA_TRY(cuModuleGetFunction(&code[i].fn, modules->modules[art.kernel_module[i]],
                                           art.kernel_function[i].c_str()));
      } else if (k.kind == KernelKind::kAttention) {
        if (art.kernel_module[i] < 0) return Status(StatusCode::kDataLoss, "no CUDA module for kernel '" + k.name + "'");
        CUmodule mod = modules->modules[art.kernel_module[i]];
        AttentionFunctions& f = code[i].attention;
        TRIPY_CUDA_TRY(cuModuleGetFunction(&f.generic, mod, kAttentionGeneric));
        // The flash kernel exists only for the head sizes it serves; executables saved before the
        // split kernels existed lack them.
        auto optional = [&](CUfunction* fn, const char* name) {
          if (api().cuModuleGetFunction(fn, mod, name) != CUDA_SUCCESS) *fn = nullptr;
        };
        optional(&f.flash, kAttentionFlash);
        optional(&f.split1, kAttentionSplit1);
        optional(&f.split16, kAttentionSplit16);
      }
      auto algo = art.algos.find(static_cast<int32_t>(i));
      // Algorithms are only meaningful to the library version that chose them (a convolution's
      // records its cuDNN version itself).
      if (algo != art.algos.end() && (same_cublaslt || k.kind == KernelKind::kConv)) code[i].algo = algo->second;
    }
    TRIPY_ASSIGN_OR_RETURN(auto lp, CudaLoadedProgram::create(std::move(program), std::move(modules),
                                                              std::move(code), std::move(fns)));
    return std::unique_ptr<LoadedProgram>(std::move(lp));
  }

  StatusOr<Tensor> copy_from_host(const Tensor& host) override {
    if (host.device().kind == Device::Kind::kGpu) return host;
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = default_stream();
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
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = default_stream();
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
    TRIPY_RETURN_IF_ERROR(make_current());
    CUstream s = default_stream();
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

 private:
  // Times cuBLASLt's candidates for every kDot and cuDNN's algorithms for every kConv at the
  // inputs' `opt` shapes; identical problems (a 12-layer model's repeated GEMMs) are timed once.
  // A GEMM or convolution that cannot be timed (too large for free memory, say) keeps the
  // library heuristic's choice.
  Status tune(const Program& program, CudaArtifacts& art) {
    CUmodule layout = nullptr;
    TRIPY_CUDA_TRY(cuModuleLoadData(&layout, art.modules[art.layout_module].cubin.data()));
    CUfunction fill_f32 = nullptr, fill_f16 = nullptr, fill_bf16 = nullptr;
    Status st = TRIPY_CUDA(cuModuleGetFunction(&fill_f32, layout, fill_function(DType::kFloat32).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_f16, layout, fill_function(DType::kFloat16).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_bf16, layout, fill_function(DType::kBFloat16).c_str()));
    std::vector<int64_t> slots;
    program.eval_shapes(program.opt_inputs(Device{Device::Kind::kGpu, 0}), slots);
    std::unordered_map<std::string, AlgoBytes> done;
    CUstream s = default_stream();
    for (size_t i = 0; st.ok() && i < program.kernels.size(); ++i) {
      const Kernel& k = program.kernels[i];
      if (k.kind == KernelKind::kConv) {
        auto pr = conv_problem(program, k, slots);
        if (!pr.ok() || pr->out_elements() == 0 || numel_of(pr->x) == 0 || !cudnn_usable(*pr)) continue;
        auto it = done.find(pr->key());
        if (it == done.end()) {
          CUfunction fill = pr->dtype == DType::kFloat16 ? fill_f16 : pr->dtype == DType::kBFloat16 ? fill_bf16 : fill_f32;
          auto algo = tune_conv(*pr, fill, s);
          if (!algo.ok()) continue;  // cuDNN's heuristic decides at load time instead
          it = done.emplace(pr->key(), algo.value()).first;
        }
        art.algos[static_cast<int32_t>(i)] = it->second;
        continue;
      }
      if (k.kind != KernelKind::kDot) continue;
      auto pr = dot_problem(program, k, slots);
      if (!pr.ok() || pr->m * pr->n * pr->k == 0) continue;
      auto it = done.find(pr->key());
      if (it == done.end()) {
        CUfunction fill = pr->dtype == DType::kFloat16 ? fill_f16 : pr->dtype == DType::kBFloat16 ? fill_bf16 : fill_f32;
        auto algo = tune_dot(*pr, fill, s);
        if (!algo.ok()) {
          if (algo.status().code() != StatusCode::kResourceExhausted) st = algo.status();
          continue;
        }
        it = done.emplace(pr->key(), algo.value()).first;
      }
      art.algos[static_cast<int32_t>(i)] = it->second;
    }
    (void)TRIPY_CUDA(cuModuleUnload(layout));
    return st;
  }
};

}  // namespace
}  // namespace cuda

Backend* cuda_backend() {
  static cuda::CudaBackend* backend = new cuda::CudaBackend();
  return backend;
}


StatusOr<void*> cuda_create_stream() {
  TRIPY_RETURN_IF_ERROR(cuda::make_current());
  CUstream s = nullptr;
  TRIPY_CUDA_TRY(cuStreamCreate(&s, CU_STREAM_DEFAULT));
  return static_cast<void*>(s);
}

Status cuda_destroy_stream(void* stream) {
  if (!stream) return ok_status();
  TRIPY_RETURN_IF_ERROR(cuda::make_current());
  return TRIPY_CUDA(cuStreamDestroy(static_cast<CUstream>(stream)));
}

Status cuda_synchronize(void* stream) {
  TRIPY_RETURN_IF_ERROR(cuda::make_current());
  CUstream s = stream ? static_cast<CUstream>(stream) : cuda::default_stream();
  TRIPY_CUDA_TRY(cuStreamSynchronize(s));
  // Work that finished may have recorded errors (cuda_error_record.h): they surface here.
  return cuda::check_device_errors();
}

int64_t cuda_host_waits() { return cuda::api().driver_ok ? cuda::host_waits() : 0; }

void* cuda_default_stream() { return cuda::device_available() ? cuda::default_stream() : nullptr; }

void cuda_set_default_stream(void* stream) { cuda::set_default_stream(static_cast<CUstream>(stream)); }

Status cuda_set_program_stream(LoadedProgram* program, void* stream) {
  auto* p = dynamic_cast<cuda::CudaLoadedProgram*>(program);
  if (!p) return invalid_argument("not a CUDA program: it has no stream");
  return p->set_stream(stream);
}

void* cuda_program_stream(const LoadedProgram* program) {
  auto* p = dynamic_cast<const cuda::CudaLoadedProgram*>(program);
  return p ? p->stream() : nullptr;
}

StatusOr<Tensor> cuda_empty(DType dtype, std::vector<int64_t> shape) {
  TRIPY_RETURN_IF_ERROR(cuda::make_current());
  return cuda::empty_device(dtype, std::move(shape), cuda::default_stream());
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

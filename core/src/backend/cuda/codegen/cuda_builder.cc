// The CUDA Builder: generates and compiles every kernel (NVRTC, deduplicated, parallel, cached, on
// other threads while it tunes GEMMs and convolutions) into the artifacts that CudaBackend::load
// reads (cuda_artifacts.h). Compiler side only: the runtime library loads device code and replays
// the chosen algorithms without any of this.
#include "backend/cuda/codegen/cuda_builder.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/codegen/cuda_tuning_cache.h"
#include "backend/cuda/cuda_artifacts.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_conv_graph.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_launch.h"

namespace tripy::rt {
namespace cuda {
namespace {

// What else decides a tuned choice, for the tuning cache's keys: the GPU, the libraries, the tuner,
// and TRIPY_CONV_GEMM (which forbids or forces the GEMM form of a convolution).
std::string tuning_context() {
  const StatusOr<const DeviceInfo*> dev = device();
  const char* conv_gemm = std::getenv("TRIPY_CONV_GEMM");
  return (dev.ok() ? dev.value()->name + " sm" + std::to_string(dev.value()->arch) : std::string("no GPU")) +
         ", cuDNN " + cudnn_version() + ", cuBLASLt " + cublaslt_version() + ", tuner " +
         std::to_string(kTunerVersion) + ", TRIPY_CONV_GEMM=" + (conv_gemm ? conv_gemm : "");
}

// cuDNN and cuBLASLt load their engines on first use (~0.3-0.6 s in a fresh process on an H100):
// a handle each and one heuristic query over a small convolution make them do it.
void warm_libraries() {
  if (!make_current().ok()) return;
  (void)lt_handle();
  if (cudnn_disabled() || !cudnn_handle().ok()) return;
  ConvProblem pr;
  pr.dtype = DType::kFloat16;
  pr.attrs.stride = pr.attrs.dilation = {1, 1};
  pr.attrs.pad_before = pr.attrs.pad_after = {1, 1};
  pr.attrs.layout = Layout::kChannelsLast;
  pr.x = pr.out = {1, 8, 8, 8};
  pr.w = {8, 3, 3, 8};
  if (cudnn_usable(pr)) (void)ConvGraph::create(pr, false);
}

// The modules every build uses whatever the program: the layout module (which every program
// loads) and the tuner's fill kernels. Their sources are fixed, so they compile once per process
// (and GPU architecture), from the start of the first compile, while it lowers and runs passes;
// each on its own, so that tuning starts as soon as the small fill module is there.
using FixedModule = std::shared_future<StatusOr<std::vector<CompiledModule>>>;
struct FixedModules {
  FixedModule layout, fill;
};

FixedModule compile_fixed_module(const std::string& source, const char* name, int arch) {
  return std::async(std::launch::async, [&source, name, arch] { return compile_modules({source}, {name}, arch); })
      .share();
}

class CudaBuilder final : public Builder {
 public:
  void prepare(bool tunes) override {
    StatusOr<const DeviceInfo*> dev = device();
    std::lock_guard<std::mutex> lock(mu_);
    if (dev.ok()) (void)fixed_modules_locked(dev.value()->arch);
    if (tunes && !warm_.valid()) warm_ = std::async(std::launch::async, warm_libraries).share();
  }

  StatusOr<Artifacts> build(const Program& program, const BuildOptions& options) override {
    TRIPY_ASSIGN_OR_RETURN(const DeviceInfo* dev, device());
    TRIPY_RETURN_IF_ERROR(make_current());
    CudaArtifacts art;
    art.arch = dev->arch;
    art.cublaslt_version = cublaslt_version();
    // Distinct sources, each compiled once; module_of gives a source's index, adding it if new.
    std::vector<std::string> sources, names;
    std::unordered_map<std::string, int32_t> by_source;
    auto module_of = [&](const std::string& source, const std::string& name) {
      auto [it, fresh] = by_source.emplace(source, static_cast<int32_t>(sources.size()));
      if (fresh) {
        sources.push_back(source);
        names.push_back(name);
      }
      return it->second;
    };
    bool has_dot = false, has_conv = false;
    std::vector<IndexFunction> index_functions;
    for (const Kernel& k : program.kernels) {
      // A gather's indices are its second input, an update_slice's start its third (the launch
      // rejects a kernel without them).
      const size_t index_input = k.kind == KernelKind::kGather ? 1 : 2;
      if ((k.kind == KernelKind::kGather || k.kind == KernelKind::kUpdateSlice) && k.inputs.size() > index_input &&
          !k.outputs.empty())
        index_functions.push_back({k.kind == KernelKind::kUpdateSlice, dtype_size(program.buffers[k.outputs[0]].dtype),
                                   program.buffers[k.inputs[index_input]].dtype});
      int32_t module = -1;
      std::string function;
      if (k.kind == KernelKind::kConvolution) {
        // The convolution module (direct kernel and epilogue), compiled once per dtype.
        const DType t = program.buffers[k.outputs.at(0)].dtype;
        module = module_of(conv_module_source(t), conv_function(t));
        function = conv_function(t);
        has_conv = true;
      } else if (k.kind == KernelKind::kPlugin) {
        if (k.plugin.cuda_source.empty())
          return kernel_failure(program, k, "the plugin '" + k.plugin.name + "' has no CUDA implementation; run it on the CPU",
                                StatusCode::kUnavailable);
        TRIPY_ASSIGN_OR_RETURN(std::string source, plugin_module_source(k.plugin));
        module = module_of(source, k.plugin.cuda_entry);
        function = k.plugin.cuda_entry;
      } else if (k.kind == KernelKind::kPooling) {
        const DType t = program.buffers[k.outputs.at(0)].dtype;
        module = module_of(pool_module_source(t), pool_function(t));
        function = pool_function(t);
      } else if (k.kind == KernelKind::kFused || k.kind == KernelKind::kAttention) {
        TRIPY_ASSIGN_OR_RETURN(GeneratedKernel g, k.kind == KernelKind::kFused ? generate_fused(program, k)
                                                                                : generate_attention(program, k));
        module = module_of(g.source, g.function);
        function = g.function;
      }
      has_dot |= k.kind == KernelKind::kDot;
      art.kernel_module.push_back(module);
      art.kernel_function.push_back(function);
    }
    if (!index_functions.empty()) module_of(index_module_source(index_functions), "tripy_index");
    // The program's modules compile on other threads (NVRTC is CPU work) while tuning times
    // GEMMs and convolutions on the GPU, so a cold build pays the longer of the two, not their
    // sum. The tuner needs only its fill kernels (a fixed module: prepare() may have compiled it).
    FixedModules fixed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fixed = fixed_modules_locked(dev->arch);
    }
    const auto start = std::chrono::steady_clock::now();
    double compiled_ms = 0;
    std::future<StatusOr<std::vector<CompiledModule>>> modules = std::async(std::launch::async, [&] {
      auto out = compile_modules(sources, names, dev->arch, /*spare_cores=*/1);  // the tuner's
      compiled_ms = ms_since(start);
      return out;
    });
    Status tuned = ok_status();
    const bool tuning = (has_dot || has_conv) && options.optimization_level >= 1;
    if (tuning) prepare(true);
    {  // (always: a warm-up the compiler started must not outlive the compile)
      std::shared_future<void> warm;
      {
        std::lock_guard<std::mutex> lock(mu_);
        warm = warm_;
      }
      if (warm.valid()) warm.wait();
    }
    if (tuning) {
      const StatusOr<std::vector<CompiledModule>>& fill = fixed.fill.get();
      tuned = fill.ok() ? tune(program, fill.value()[0], art) : fill.status();
    }
    const double tuned_ms = ms_since(start);
    StatusOr<std::vector<CompiledModule>> compiled = modules.get();
    const StatusOr<std::vector<CompiledModule>>& layout = fixed.layout.get();
    if (debug_level() >= 1)
      std::fprintf(stderr, "tripy: build: %zu modules compiled by %.1f ms; tuning done at %.1f ms\n", sources.size(),
                   compiled_ms, tuned_ms);
    TRIPY_RETURN_IF_ERROR(compiled.status());  // a kernel that does not compile says so first
    TRIPY_RETURN_IF_ERROR(layout.status());
    TRIPY_RETURN_IF_ERROR(tuned);
    art.modules = std::move(compiled.value());
    art.layout_module = static_cast<int32_t>(art.modules.size());
    art.modules.push_back(layout.value()[0]);
    return serialize_artifacts(art);
  }

 private:
  // Times cuBLASLt's candidates for every kDot and cuDNN's algorithms for every kConv at the
  // inputs' `opt` shapes; identical problems (a 12-layer model's repeated GEMMs) are timed once.
  // A GEMM or convolution that cannot be timed (too large for free memory, say) keeps the
  // library heuristic's choice.
  Status tune(const Program& program, const CompiledModule& fill_module, CudaArtifacts& art) {
    CUmodule fills = nullptr;
    TRIPY_CUDA_TRY(cuModuleLoadData(&fills, fill_module.cubin.data()));
    CUfunction fill_f32 = nullptr, fill_f16 = nullptr, fill_bf16 = nullptr, spin = nullptr;
    Status st = TRIPY_CUDA(cuModuleGetFunction(&fill_f32, fills, fill_function(DType::kFloat32).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_f16, fills, fill_function(DType::kFloat16).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_bf16, fills, fill_function(DType::kBFloat16).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&spin, fills, "tripy_spin"));
    auto kernels_for = [&](DType t) {
      return TuningKernels{t == DType::kFloat16 ? fill_f16 : t == DType::kBFloat16 ? fill_bf16 : fill_f32, spin};
    };
    std::vector<int64_t> slots;
    program.eval_shapes(program.opt_inputs(Device{Device::Kind::kGpu, 0}), slots);
    std::unordered_map<std::string, AlgoBytes> done;
    TuningCache cache(tuning_cache_dir(), tuning_context());
    size_t from_cache = 0;
    // The stored choice for `problem`, else `time()`'s (stored for the next compile).
    auto tuned = [&](const std::string& problem, const auto& time) -> StatusOr<AlgoBytes> {
      if (std::optional<AlgoBytes> hit = cache.find(problem)) {
        ++from_cache;
        return *hit;
      }
      StatusOr<AlgoBytes> algo = time();
      if (algo.ok()) cache.store(problem, algo.value());
      return algo;
    };
    CUstream s = default_stream();
    for (size_t i = 0; st.ok() && i < program.kernels.size(); ++i) {
      const Kernel& k = program.kernels[i];
      if (k.kind == KernelKind::kConvolution) {
        auto pr = conv_problem(program, k, slots);
        if (!pr.ok() || pr->out_elements() == 0 || numel_of(pr->x) == 0 || !cudnn_usable(*pr)) continue;
        auto it = done.find(pr->key());
        if (it == done.end()) {
          auto algo = tuned("conv " + pr->key(), [&] { return tune_conv(*pr, kernels_for(pr->dtype), s); });
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
        auto algo = tuned("dot " + pr->key(), [&] { return tune_dot(*pr, kernels_for(pr->dtype), s); });
        if (!algo.ok()) {
          if (algo.status().code() != StatusCode::kResourceExhausted) st = algo.status();
          continue;
        }
        it = done.emplace(pr->key(), algo.value()).first;
      }
      art.algos[static_cast<int32_t>(i)] = it->second;
    }
    (void)TRIPY_CUDA(cuModuleUnload(fills));
    if (debug_level() >= 1)
      std::fprintf(stderr, "tripy: build: %zu distinct problems, %zu of them from the tuning cache\n", done.size(),
                   from_cache);
    return st;
  }

  FixedModules fixed_modules_locked(int arch) {
    FixedModules& f = fixed_[arch];
    if (!f.layout.valid()) {
      f.layout = compile_fixed_module(layout_module_source(), "tripy_layout", arch);
      f.fill = compile_fixed_module(fill_module_source(), "tripy_fill", arch);
    }
    return f;
  }

  std::mutex mu_;
  std::shared_future<void> warm_;  // warm_libraries, started once per process
  std::map<int, FixedModules> fixed_;  // by GPU architecture
};

}  // namespace
}  // namespace cuda

Builder* cuda_builder() {
  static cuda::CudaBuilder* builder = new cuda::CudaBuilder();
  return builder;
}

}  // namespace tripy::rt

// The compiler and CudaBackend::load find this builder through the runtime's registry
// (runtime/backend.h). The unmangled name is what the build asks the linker to keep in programs
// that link the compiler side (core/CMakeLists.txt: -u).
extern "C" {
extern const bool tripy_cuda_builder_registered;
const bool tripy_cuda_builder_registered = tripy::rt::register_builder(tripy::Device::Kind::kGpu, tripy::rt::cuda_builder);
}

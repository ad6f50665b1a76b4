// The CUDA Builder: generates and compiles every kernel (NVRTC, deduplicated, parallel, cached, on
// other threads while it tunes GEMMs and convolutions) into the artifacts that CudaBackend::load
// reads (cuda_artifacts.h). Compiler side only: the runtime library loads device code and replays
// the chosen algorithms without any of this.
#include "backend/cuda/codegen/cuda_builder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_tuning.h"
#include "backend/cuda/codegen/cuda_tuning_cache.h"
#include "backend/cuda/cuda_artifacts.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_conv_graph.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt {
namespace cuda {
namespace {

// A hash of every kernel file: the tuner times our own kernels (the GEMV, the weight-only tiles)
// against each other and the libraries, so a change to any of them makes its stored choices stale.
const std::string& kernel_files_hash() {
  static const std::string hash = [] {
    std::string all;
    for (size_t i = 0; i < kernels::kFileCount; ++i)
      all += std::string(kernels::kFiles[i].name) + '\n' + kernels::kFiles[i].text;
    return hash_hex(all);
  }();
  return hash;
}

// What else decides a tuned choice, for the tuning cache's keys: the GPU, the libraries, the tuner
// and our kernels' code, TRIPY_CONV_GEMM (which forbids or forces the GEMM form of a convolution),
// TRIPY_GEMV (the same for a dot's GEMV kernel) and TRIPY_WEIGHT_ONLY_MMA (for a weight-only dot's
// tensor-core tile).
std::string tuning_context() {
  const StatusOr<const DeviceInfo*> dev = device();
  const char* conv_gemm = std::getenv("TRIPY_CONV_GEMM");
  const char* gemv = std::getenv("TRIPY_GEMV");
  const char* mma = std::getenv("TRIPY_WEIGHT_ONLY_MMA");
  return (dev.ok() ? dev.value()->name + " sm" + std::to_string(dev.value()->arch) : std::string("no GPU")) +
         ", cuDNN " + cudnn_version() + ", cuBLASLt " + cublaslt_version() + ", tuner " +
         std::to_string(kTunerVersion) + ", kernels " + kernel_files_hash() +
         ", TRIPY_CONV_GEMM=" + (conv_gemm ? conv_gemm : "") + ", TRIPY_GEMV=" + (gemv ? gemv : "") +
         ", TRIPY_WEIGHT_ONLY_MMA=" + (mma ? mma : "");
}

// cuDNN and cuBLASLt load their engines on first use (~0.3-0.6 s in a fresh process on an H100):
// a handle each and, for cuDNN, one heuristic query over a small convolution make them do it.
// Each only where a build will time it.
void warm_gemms() {
  if (make_current().ok()) (void)lt_handle();
}

void warm_convolutions() {
  warm_gemms();  // convolutions may run as GEMMs
  if (!make_current().ok() || cudnn_disabled() || !cudnn_handle().ok()) return;
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

// A GEMM or convolution to time at the inputs' opt sizes: identical problems (the same key) are
// timed once, and the tuning cache keeps the winner under `cache_key`.
struct TuningJob {
  std::string key, cache_key;
  DType dtype = DType::kFloat32;  // of the scratch operands (the fill kernel)
  std::function<StatusOr<AlgoBytes>(const TuningKernels& kernels, CUstream stream)> time;
  // Whether a failure (other than running out of memory) fails the build; else the library's
  // heuristic decides at load time.
  bool required = false;
};

// What the builder does for one kind: the module that runs a kernel (and its function), the
// function a kernel needs in the shared index module, and the library call to time.
struct BuildRule {
  KernelKind kind;
  // nullptr: no module of its own (cuBLASLt, the layout modules).
  StatusOr<GeneratedKernel> (*module)(const Program& p, const Kernel& k);
  // The module is generated from the kernel itself (not a fixed module, not a user's source):
  // what kernel_sources() shows.
  bool generated;
  std::optional<IndexFunction> (*index_function)(const Program& p, const Kernel& k);  // nullptr: none
  std::optional<TuningJob> (*tuning)(const Program& p, const Kernel& k, const std::vector<int64_t>& slots);
  // A fixed module of the kernel's dtype made of one file of kernels/ (kind_module_source), when
  // `module` is nullptr and `file` is set: the file's text, its entry points' common name, and
  // whose dtype picks the entry point (the first output's, or with `by_input` the first input's).
  const char* file = nullptr;
  const char* entry = nullptr;
  bool by_input = false;
  // Which kernels of the kind have the file's module (nullptr: all).
  bool (*has_module)(const Program& p, const Kernel& k) = nullptr;
};

StatusOr<GeneratedKernel> plugin_module(const Program& p, const Kernel& k) {
  if (k.plugin.cuda_source.empty())
    return kernel_failure(p, k, "the plugin '" + k.plugin.name + "' has no CUDA implementation; run it on the CPU",
                          StatusCode::kUnavailable);
  TRIPY_ASSIGN_OR_RETURN(std::string source, plugin_module_source(k.plugin));
  return GeneratedKernel{std::move(source), k.plugin.cuda_entry};
}

// A gather's indices are its second input, an update_slice's start its third (the launch rejects
// a kernel without them).
std::optional<IndexFunction> index_function(const Program& p, const Kernel& k, bool update, size_t index_input) {
  if (k.inputs.size() <= index_input || k.outputs.empty()) return std::nullopt;
  return IndexFunction{update, dtype_size(p.buffers[k.outputs[0]].dtype), p.buffers[k.inputs[index_input]].dtype};
}
std::optional<IndexFunction> gather_index_function(const Program& p, const Kernel& k) {
  return index_function(p, k, false, 1);
}
std::optional<IndexFunction> update_index_function(const Program& p, const Kernel& k) {
  return index_function(p, k, true, 2);
}

// The GEMV entry points (gemv_functions) a build compiles for dot `k`, by dtype: those the tuner
// times, where the problem at the opt sizes (which it times) is one the kernel takes; else the
// choice is cuBLASLt's and no run launches the kernel. (GPT-2's prefill has none: its M is B x T.)
void gemv_entries_to_time(const Program& p, const Kernel& k, const std::vector<int64_t>& opt_slots, int arch,
                          std::map<DType, std::set<std::string>>& out) {
  const StatusOr<DotProblem> pr = dot_problem(p, k, opt_slots);
  if (!pr.ok() || !gemv_applies(pr.value())) return;
  for (GemvTactic t : gemv_tactics(pr.value(), arch)) out[pr->dtype].insert(gemv_function_for(pr.value(), t));
}

// And those the executable holds for a dot that chose `tactic`: the entry of every row count from
// the fewest to the most its sizes give (sampled over their ranges, Program::sample_inputs), up to
// the kernel's kGemvMaxRows. A run whose entry is missing after all takes cuBLASLt (plan_dot_step).
void gemv_entries_to_keep(const Program& p, const Kernel& k, GemvTactic tactic, std::set<std::string>& out) {
  std::optional<DotProblem> any;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  std::vector<int64_t> slots;
  for (const std::vector<Tensor>& inputs : p.sample_inputs(Device{Device::Kind::kGpu, 0})) {
    p.eval_shapes(inputs, slots);
    const StatusOr<DotProblem> pr = dot_problem(p, k, slots);
    if (!pr.ok()) continue;
    any = pr.value();
    lo = std::min(lo, pr->n);
    hi = std::max(hi, pr->n);
  }
  if (!any) return;
  const std::set<std::string> names = gemv_functions_for(*any, lo, hi, tactic);
  out.insert(names.begin(), names.end());
}

// cuBLASLt's candidates; a GEMM that cannot be timed (too large for free memory) keeps the
// heuristic's choice, any other failure is the build's.
std::optional<TuningJob> dot_tuning(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  auto pr = dot_problem(p, k, slots);
  if (!pr.ok() || pr->m * pr->n * pr->k == 0) return std::nullopt;
  const DotProblem problem = pr.value();
  return TuningJob{problem.key(), "dot " + problem.key(), problem.dtype,
                   [problem](const TuningKernels& kernels, CUstream s) { return tune_dot(problem, kernels, s); },
                   /*required=*/true};
}

// cuDNN's engines, where cuDNN takes the problem; one that cannot be timed keeps the heuristic's.
std::optional<TuningJob> conv_tuning(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  auto pr = conv_problem(p, k, slots);
  if (!pr.ok() || pr->out_elements() == 0 || numel_of(pr->x) == 0 || !cudnn_usable(*pr)) return std::nullopt;
  const ConvProblem problem = pr.value();
  return TuningJob{problem.key(), "conv " + problem.key(), problem.dtype,
                   [problem](const TuningKernels& kernels, CUstream s) { return tune_conv(problem, kernels, s); },
                   /*required=*/false};
}

// A weight-only dot's tiles (weight_only_tiles_to_time) and splits, timed at the opt sizes. One that
// cannot be timed keeps its own tile and the launch's split.
std::optional<TuningJob> weight_only_tuning(const Program& p, const Kernel& k, const std::vector<int64_t>& slots) {
  const std::vector<int> tiles = weight_only_tiles_to_time(p, k);
  const std::vector<int64_t> x = p.buffer_shape(k.inputs.at(0), slots), w = p.buffer_shape(k.inputs.at(1), slots);
  const std::vector<int64_t> scale = p.buffer_shape(k.inputs.at(2), slots);
  if (x.empty() || w.size() != 2 || scale.size() != 2) return std::nullopt;
  WeightOnlyProblem pr = weight_only_problem(p, k, x, w, scale, numel_of(p.buffer_shape(k.outputs.at(0), slots)));
  if (pr.rows * pr.K == 0) return std::nullopt;
  // From kWeightOnlyGemmRows rows cuBLASLt multiplies the dequantized weight: the split is for fewer.
  pr.rows = std::min(pr.rows, kWeightOnlyGemmRows - 1);
  std::string key = std::string(float_suffix(pr.dtype)) + " b" + std::to_string(pr.bits) + " rows " +
                    std::to_string(pr.rows) + " N " + std::to_string(pr.N) + " K " + std::to_string(pr.K) + " group " +
                    std::to_string(pr.group) + (pr.zero ? " zero" : "") +
                    (pr.constant_weight ? " constant" : "") + " behind a lead tiles";
  for (int t : tiles) key += " " + std::to_string(t);
  return TuningJob{key, "weight-only " + key, pr.dtype,
                   [pr, tiles](const TuningKernels& kernels, CUstream s) { return tune_weight_only(pr, tiles, kernels, s); },
                   /*required=*/false};
}

// An all-reduce or all-gather over ranks of a dtype the one-shot kernel has an entry point for
// (a reduce-scatter is NCCL's).
bool one_shot_collective(const Program& p, const Kernel& k) {
  const DType t = p.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
  return k.collective.world_size > 1 && k.collective.op != CollectiveAttrs::Op::kReduceScatter &&
         (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kInt32 ||
          t == DType::kInt64);
}

// One row per kind, in kernel_kinds.h's order. (Which kinds the GPU runs at all is the
// runtime's table: check_supported, cuda_kinds.h.)
constexpr BuildRule kBuildRules[] = {
    {KernelKind::kFused, generate_fused, true, nullptr, nullptr},
    {KernelKind::kDot, nullptr, false, nullptr, dot_tuning},
    {KernelKind::kTranspose, nullptr, false, nullptr, nullptr},
    {KernelKind::kSlice, nullptr, false, nullptr, nullptr},
    {KernelKind::kConcatenate, nullptr, false, nullptr, nullptr},
    {KernelKind::kGather, nullptr, false, gather_index_function, nullptr},
    {KernelKind::kCopy, nullptr, false, nullptr, nullptr},
    {KernelKind::kAttention, generate_attention, true, nullptr, nullptr},
    {KernelKind::kConvolution, nullptr, false, nullptr, conv_tuning, kernels::kConvDirect, "tripy_conv"},
    {KernelKind::kUpdateSlice, nullptr, false, update_index_function, nullptr},
    {KernelKind::kPlugin, plugin_module, false, nullptr, nullptr},
    {KernelKind::kPooling, nullptr, false, nullptr, nullptr, kernels::kPool, "tripy_pool"},
    {KernelKind::kSample, nullptr, false, nullptr, nullptr, kernels::kSample, "tripy_sample", /*by_input=*/true},
    {KernelKind::kWeightOnlyDot, weight_only_dot_module, false, nullptr, weight_only_tuning},
    // NCCL at run time, or the one-shot kernel (cuda_collective.cc)
    {KernelKind::kCollective, nullptr, false, nullptr, nullptr, kernels::kOneShotCollective, "tripy_one_shot",
     /*by_input=*/true, one_shot_collective},
};
static_assert(one_row_per_kind(kBuildRules), "one row per kernel kind of runtime/kernel_kinds.h, in its order");

const BuildRule& build_rule(KernelKind kind) { return kBuildRules[static_cast<size_t>(kind)]; }

// The prelude, the TRIPY_FOR_DTYPE macro that keeps the text of its row for dtype `t` only, and the
// file, whose rows define one entry point per dtype.
GeneratedKernel file_module(const BuildRule& rule, DType t) {
  std::string head = "#define TRIPY_FOR_DTYPE(dtype, ...) TRIPY_KEEP_##dtype(__VA_ARGS__)\n";
  for (int d = 0; d < kNumDTypes; ++d)
    head += std::string("#define TRIPY_KEEP_") + dtype_suffix(static_cast<DType>(d)) + "(...)" +
            (d == static_cast<int>(t) ? " __VA_ARGS__" : "") + "\n";
  return GeneratedKernel{device_prelude() + head + rule.file, std::string(rule.entry) + "_" + dtype_suffix(t)};
}

// The module that runs kernel `k`, if its kind has one: the row's function, or its file's module.
StatusOr<std::optional<GeneratedKernel>> module_of_kernel(const Program& p, const Kernel& k) {
  const BuildRule& rule = build_rule(k.kind);
  if (rule.module) {
    TRIPY_ASSIGN_OR_RETURN(GeneratedKernel g, rule.module(p, k));
    return std::optional<GeneratedKernel>(std::move(g));
  }
  if (!rule.file || (rule.has_module && !rule.has_module(p, k))) return std::optional<GeneratedKernel>();
  const int32_t buffer = rule.by_input ? k.inputs.at(0) : k.outputs.at(0);
  return std::optional<GeneratedKernel>(file_module(rule, p.buffers[static_cast<size_t>(buffer)].dtype));
}

class CudaBuilder final : public Builder {
 public:
  // cuBLASLt's fast kernels need aligned rows; tensor cores want narrow-float convolutions NHWC;
  // the quantized GEMMs are what this GPU and cuBLASLt run.
  PassRules pass_rules() const override {
    PassRules rules;
    rules.pad_dot_columns = true;
    rules.channels_last_dtypes = {DType::kFloat16, DType::kBFloat16};
    rules.channels_last_min_chain = 1;
    // The K-sliced tiles normalize x and add the residual (their fold entry points).
    rules.weight_only_fold = weight_only_fold_applies;
    rules.low_precision_gemms = [] {
      Backend* gpu = backend_for(Device::Kind::kGpu);
      return gpu ? gpu->low_precision_gemms() : LowPrecisionGemms{};
    };
    return rules;
  }

  void prepare(Tunes tunes) override {
    StatusOr<const DeviceInfo*> dev = device();
    std::lock_guard<std::mutex> lock(mu_);
    if (dev.ok()) (void)fixed_modules_locked(dev.value()->arch);
    if (tunes.gemms && !warm_gemms_.valid()) warm_gemms_ = std::async(std::launch::async, warm_gemms).share();
    if (tunes.convolutions && !warm_convolutions_.valid())
      warm_convolutions_ = std::async(std::launch::async, warm_convolutions).share();
  }

  StatusOr<Artifacts> build(const Program& program, const BuildOptions& options) override {
    TRIPY_RETURN_IF_ERROR(check_supported(program));
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
    Tunes tunes;
    std::vector<IndexFunction> index_functions;
    std::map<DType, std::set<std::string>> gemv_to_time;  // GEMV entry points the tuner times
    std::vector<int64_t> opt_slots;
    program.eval_shapes(program.opt_inputs(Device{Device::Kind::kGpu, 0}), opt_slots);
    // Weight-only dots, whose tiles and splits the tuner times: their entry points compile apart,
    // as the GEMV's.
    std::map<int32_t, std::vector<int>> weight_only_tiles;
    for (const Kernel& k : program.kernels) {
      const BuildRule& rule = build_rule(k.kind);
      if (rule.index_function)
        if (std::optional<IndexFunction> f = rule.index_function(program, k)) index_functions.push_back(*f);
      if (k.kind == KernelKind::kWeightOnlyDot && options.optimization_level >= 1) {
        std::vector<int> tiles = weight_only_tiles_to_time(program, k);
        const DType t = program.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
        for (int tile : tiles) (void)weight_only_entry_module(dev->arch, t, weight_only_format(program, k), tile);
        weight_only_tiles[static_cast<int32_t>(art.kernel_module.size())] = std::move(tiles);
        art.kernel_module.push_back(-1);  // set once the tuner has chosen
        art.kernel_function.emplace_back();
        continue;
      }
      int32_t module = -1;
      std::string function;
      TRIPY_ASSIGN_OR_RETURN(std::optional<GeneratedKernel> g, module_of_kernel(program, k));
      if (g) {
        module = module_of(g->source, g->function);
        function = g->function;
      }
      if (rule.tuning && k.kind != KernelKind::kWeightOnlyDot)
        (k.kind == KernelKind::kConvolution ? tunes.convolutions : tunes.gemms) = true;
      if (k.kind == KernelKind::kDot && options.optimization_level >= 1)
        gemv_entries_to_time(program, k, opt_slots, dev->arch, gemv_to_time);
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
    // The GEMV modules the tuner will time start compiling now, beside the program's own.
    for (const auto& [t, names] : gemv_to_time) (void)gemv_modules(dev->arch, names);
    const auto start = std::chrono::steady_clock::now();
    double compiled_ms = 0;
    std::future<StatusOr<std::vector<CompiledModule>>> modules = std::async(std::launch::async, [&] {
      auto out = compile_modules(sources, names, dev->arch, /*spare_cores=*/1);  // the tuner's
      compiled_ms = ms_since(start);
      return out;
    });
    Status tuned = ok_status();
    const bool tuning =
        (tunes.gemms || tunes.convolutions || !weight_only_tiles.empty()) && options.optimization_level >= 1;
    if (tuning) prepare(tunes);
    {  // (always: a warm-up the compiler started must not outlive the compile)
      std::shared_future<void> gemms, convolutions;
      {
        std::lock_guard<std::mutex> lock(mu_);
        gemms = warm_gemms_;
        convolutions = warm_convolutions_;
      }
      if (gemms.valid()) gemms.wait();
      if (convolutions.valid()) convolutions.wait();
    }
    if (tuning) {
      const StatusOr<std::vector<CompiledModule>>& fill = fixed.fill.get();
      tuned = fill.ok() ? tune(program, opt_slots, fill.value()[0], gemv_to_time, dev->arch, art) : fill.status();
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
    // The GEMV entry points of the dots that chose the kernel, each its own module (load() finds
    // its functions by name).
    std::set<std::string> kept;
    for (const auto& [kernel, algo] : art.algos)
      if (std::optional<GemvTactic> tactic = gemv_choice(algo))
        gemv_entries_to_keep(program, program.kernels[static_cast<size_t>(kernel)], *tactic, kept);
    for (const FixedModule& m : gemv_modules(dev->arch, kept)) {
      const StatusOr<std::vector<CompiledModule>>& gemv = m.get();
      TRIPY_RETURN_IF_ERROR(gemv.status());
      art.modules.push_back(gemv.value()[0]);
    }
    // The weight-only dots' chosen entry points (their own tile where none was timed), each
    // module once; the stored choice keeps the split.
    std::map<std::string, int32_t> weight_only_module;
    for (const auto& [kernel, tiles] : weight_only_tiles) {
      const Kernel& k = program.kernels[static_cast<size_t>(kernel)];
      int tile = tiles[0];
      if (auto a = art.algos.find(kernel); a != art.algos.end()) {
        const std::optional<WeightOnlyChoice> chosen = weight_only_choice(a->second);
        if (chosen && std::find(tiles.begin(), tiles.end(), chosen->tile) != tiles.end())
          tile = chosen->tile;
        else
          art.algos.erase(a);
      }
      const DType t = program.buffers[static_cast<size_t>(k.inputs.at(0))].dtype;
      const int bits = weight_only_format(program, k);
      const std::string name = weight_only_function(t, bits, tile);
      auto [it, fresh] = weight_only_module.emplace(name, static_cast<int32_t>(art.modules.size()));
      if (fresh) {
        const StatusOr<std::vector<CompiledModule>>& m = weight_only_entry_module(dev->arch, t, bits, tile).get();
        TRIPY_RETURN_IF_ERROR(m.status());
        art.modules.push_back(m.value()[0]);
      }
      art.kernel_module[static_cast<size_t>(kernel)] = it->second;
      art.kernel_function[static_cast<size_t>(kernel)] = name;
    }
    return serialize_artifacts(art);
  }

  StatusOr<std::vector<std::string>> kernel_sources(const Program& program) override {
    std::vector<std::string> out;
    for (const Kernel& k : program.kernels) {
      const BuildRule& rule = build_rule(k.kind);
      if (!rule.generated) continue;
      TRIPY_ASSIGN_OR_RETURN(GeneratedKernel g, rule.module(program, k));
      out.push_back(std::move(g.source));
    }
    return out;
  }

  StatusOr<std::optional<std::string>> compile_plugin(const PluginAttrs& plugin, int arch) override {
    if (!nvrtc_available()) return std::optional<std::string>();
    TRIPY_ASSIGN_OR_RETURN(std::string source, plugin_module_source(plugin));
    TRIPY_ASSIGN_OR_RETURN(std::vector<CompiledModule> modules, compile_modules({source}, {plugin.cuda_entry}, arch));
    return std::optional<std::string>(std::move(modules.at(0).ptx));
  }

 private:
  // Times cuBLASLt's candidates for every kDot and cuDNN's algorithms for every kConvolution at the
  // inputs' `opt` shapes (`slots`); identical problems (a 12-layer model's repeated GEMMs) are timed once.
  // A GEMM or convolution that cannot be timed (too large for free memory, say) keeps the
  // library heuristic's choice.
  Status tune(const Program& program, const std::vector<int64_t>& slots, const CompiledModule& fill_module,
              const std::map<DType, std::set<std::string>>& gemv_to_time, int arch, CudaArtifacts& art) {
    // One build times at a time: two compiles at once (a prefill and a decode step from two
    // threads) overlap their NVRTC work, but candidates timed side by side would each see the
    // other's kernels.
    std::lock_guard<std::mutex> timing(tune_mu_);
    CUmodule fills = nullptr;
    TRIPY_CUDA_TRY(cuModuleLoadData(&fills, fill_module.cubin.data()));
    CUfunction fill_f32 = nullptr, fill_f16 = nullptr, fill_bf16 = nullptr, spin = nullptr;
    Status st = TRIPY_CUDA(cuModuleGetFunction(&fill_f32, fills, fill_function(DType::kFloat32).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_f16, fills, fill_function(DType::kFloat16).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&fill_bf16, fills, fill_function(DType::kBFloat16).c_str()));
    if (st.ok()) st = TRIPY_CUDA(cuModuleGetFunction(&spin, fills, "tripy_spin"));
    CUfunction lead = nullptr;  // where the module lacks it, calls are timed alone
    if (st.ok() && api().cuModuleGetFunction(&lead, fills, "tripy_lead") != CUDA_SUCCESS) lead = nullptr;
    // The GEMV modules the tuner times, loaded on first use (compiled once per process).
    std::map<DType, std::vector<CUmodule>> gemv;
    auto gemv_for = [&](DType t) -> std::vector<CUmodule> {
      auto names = gemv_to_time.find(t);
      if (names == gemv_to_time.end()) return {};
      auto it = gemv.find(t);
      if (it != gemv.end()) return it->second;
      std::vector<CUmodule>& loaded = gemv[t];
      for (const FixedModule& f : gemv_modules(arch, names->second)) {
        const StatusOr<std::vector<CompiledModule>>& compiled = f.get();
        CUmodule m = nullptr;
        if (!compiled.ok() || api().cuModuleLoadData(&m, compiled.value()[0].cubin.data()) != CUDA_SUCCESS) {
          for (CUmodule done : loaded) (void)TRIPY_CUDA(cuModuleUnload(done));
          loaded.clear();  // no GEMV tactics, rather than some
          break;
        }
        loaded.push_back(m);
      }
      return loaded;
    };
    // The weight-only entry points the build started (weight_only_entry_module), loaded on first
    // use; a module's second entry point (the ring's) is looked up in its module.
    std::map<std::string, CUmodule> entries;
    auto entry = [&](const std::string& name) -> CUfunction {
      const std::string module = weight_only_module_function(name);
      auto it = entries.find(module);
      if (it == entries.end()) {
        CUmodule m = nullptr;
        FixedModule f;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto found = entry_modules_.find({arch, module});
          if (found != entry_modules_.end()) f = found->second;
        }
        if (f.valid()) {
          const StatusOr<std::vector<CompiledModule>>& compiled = f.get();
          if (!compiled.ok() || api().cuModuleLoadData(&m, compiled.value()[0].cubin.data()) != CUDA_SUCCESS) m = nullptr;
        }
        it = entries.emplace(module, m).first;
      }
      CUfunction fn = nullptr;
      if (it->second && api().cuModuleGetFunction(&fn, it->second, name.c_str()) != CUDA_SUCCESS) fn = nullptr;
      return fn;
    };
    auto kernels_for = [&](DType t) {
      return TuningKernels{t == DType::kFloat16 ? fill_f16 : t == DType::kBFloat16 ? fill_bf16 : fill_f32, spin,
                           lead, gemv_for(t), entry};
    };
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
      const BuildRule& rule = build_rule(k.kind);
      if (!rule.tuning) continue;
      std::optional<TuningJob> job = rule.tuning(program, k, slots);
      if (!job) continue;
      auto it = done.find(job->key);
      if (it == done.end()) {
        auto algo = tuned(job->cache_key, [&] { return job->time(kernels_for(job->dtype), s); });
        if (!algo.ok()) {
          if (job->required && algo.status().code() != StatusCode::kResourceExhausted) st = algo.status();
          continue;
        }
        it = done.emplace(job->key, algo.value()).first;
      }
      art.algos[static_cast<int32_t>(i)] = it->second;
    }
    (void)TRIPY_CUDA(cuModuleUnload(fills));
    for (const auto& [t, modules] : gemv)
      for (CUmodule m : modules) (void)TRIPY_CUDA(cuModuleUnload(m));
    for (const auto& [name, m] : entries)
      if (m) (void)TRIPY_CUDA(cuModuleUnload(m));
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

  // The GEMV entry points `names` (gemv_functions), each its own module (NVRTC compiles them at
  // once on separate cores), compiled once per process and architecture.
  std::vector<FixedModule> gemv_modules(int arch, const std::set<std::string>& names) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<FixedModule> out;
    for (DType t : {DType::kFloat16, DType::kBFloat16})
      for (int tile : kGemvRowTiles) {
        for (int rows : kGemvWeightRows) {
          if (!gemv_entry_exists(tile, rows)) continue;
          const std::string name = gemv_function(t, tile, rows);
          if (names.count(name))
            out.push_back(entry_module_locked(arch, name, [&] { return gemv_module_source(t, tile, rows); }));
        }
        if (tile >= kGemvMmaRows && names.count(gemv_tma_function(t, tile)))
          out.push_back(entry_module_locked(arch, gemv_tma_function(t, tile),
                                            [&] { return gemv_tma_module_source(t, tile); }));
      }
    return out;
  }

  // A weight-only dot's entry point of `tile` in a module of its own (the tuner times the tiles of
  // weight_only_tiles_to_time).
  FixedModule weight_only_entry_module(int arch, DType t, int bits, int tile) {
    std::lock_guard<std::mutex> lock(mu_);
    return entry_module_locked(arch, weight_only_function(t, bits, tile),
                               [&] { return weight_only_dot_module_source(t, bits, tile).source; });
  }

  // Entry point `name` in a module of its own (`source` makes its text, only the first time),
  // compiled once per process and architecture on a thread of its own, so that NVRTC compiles
  // such modules at once on separate cores. The caller holds mu_.
  FixedModule entry_module_locked(int arch, const std::string& name, const std::function<std::string()>& source) {
    FixedModule& f = entry_modules_[{arch, name}];
    if (!f.valid())
      f = std::async(std::launch::async, [text = source(), name, arch] { return compile_modules({text}, {name}, arch); })
              .share();
    return f;
  }

  std::mutex mu_, tune_mu_;
  std::map<std::pair<int, std::string>, FixedModule> entry_modules_;  // the GEMV's and weight-only dot's
  std::shared_future<void> warm_gemms_, warm_convolutions_;  // each started once per process
  std::map<int, FixedModules> fixed_;  // by GPU architecture
};

}  // namespace

GeneratedKernel kind_module_source(KernelKind kind, DType t) {
  const BuildRule& rule = build_rule(kind);
  return rule.file ? file_module(rule, t) : GeneratedKernel{};
}

const char* dtype_suffix(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3: return "f8e4m3";
    case DType::kInt4: return "i4";
    case DType::kInt8: return "i8";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kBool: return "bool";
  }
  return "invalid";
}

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

// The CUDA backend's table of kernel kinds (cuda_kinds.h), and the per-kind functions too small
// for a file of their own: fused kernels, plugins, pooling, sampling and the layout kinds, whose launches
// cuda_launch.cc, cuda_plugin.cc and cuda_pool.cc plan.
#include "backend/cuda/cuda_kinds.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_plugin.h"
#include "backend/cuda/cuda_pool.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda {
namespace {

// The kinds whose module holds one function that the artifacts name (a generated module, or the
// fixed convolution and pooling module of the kernel's dtype, or a plugin's).
Status load_function(const Program& p, const Kernel& k, CUmodule module, const std::string& function,
                     KernelCode& code) {
  TRIPY_CUDA_TRY(cuModuleGetFunction(&code.fn, module, function.c_str()));
  return ok_status();
}

// A fused kernel's function and the layout of its argument words.
Status load_fused(const Program& p, const Kernel& k, CUmodule module, const std::string& function, KernelCode& code) {
  TRIPY_ASSIGN_OR_RETURN(code.layout, analyze_fused(p, k));
  return load_function(p, k, module, function, code);
}

StatusOr<bool> plan_fused_step(PlanContext& c, const Kernel& k, Step& step) {
  const KernelCode& code = c.code[static_cast<size_t>(step.kernel)];
  TRIPY_ASSIGN_OR_RETURN(step.launches, plan_fused(c.program, k, code.layout, code.fn, c.slots, c.sm_count));
  return true;
}

// A plugin's output is zeroed first: a kernel that skips elements leaves zeros there (as on the
// CPU), never another kernel's values from the arena.
StatusOr<bool> plan_plugin_step(PlanContext& c, const Kernel& k, Step& step) {
  const CUfunction fn = c.code[static_cast<size_t>(step.kernel)].fn;
  TRIPY_ASSIGN_OR_RETURN(std::vector<Launch> plugin, plan_plugin(c.program, k, fn, c.shapes));
  if (plugin.empty()) return true;
  const int32_t out = k.outputs[0];
  const int64_t bytes = numel_of(c.shapes[static_cast<size_t>(out)]) * dtype_size(c.program.buffers[static_cast<size_t>(out)].dtype);
  TRIPY_ASSIGN_OR_RETURN(Launch zero, plan_byte_zero(c.layout_fns, out, bytes, c.sm_count));
  step.launches.push_back(std::move(zero));
  for (Launch& l : plugin) step.launches.push_back(std::move(l));
  return true;
}

StatusOr<bool> plan_pool_step(PlanContext& c, const Kernel& k, Step& step) {
  step.launches = plan_pool_launch(c.program, k, c.code[static_cast<size_t>(step.kernel)].fn, c.slots, c.sm_count);
  return !step.launches.empty();  // an empty output: no step
}

// kSample: blocks of 1024 threads, one per row of logits after an argmax that spreads each row
// over `parts` blocks (slices of at least 4096 tokens, about two blocks per SM in all; the module:
// codegen/kernels/sample.cuh, whose SampleArgs these words are); a program without rows launches
// nothing.
StatusOr<bool> plan_sample_step(PlanContext& c, const Kernel& k, Step& step) {
  const std::vector<int64_t>& x = c.shapes[static_cast<size_t>(k.inputs[0])];
  const int64_t rows = numel_of(c.shapes[static_cast<size_t>(k.outputs[0])]);
  if (rows == 0) return false;
  if (rows > 0x7fffffff) return kernel_failure(c.program, k, "samples more rows than a grid holds", StatusCode::kInvalidArgument);
  const float temperature = static_cast<float>(k.sample.temperature);
  const double top_p = k.sample.top_p;
  int32_t temperature_bits = 0;
  int64_t top_p_bits = 0;
  std::memcpy(&temperature_bits, &temperature, sizeof(temperature_bits));
  std::memcpy(&top_p_bits, &top_p, sizeof(top_p_bits));
  const int64_t V = x.back();
  const int64_t parts = std::clamp<int64_t>(std::min((V + 4095) / 4096, 2 * int64_t{std::max(1, c.sm_count)} / rows), 1, 64);
  Launch l;
  l.fn = c.code[static_cast<size_t>(step.kernel)].fn;
  l.overlaps = true;
  l.grid = static_cast<unsigned>(rows * parts);
  l.block_x = 1024;
  l.words = {0, 0, 0, rows, V, temperature_bits, k.sample.top_k, top_p_bits, 0, 0, parts};
  l.ptrs = {{0, k.outputs[0], 0}, {1, k.inputs[0], 0}, {2, k.inputs[1], 0}};
  if (parts > 1) {
    l.workspace_word = 8;
    l.workspace_bytes = rows * parts * 8;
    l.counters_word = 9;
    l.counters = rows;
    c.workspace = std::max(c.workspace, static_cast<size_t>(l.workspace_bytes));
    c.counters = std::max(c.counters, l.counters);
  }
  step.launches = {l};
  return true;
}

// A layout kind: its launches of the layout module.
template <LayoutPlanner plan>
StatusOr<bool> plan_layout_step(PlanContext& c, const Kernel& k, Step& step) {
  TRIPY_ASSIGN_OR_RETURN(step.launches, plan(c.program, k, c.layout_fns, c.slots, c.sm_count));
  return true;
}

// A layout kind that checks an index or start at run time (gather, update_slice): its launches
// record what they find in the program's error record, tagged with the kernel.
template <LayoutPlanner plan>
StatusOr<bool> plan_checked_layout_step(PlanContext& c, const Kernel& k, Step& step) {
  TRIPY_ASSIGN_OR_RETURN(step.launches, plan(c.program, k, c.layout_fns, c.slots, c.sm_count));
  if (step.launches.empty()) return true;
  TRIPY_ASSIGN_OR_RETURN(ErrorRecord * errors, c.error_record());
  for (Launch& g : step.launches) {
    if (g.words.size() <= kGatherClaimWord) continue;  // update_slice's copy of its operand
    g.words[kGatherErrorWord] = static_cast<int64_t>(errors->record());
    g.words[kGatherTagWord] = static_cast<int64_t>(step.kernel) + 1;
    g.words[kGatherClaimWord] = static_cast<int64_t>(errors->claim());
  }
  return true;
}

// One row per kind, in kernel_kinds.h's order.
constexpr KindRule kKindRules[] = {
    {KernelKind::kFused, load_fused, StoredAlgo::kNone, plan_fused_step, nullptr},
    {KernelKind::kDot, nullptr, StoredAlgo::kCublasLt, plan_dot_step, run_dot_step},
    {KernelKind::kTranspose, nullptr, StoredAlgo::kNone, plan_layout_step<plan_transpose>, nullptr},
    {KernelKind::kSlice, nullptr, StoredAlgo::kNone, plan_layout_step<plan_slice>, nullptr},
    {KernelKind::kConcatenate, nullptr, StoredAlgo::kNone, plan_layout_step<plan_concatenate>, nullptr},
    {KernelKind::kGather, nullptr, StoredAlgo::kNone, plan_checked_layout_step<plan_gather>, nullptr},
    {KernelKind::kCopy, nullptr, StoredAlgo::kNone, plan_layout_step<plan_copy>, nullptr},
    {KernelKind::kAttention, load_attention, StoredAlgo::kNone, plan_attention_step, run_attention_step},
    {KernelKind::kConvolution, load_function, StoredAlgo::kOwn, plan_conv_step, run_conv_step},
    {KernelKind::kUpdateSlice, nullptr, StoredAlgo::kNone, plan_checked_layout_step<plan_update_slice>, nullptr},
    {KernelKind::kPlugin, load_function, StoredAlgo::kNone, plan_plugin_step, nullptr},
    {KernelKind::kPooling, load_function, StoredAlgo::kNone, plan_pool_step, nullptr},
    {KernelKind::kSample, load_function, StoredAlgo::kNone, plan_sample_step, nullptr},
    {KernelKind::kWeightOnlyDot, load_weight_only_dot, StoredAlgo::kOwn, plan_weight_only_dot_step,
     run_weight_only_dot_step},
    // The one-shot collectives' module where the builder made one; NCCL alone otherwise.
    {KernelKind::kCollective, load_function, StoredAlgo::kNone, plan_collective_step, run_collective_step,
     /*module_optional=*/true},
};

static_assert(one_row_per_kind(kKindRules), "one row per kernel kind of runtime/kernel_kinds.h, in its order");

}  // namespace

const KindRule& kind_rule(KernelKind kind) { return kKindRules[static_cast<size_t>(kind)]; }

Status check_supported(const Program& p) {
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    if (static_cast<size_t>(k.kind) >= kNumKernelKinds)
      return internal_error("kernel '" + k.name + "' has an unknown kind", kernel_source(p, static_cast<int32_t>(i)));
    if (!kind_rule(k.kind).plan)
      return Status(StatusCode::kUnavailable,
                    std::string("kernel kind ") + kernel_kind_name(k.kind) + " is not supported on the GPU (kernel '" +
                        k.name + "'); compile this program for the CPU",
                    kernel_source(p, static_cast<int32_t>(i)));
  }
  return ok_status();
}

SourceRef kernel_source(const Program& p, int32_t kernel) {
  const Kernel& k = p.kernels[static_cast<size_t>(kernel)];
  if (k.source >= 0 && static_cast<size_t>(k.source) < p.sources.size())
    return std::make_shared<SourceInfo>(p.sources[static_cast<size_t>(k.source)]);
  return nullptr;
}

}  // namespace tripy::rt::cuda

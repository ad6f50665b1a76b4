// The CUDA backend's table of kernel kinds: one row per kind of runtime/kernel_kinds.h (checked
// when the code is built) saying what load() resolves in the kind's module, which stored
// algorithm it replays, how a kernel is planned into a Step for one input-shape signature, and
// what a Step runs besides its launches (a cuBLASLt or cuDNN call). The per-kind functions live
// beside their kind (cuda_gemm.cc, cuda_conv.cc, cuda_attention.cc; the small ones in
// cuda_kinds.cc); the program (cuda_program.cc) only walks the table. The builder's table of what
// each kind compiles and tunes is the compiler side's (codegen/cuda_builder.cc).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_attention_cudnn.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_conv.h"
#include "backend/cuda/cuda_error_record.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_launch.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// What load() resolved for one kernel.
struct KernelCode {
  CUfunction fn = nullptr;       // kFused, kPlugin; kConvolution, kPooling: the fixed module's function for its dtype
  AttentionFunctions attention;  // kAttention
  FusedLayout layout;            // kFused
  AlgoBytes algo;                // kDot, kConvolution, kWeightOnlyDot: the tuned algorithm, or empty
  int row_tile = 0;              // kWeightOnlyDot: the rows of x its entry point holds
  CUfunction vector_fn = nullptr;  // kWeightOnlyDot: the ring's entry point, where the module has one
  CUfunction frag_fn = nullptr;    // kWeightOnlyDot: the register-fed int4 tile's, where the module has one
  CUfunction one_row_fn = nullptr;  // kWeightOnlyDot: the one-row tile's (int4, int8, float8), where the module has one
  CUfunction one_row_short_fn = nullptr;  // ... and its entry point for short int8 rows, where the module has one
  CUfunction dequantize_fn = nullptr;  // kWeightOnlyDot: the weight's dequantization, where the module has one
  // kWeightOnlyDot: the many-rows tile at 64 and 32 rows of x a block and their layouts of x, where
  // the module has them.
  CUfunction many_rows_fn[2] = {}, many_rows_x_fn[2] = {};
  // kWeightOnlyDot: the few-rows tile and its layout of x, where the module has both.
  CUfunction few_rows_fn = nullptr, few_rows_x_fn = nullptr;
  // kWeightOnlyDot: the K-sliced one-row tile's shapes (kWeightOnlySliced), where the module has them.
  CUfunction sliced_fn[3] = {};
  // kWeightOnlyDot: the few-rows tile's K-sliced shapes (kWeightOnlyFewSliced), where the module has them.
  CUfunction few_sliced_fn[2] = {};
  // kWeightOnlyDot of a folded product (norm, residual): the K-sliced one-row tile's entry points of
  // its fold or the few-rows tile's fold entry points, and the CUDA-core form for addresses off
  // the vector alignment.
  CUfunction sliced_fold_fn[3] = {};
  CUfunction few_sliced_fold_fn[2] = {}, few_x_fold_fn = nullptr, fold_rows_fn = nullptr;
};

// One kernel's work at one input-shape signature: launches of our kernels, or a library plan
// (and the launches that follow it, or that stand in for it should the library refuse at run time).
struct Step {
  int32_t kernel = 0;
  std::vector<Launch> launches;           // fused and layout kernels, and GELU after a dot
  std::unique_ptr<DotPlan> dot;           // kDot
  std::unique_ptr<ConvPlan> convolution;  // kConvolution through cuDNN (else `launches` holds our kernel)
  Launch conv_direct, conv_epilogue;      // kConvolution: our kernel, and the epilogue cuDNN may leave
  Launch dequantize;  // kWeightOnlyDot through cuBLASLt (`dot`): the weight into the workspace, first
  // kAttention through cuDNN (`launches` empty), the operands' byte offsets (head windows), and
  // our kernel's launches should cuDNN fail at run time.
  std::unique_ptr<AttentionCudnnPlan> attention;
  std::array<int64_t, AttentionAttrs::kNumOperands> attention_offsets{};
  std::vector<Launch> attention_fallback;
  // kCollective (cuda_collective.cc): all_reduce's elements, or all_gather's blocks and bytes per
  // block of each rank's input (blocks > 1: gathered in the workspace, then interleaved).
  int64_t collective_count = 0, collective_block_bytes = 0;
  Launch one_shot;  // the one-shot kernel (fn null: its module was not built)
};

// What planning one signature's steps reads, and the program-wide scratch they ask for.
struct PlanContext {
  const Program& program;
  const std::vector<KernelCode>& code;  // per kernel
  const LayoutFunctions& layout_fns;
  const std::vector<int64_t>& slots;
  const std::vector<std::vector<int64_t>>& shapes;  // per buffer, at these slots
  int sm_count = 1;
  CUstream stream = nullptr;
  size_t workspace = 0;  // the largest workspace a library plan or launch asks
  int64_t counters = 0;  // the most int32 counters a launch asks (split attention, the sampler)
  // The program's error record, created on first use: what gathers and update_slices write to.
  std::function<StatusOr<ErrorRecord*>()> error_record;
};

// What running a step reads: buffer addresses and the program's workspace.
struct RunContext {
  const Program& program;
  const std::vector<KernelCode>& code;  // per kernel
  const std::vector<CUdeviceptr>& base;  // per buffer
  CUdeviceptr workspace = 0;
  size_t workspace_bytes = 0;
  CUstream stream = nullptr;
};

// Which stored algorithm load() hands a kind's kernels.
enum class StoredAlgo : uint8_t {
  kNone,
  kCublasLt,  // valid only for the cuBLASLt version that chose it (the artifacts record it)
  kOwn,       // records its own library version (a convolution's cuDNN version), or is our kernel's
};

struct KindRule {
  KernelKind kind;
  // Resolves kernel `k`'s functions in its module (the artifacts name `function`); nullptr: the
  // kind has no module of its own (cuBLASLt, the layout module).
  Status (*load)(const Program& p, const Kernel& k, CUmodule module, const std::string& function, KernelCode& code);
  StoredAlgo algo;
  // Plans kernel `k` (step.kernel) at the context's sizes; false: nothing to compute, no step.
  // nullptr: the GPU cannot run this kind (check_supported rejects the program).
  StatusOr<bool> (*plan)(PlanContext& c, const Kernel& k, Step& step);
  // Runs the library call `plan` set up, before step.launches; nullptr: the launches are all.
  Status (*run)(Step& step, const Kernel& k, const RunContext& c);
  // Whether a kernel of this kind may have no module (load then runs only for those that do).
  bool module_optional = false;
};

// The row of `kind` (a kind that check_supported accepted).
const KindRule& kind_rule(KernelKind kind);
// "kernel kind X is not supported on the GPU" (kUnavailable, at the kernel's line) for the first
// kernel whose kind has no plan: load() and the builder call it, so a run never meets one.
Status check_supported(const Program& p);
// The user's line of kernel `kernel`, for errors (null when the program has none).
SourceRef kernel_source(const Program& p, int32_t kernel);

// The per-kind functions of the table, defined beside their kind.
StatusOr<bool> plan_dot_step(PlanContext& c, const Kernel& k, Step& step);  // cuda_gemm.cc
Status run_dot_step(Step& step, const Kernel& k, const RunContext& c);
// Runs step.dot (cuBLASLt's A, B, bias, D), planned again first where the addresses are less
// aligned than it assumed (`stored`: the tuned algorithm, or null).
Status run_step_dot(Step& step, const RunContext& c, const AlgoBytes* stored, CUdeviceptr a, CUdeviceptr b,
                    CUdeviceptr bias, CUdeviceptr d, CUdeviceptr workspace, size_t workspace_bytes);
StatusOr<bool> plan_conv_step(PlanContext& c, const Kernel& k, Step& step);  // cuda_conv.cc
Status run_conv_step(Step& step, const Kernel& k, const RunContext& c);
Status load_attention(const Program& p, const Kernel& k, CUmodule module, const std::string& function,
                      KernelCode& code);  // cuda_attention.cc
StatusOr<bool> plan_attention_step(PlanContext& c, const Kernel& k, Step& step);
Status run_attention_step(Step& step, const Kernel& k, const RunContext& c);
// A decode step's KV cache writes folded into its attention: where the two steps before a
// split-KV attention write its k and v caches in place (update_slice, one start and count of rows
// for both), the attention's launch reads those keys from the writes' sources and writes them into
// the caches itself (split_append, attention_split.cuh), and the writes' launches go: two kernels
// fewer a layer. TRIPY_ATTENTION_APPEND=0 keeps them (to compare).
void fold_cache_writes(const Program& p, const std::vector<KernelCode>& code, std::vector<Step>& steps);
StatusOr<bool> plan_collective_step(PlanContext& c, const Kernel& k, Step& step);  // cuda_collective.cc
Status run_collective_step(Step& step, const Kernel& k, const RunContext& c);

}  // namespace tripy::rt::cuda

// kAttention on the GPU: the flash kernel (tensor cores, float16/bfloat16, head size 64 or 128),
// the split-KV kernels (few query rows: decode steps) and a generic one (any float dtype, head size
// and layout), all in one NVRTC module per variant (dtype, head size, causal, mask kind); a launch
// picks split-KV for few rows per kv head, else the flash kernel when it fits, else the generic one.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/cuda_codegen.h"
#include "runtime/program.h"

struct CUfunc_st;  // the driver's CUfunction; this header stays free of driver headers (tests)

namespace tripy::rt::cuda {

struct Launch;

// The generated module: `function` is "tripy_attention"; the module defines
// tripy_attention_generic and the split kernels always, tripy_attention_flash when the head size
// allows it.
StatusOr<GeneratedKernel> generate_attention(const Program& program, const Kernel& kernel);
inline const char* kAttentionGeneric = "tripy_attention_generic";
inline const char* kAttentionFlash = "tripy_attention_flash";
// Split-KV for up to 1 and up to kAttentionSplitRows rows per (batch, kv head).
inline const char* kAttentionSplit1 = "tripy_attention_split1";
inline const char* kAttentionSplit16 = "tripy_attention_split16";
inline constexpr int64_t kAttentionSplitRows = 16;
// The rows tripy_attention_split16 of this kernel's module serves: the smallest power of two from
// 2 to kAttentionSplitRows that holds the most rows per kv head its sizes give. Its row loops are
// unrolled, so NVRTC time grows with it (on a 2-core build machine: 16 rows 7.5 s, 8 rows 2.7 s,
// 4 rows 1.6 s, 2 rows 1.1 s): a GQA group of 4 heads compiles the 4-row kernel.
int64_t attention_split_capacity(const Program& program, const Kernel& kernel);

// The kernel bodies (cuda_attention_source.cc, cuda_attention_split_source.cc); generate_attention
// prepends the variant's macros.
const std::string& attention_source_body();
const std::string& attention_split_source();

// A kernel's entry points, as load() found them (null where the module lacks one: no flash kernel
// for the head size, or an executable saved before the split kernels existed).
struct AttentionFunctions {
  CUfunc_st* generic = nullptr;
  CUfunc_st* flash = nullptr;
  CUfunc_st* split1 = nullptr;
  CUfunc_st* split16 = nullptr;
};

// The launch for these sizes and its grid (128 threads a block) and argument words (addresses
// left 0): split-KV when the module has the split kernel for the number of query rows per kv head
// (chunks sized for `sm_count` SMs), else the flash kernel when the module has it and the operands
// fit it, else the generic one. (The non-null entries of `fns` say what the module has.)
// TRIPY_ATTENTION_SPLIT=0, at compile and run time, leaves split-KV out (to compare).
struct AttentionLaunch {
  enum class Path { kGeneric, kFlash, kSplit } path = Path::kGeneric;
  bool flash = false;  // path == kFlash
  unsigned grid = 0;   // 0: nothing to compute
  std::vector<int64_t> words;
  int32_t vec_word = -1;  // flash, split: 1 when every address is 16-byte aligned, filled per run
  // Split: rows per (batch, kv head), chunks of keys, and the float32 partials' bytes (in the
  // program's workspace) and int32 counters (kept at zero between launches) it needs.
  int64_t split_rows = 0, splits = 0, workspace_bytes = 0, counters = 0;
  CUfunc_st* split_fn = nullptr;
  std::array<int64_t, AttentionAttrs::kNumOperands> byte_offsets{};  // of q, k, v, mask, out (head windows)
};
StatusOr<AttentionLaunch> plan_attention_words(const Program& p, const Kernel& k, const AttentionFunctions& fns,
                                               const std::vector<int64_t>& slots, int sm_count);
// plan_attention_words as a Launch of the chosen function (none when there is nothing to do).
StatusOr<std::vector<Launch>> plan_attention(const Program& p, const Kernel& k, const AttentionFunctions& fns,
                                             const std::vector<int64_t>& slots, int sm_count);

}  // namespace tripy::rt::cuda

// kAttention on the GPU: the flash kernel (tensor cores, float16/bfloat16, head size 64 or 128)
// and a generic one (any float dtype, head size and layout), both in one NVRTC module per
// variant (dtype, head size, causal, mask kind); a launch picks the flash kernel when it fits.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/cuda_codegen.h"
#include "runtime/program.h"

struct CUfunc_st;  // the driver's CUfunction; this header stays free of driver headers (tests)

namespace tripy::rt::cuda {

struct Launch;

// The generated module: `function` is "tripy_attention"; the module defines
// tripy_attention_generic always and tripy_attention_flash when the head size allows it.
StatusOr<GeneratedKernel> generate_attention(const Program& program, const Kernel& kernel);
inline const char* kAttentionGeneric = "tripy_attention_generic";
inline const char* kAttentionFlash = "tripy_attention_flash";

// The kernel body (cuda_attention_source.cc); generate_attention prepends the variant's macros.
const std::string& attention_source_body();

// The launch for these sizes: the flash kernel when `has_flash` and the operands fit it, else
// the generic one; its grid (128 threads a block) and argument words (addresses left 0).
struct AttentionLaunch {
  bool flash = false;
  unsigned grid = 0;  // 0: nothing to compute
  std::vector<int64_t> words;
  int32_t vec_word = -1;  // flash: 1 when every address is 16-byte aligned, filled per run
  std::array<int64_t, AttentionAttrs::kNumOperands> byte_offsets{};  // of q, k, v, mask, out (head windows)
};
StatusOr<AttentionLaunch> plan_attention_words(const Program& p, const Kernel& k, bool has_flash,
                                               const std::vector<int64_t>& slots);
// plan_attention_words as a Launch of `flash` or `generic` (none when there is nothing to do).
StatusOr<std::vector<Launch>> plan_attention(const Program& p, const Kernel& k, CUfunc_st* flash,
                                             CUfunc_st* generic, const std::vector<int64_t>& slots);

}  // namespace tripy::rt::cuda

// The attention kernels' text, which generate_attention (cuda_attention_generate.cc) puts behind
// the prelude and the variant's macros: kernels/attention.cuh (AttnArgs, the generic and flash
// kernels) and kernels/attention_split.cuh (split-KV, for few query rows per kv head).
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"

namespace tripy::rt::cuda {

const std::string& attention_source_body() {
  static const std::string kBody = kernels::kAttention;
  return kBody;
}

const std::string& attention_split_source() {
  static const std::string kSource = kernels::kAttentionSplit;
  return kSource;
}

}  // namespace tripy::rt::cuda

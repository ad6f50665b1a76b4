// Long-sequence attention through cuDNN's fused flash attention (its graph API: two matmuls, the
// scale, the causal mask and the softmax as one graph, which cuDNN runs as one Hopper kernel).
// On an H100 at (8, 12, 1024, 64) float16 causal it took 48 us where our mma.sync flash kernel
// takes 78 (as long as FlashAttention-2's): the launch uses it for long query sequences and keeps
// our kernels for short ones, decode steps, explicit masks, float32, and machines without cuDNN.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "backend/cuda/cuda_cudnn_graph.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// Query rows from which a launch hands attention to cuDNN (below, its fixed costs lose to ours:
// torch's cuDNN path took 34 us at (1, 12, 128, 64), our kernel 6.8).
inline constexpr int64_t kCudnnAttentionMinQueries = 512;

// One kAttention at run-time sizes, as cuDNN takes it: (batch, heads, rows, head) sizes and
// element strides of q, k, v and the output (unit stride along the head).
struct AttentionCudnnProblem {
  DType dtype = DType::kFloat16;
  bool causal = false;
  float scale = 1.0f;
  int64_t B = 0, Hq = 0, Hkv = 0, L = 0, S = 0, D = 0, Dv = 0;
  std::array<std::array<int64_t, 4>, 4> strides{};  // q, k, v, out
};

// Whether cuDNN takes this problem, and why not: float16/bfloat16, no explicit mask, head sizes
// multiples of 8 up to 128, at least kCudnnAttentionMinQueries queries, 16-byte aligned rows,
// cuDNN loaded and not turned off (TRIPY_CUDNN=0 or TRIPY_ATTENTION_CUDNN=0).
bool attention_cudnn_wanted(const AttentionCudnnProblem& pr, MaskKind mask, std::string* why);

class AttentionCudnnPlan {
 public:
  // The graph, the heuristic's engines and a plan of the first that cuDNN accepts here. Its
  // engines compile at run time (about 0.8-1 s a plan on an H100), so plans are shared: every
  // kernel of the same problem in the process (GPT-2's 12 layers) reuses the first one's.
  static StatusOr<std::unique_ptr<AttentionCudnnPlan>> create(const AttentionCudnnProblem& pr);
  size_t workspace_bytes() const;
  // Runs on 16-byte aligned operands (a head window's start included).
  Status run(CUdeviceptr q, CUdeviceptr k, CUdeviceptr v, CUdeviceptr out, CUdeviceptr workspace, CUstream stream);

  struct Compiled;  // the graph and its plan (cuda_attention_cudnn.cc)

 private:
  AttentionCudnnPlan() = default;
  std::shared_ptr<const Compiled> compiled_;
  // By-value scalars: the variant pack holds their host addresses.
  float scale_ = 1.0f, masked_ = 0.0f;
  CudnnDesc pack_;  // rebuilt only when an address changes
  std::array<CUdeviceptr, 5> pack_ptrs_{};
};

}  // namespace tripy::rt::cuda

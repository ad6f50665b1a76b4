// A planned kernel launch: the function, its grid, and its argument words with the places where
// buffer addresses go. Planned once per input-shape signature; a run only patches addresses.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_codegen.h"
#include "runtime/program.h"

namespace tripy::rt::cuda {

// words[word] = address of `buffer` + byte_offset, filled at each run.
struct PtrWord {
  int32_t word = 0;
  int32_t buffer = 0;
  int64_t byte_offset = 0;
  bool any_alignment = false;  // read element by element: no part of the vector word's check
};

struct Launch {
  CUfunction fn = nullptr;
  unsigned grid = 1, block_x = 256, block_y = 1;
  std::vector<int64_t> words;
  std::vector<PtrWord> ptrs;
  // When >= 0: words[vector_word] = 1 and the grid becomes vector_grid if every address in
  // `ptrs` is 16-byte aligned, else 0 and the scalar grid.
  int32_t vector_word = -1;
  unsigned vector_grid = 1;
  unsigned scalar_grid = 1;
  CUfunction vector_fn = nullptr;  // where set, the vector form runs this function instead of fn
  unsigned vector_block_x = 0;     // where set, vector_fn's own block (threads)
  // Program-owned scratch (kAttention's split path): `workspace_bytes` of the program's workspace
  // at words[workspace_word] and `counters` int32 counters, zero between launches, at
  // words[counters_word]. The program writes both addresses before each launch (the workspace
  // may have grown since planning).
  int32_t workspace_word = -1, counters_word = -1;
  int64_t workspace_bytes = 0, counters = 0;
  // The kernel calls enter_after_previous() (device_prelude.cuh) before touching memory, so it
  // may launch while the stream's previous kernel still runs (programmatic dependent launch, sm_90):
  // its launch latency then hides behind that kernel's tail.
  bool overlaps = false;
  // A TMA descriptor (CUtensorMap, 128 bytes) the vector form (vector_fn) reads at words[word..]:
  // the matrix at words[address_word], `rows` rows of `row_bytes` bytes, in boxes of box_rows x
  // box_bytes swizzled 128B (rows past the end read as zeros). launch() encodes it once the
  // addresses are patched; word < 0: none.
  struct TensorMap {
    int32_t word = -1, address_word = -1;
    int64_t rows = 0, row_bytes = 0;
    uint32_t box_rows = 0, box_bytes = 0;
  } tensor_map;
};

// Encodes `l.tensor_map` for the address now in its words (a bad shape or address is an error).
Status encode_tensor_map(Launch& l);

// Patches addresses (base[b] is buffer b's device address) and launches on `stream`.
Status launch(Launch& l, const std::vector<CUdeviceptr>& base, CUstream stream);
// Whether Launch::overlaps takes effect here (sm_90 and later, TRIPY_OVERLAP_LAUNCHES not 0).
bool overlap_launches();
// `fn` launched so that it may start while the stream's previous kernel runs, where launches
// overlap; else plainly.
Status launch_overlapping(CUfunction fn, unsigned grid, unsigned block_x, unsigned block_y, void** params,
                          CUstream stream);
// The tuner's stand-in for the kernel before a timed call (tuning_fill.cuh's tripy_lead, `lead`;
// none where launches do not overlap): one block that lets the call launch at once.
Status launch_lead(CUfunction lead, CUstream stream);
// Whether every launch's `l.ptrs` are 16-byte aligned whatever the caller passes: each buffer is
// one this backend allocates (256-byte aligned: the arena and its offsets, constants, fresh
// outputs; aliases of them), not the caller's memory (inputs, donated outputs), at a 16-byte
// multiple. Launch::vector_word is then always 1.
bool always_aligned(const Program& p, const Launch& l);

// The fixed module's functions by name.
using LayoutFunctions = std::map<std::string, CUfunction>;

// Grid for a grid-stride loop over n items with `block` threads, a few waves over the GPU.
unsigned grid_for(int64_t n, int block, int sm_count);

// kFused -> one launch (none when the domain is empty).
StatusOr<std::vector<Launch>> plan_fused(const Program& p, const Kernel& k, const FusedLayout& layout,
                                         CUfunction fn, const std::vector<int64_t>& slots,
                                         int sm_count);
// Words of a gather or update_slice launch that the program fills: its error record's address, its
// tag, and the record's election word (cuda_error_record.h).
inline constexpr int kGatherErrorWord = 7, kGatherTagWord = 8, kGatherClaimWord = 9;
// The words of an update_slice launch (layout_index.cuh's UpdateArgs); 7 to 9 are the above.
enum UpdateWord : int {
  kUpDst, kUpSrc, kUpStart, kUpOuter, kUpRows, kUpInner, kUpDim,
  kUpSrcRow = 10, kUpRowOffset, kUpWords
};
// The layout kinds -> launches of the layout module (none when the output is empty), one function
// per kind (the kind table, cuda_kinds.cc, names them).
using LayoutPlanner = StatusOr<std::vector<Launch>> (*)(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                                        const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_copy(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                        const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_transpose(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                             const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_slice(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                         const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_concatenate(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                               const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_gather(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                          const std::vector<int64_t>& slots, int sm_count);
StatusOr<std::vector<Launch>> plan_update_slice(const Program& p, const Kernel& k, const LayoutFunctions& fns,
                                                const std::vector<int64_t>& slots, int sm_count);
// A contiguous byte copy (graph staging, kCopy).
StatusOr<Launch> plan_byte_copy(const LayoutFunctions& fns, int32_t dst_buffer, int32_t src_buffer,
                                int64_t bytes, int sm_count, int64_t dst_offset = 0, int64_t src_offset = 0);
// `bytes` zero bytes at the start of `dst_buffer` (tripy_zero_bytes of the layout module).
StatusOr<Launch> plan_byte_zero(const LayoutFunctions& fns, int32_t dst_buffer, int64_t bytes, int sm_count);

Status kernel_failure(const Program& p, const Kernel& k, const std::string& message,
                      StatusCode code = StatusCode::kInternal);

}  // namespace tripy::rt::cuda

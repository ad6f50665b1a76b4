// safetensors checkpoints (Hugging Face's weight files), read and written by the runtime: the first
// step of loading a model from a checkpoint. The layout (integers little-endian):
//
//   u64      N, the header's length in bytes
//   N bytes  JSON header: {"__metadata__": {str: str} (optional),
//                          NAME: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//            then optionally spaces, so that the data starts at a multiple of 8
//   ...      the data region: each tensor's row-major bytes at [begin, end) relative to its start;
//            the tensors cover it exactly, without gaps or overlaps
//
// A file may come from anywhere, so the reader trusts nothing: every length, type, name, offset and
// size is checked before any tensor is made, and a defect is a kDataLoss Status naming the file
// and the tensor, never a crash or a read outside the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};
// `__metadata__`: free-form string pairs (Hugging Face writes {"format": "pt"}), in file order.
using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

struct SafetensorsContents {
  std::vector<NamedTensor> tensors;  // in the header's order
  SafetensorsMetadata metadata;
};

// The header may be at most this long (as Hugging Face's reader allows): a larger length is damage
// or an attempt to make the reader allocate without bound.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
// Shapes longer than this are refused while the header is read (numpy's limit).
inline constexpr size_t kSafetensorsMaxRank = 64;

// The dtypes a file may hold that Tripy has: F32, F16, BF16, F8_E4M3, I8, I32, I64, BOOL.
std::optional<DType> safetensors_dtype(const std::string& name);
// The file's name for `dtype`, or nullptr where the format has none (int4).
const char* safetensors_dtype_name(DType dtype);
// A string of a header (a tensor name, a dtype, a metadata key) as errors show it: in quotes,
// control bytes escaped, a very long one shortened (a file may hold any string there).
std::string quoted_header_string(const std::string& name);

// Reads a whole file's `size` bytes at `data`. Tensors borrow those bytes, with `keep_alive` as
// their owner, which must keep them alive and unchanged; a tensor whose bytes are not aligned to
// its element size (the format does not promise it) is copied into aligned memory instead. `file`
// names the file in errors. Never throws.
StatusOr<SafetensorsContents> parse_safetensors(const uint8_t* data, size_t size, const std::string& file,
                                                std::shared_ptr<void> keep_alive);

// Maps the file at `path` (a regular file; a link is followed, a FIFO or device is refused without
// blocking) and parses it. Tensors borrow the mapping, which is unmapped when the last one goes: no
// tensor byte is read or copied here. The file is opened read-only and mapped copy-on-write, so a
// program that updates a loaded tensor in place (a donated input) changes private pages, never the
// file. Another process that truncates the file while it is mapped makes reads of the lost pages
// fault (SIGBUS), as with any mapped file.
StatusOr<SafetensorsContents> read_safetensors(const std::string& path);

// The bytes of a file holding `tensors` (host tensors; names unique, not "__metadata__"). The
// header lists them in the order given; their data is laid out by element size, largest first, so
// every tensor is aligned to its element size in a mapped file.
StatusOr<std::vector<uint8_t>> serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                                     const SafetensorsMetadata& metadata);

// Writes what serialize_safetensors would return to `path`, a piece at a time (the data is never
// copied into one buffer), through a private temporary file renamed over `path` (common/safe_file.h):
// a reader sees the old file or the whole new one. Only a regular file at `path` is replaced.
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const SafetensorsMetadata& metadata);

}  // namespace tripy::rt

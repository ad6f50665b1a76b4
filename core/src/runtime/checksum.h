// The executable file's checksum (file_format.h): one 64-bit hash per section and one of the JSON
// metadata, so a flipped byte in weights or metadata is caught at load instead of running.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tripy::rt {

// XXH64 with seed 0 (the 64-bit xxHash, written out here so the runtime needs no library):
// four independent lanes consume 32-byte stripes, the tail goes 8, 4, then 1 byte at a time, and
// a final avalanche spreads every input bit over the result. Memory-bound on one core.
// It detects accidental corruption only: it is not cryptographic, and anyone who edits a file
// on purpose can recompute it.
uint64_t checksum64(const void* data, size_t size);

}  // namespace tripy::rt

// Files of the on-disk caches (compiled kernels: cuda_compile.cc; tuned algorithms:
// cuda_tuning_cache.cc): reads that give up on what is not there, or is not a regular file, and
// writes a concurrent reader never sees half of.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tripy::rt::cuda {

// The whole file at `path` into `out`; false (a cache miss) when it cannot be read, holds more than
// `max_bytes`, or is not a regular file: a link is not followed and a FIFO is not waited on.
bool read_file(const std::string& path, std::string& out, size_t max_bytes = SIZE_MAX);

// Writes to a private temporary file beside `path` (created exclusively, under a random name, never
// through a link), then renames it over `path`; failures leave no file.
void write_file_atomic(const std::string& path, const void* data, size_t size);

// Makes `path` and its parents (mode 0755); whether `path` is then a directory this user owns and
// not everyone may write to (else the caller keeps no cache).
bool make_dirs(const std::string& path);

}  // namespace tripy::rt::cuda

// The .npy reader of tripy-run, on its own so that a fuzzer can drive it: every header field is
// checked before anything is allocated, so a hostile file is an error, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::npy {

// Parses the bytes of a .npy file (format versions 1-3; little-endian float32, float16, int32,
// int64, int8 or bool; C order) into a host tensor. `name` is how errors refer to the data.
StatusOr<Tensor> parse_npy(const uint8_t* data, size_t size, const std::string& name);

// Reads and parses the .npy file at `path`.
StatusOr<Tensor> read_npy(const std::string& path);

}  // namespace tripy::npy

// Element types shared by every layer, from the Python frontend down to generated kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tripy {

// The numbering is part of the executable file format: append only.
enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat8E4M3 = 3,
  kInt4 = 4,
  kInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 8,
};
inline constexpr int kNumDTypes = 9;

std::string_view dtype_name(DType t);  // "float32", ... as the Python API spells them
std::optional<DType> dtype_from_name(std::string_view name);
// Storage size in bytes of one element (int4 is stored one per byte).
int dtype_size(DType t);
bool is_floating(DType t);
bool is_integer(DType t);  // int4/int8/int32/int64 (not bool)

}  // namespace tripy

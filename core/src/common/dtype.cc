// Names and sizes of element types.
#include "tripy/dtype.h"

#include <array>

namespace tripy {
namespace {
struct DTypeInfo {
  std::string_view name;
  int size;
  bool floating;
  bool integer;
};
// Indexed by DType.
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"float32", 4, true, false},
    {"float16", 2, true, false},
    {"bfloat16", 2, true, false},
    {"float8", 1, true, false},
    {"int4", 1, false, true},
    {"int8", 1, false, true},
    {"int32", 4, false, true},
    {"int64", 8, false, true},
    {"bool", 1, false, false},
}};
}  // namespace

std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
int dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
bool is_floating(DType t) { return kInfo[static_cast<int>(t)].floating; }
bool is_integer(DType t) { return kInfo[static_cast<int>(t)].integer; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace tripy

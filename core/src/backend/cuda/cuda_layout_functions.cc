// The function names of the fixed layout module (its source: codegen/cuda_prelude.cc), which
// load() looks up and the launches use.
#include "backend/cuda/cuda_codegen.h"

namespace tripy::rt::cuda {

std::string copy_function(int elem_size) { return "tripy_copy_" + std::to_string(elem_size); }

std::string gather_function(int elem_size, DType index) {
  return "tripy_gather_" + std::to_string(elem_size) + (index == DType::kInt64 ? "_i64" : "_i32");
}

std::string update_function(int elem_size, DType index) {
  return "tripy_update_" + std::to_string(elem_size) + (index == DType::kInt64 ? "_i64" : "_i32");
}

const char* float_suffix(DType t) {
  return t == DType::kFloat16 ? "f16" : t == DType::kBFloat16 ? "bf16" : "f32";
}
std::string gelu_function(DType t) { return std::string("tripy_gelu_") + float_suffix(t); }

std::vector<std::string> layout_module_functions() {
  std::vector<std::string> names;
  for (int s : {1, 2, 4, 8, 16}) names.push_back(copy_function(s));
  names.push_back("tripy_copy_bytes");
  names.push_back("tripy_zero_bytes");
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) names.push_back(gelu_function(t));
  return names;
}

std::vector<std::string> index_module_functions() {
  std::vector<std::string> names;
  for (int s : {1, 2, 4, 8})
    for (DType t : {DType::kInt32, DType::kInt64}) names.push_back(gather_function(s, t));
  for (int s : {1, 2, 4, 8})
    for (DType t : {DType::kInt32, DType::kInt64}) names.push_back(update_function(s, t));
  return names;
}

}  // namespace tripy::rt::cuda

// For tests of the field lists (runtime/fields.h): sets every field of a value away from what it
// is (so away from its default): booleans flipped, enums to their next name, numbers up, texts
// longer (with characters that need escaping), lists to two entries, nested structs field by field.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "runtime/ew_ops.h"
#include "runtime/fields.h"
#include "tripy/dtype.h"

namespace tripy::rt::testing {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
void perturb(T& v) {
  if constexpr (has_fields<T>::value) {
    T::visit_fields([](const char*, auto& f) { perturb(f); }, v);
  } else if constexpr (std::is_same_v<T, bool>) {
    v = !v;
  } else if constexpr (std::is_same_v<T, DType>) {
    v = v == DType::kFloat16 ? DType::kInt32 : DType::kFloat16;
  } else if constexpr (std::is_same_v<T, EwOp>) {
    v = v == EwOp::kMul ? EwOp::kAdd : EwOp::kMul;
  } else if constexpr (std::is_enum_v<T>) {
    v = static_cast<T>((static_cast<size_t>(v) + 1) % enum_names(v).count);
  } else if constexpr (std::is_floating_point_v<T>) {
    v = v + 0.375;
  } else if constexpr (std::is_integral_v<T>) {
    v = static_cast<T>(v + 3);
  } else if constexpr (std::is_same_v<T, std::string>) {
    v += "q\"\\\n";
  } else {
    if constexpr (is_vector<T>::value) v.resize(2);  // std::arrays keep their size
    for (auto& e : v) perturb(e);
  }
}

}  // namespace tripy::rt::testing

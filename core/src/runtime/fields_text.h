// The text form of described attributes (fields.h), for program dumps and FlatIR text:
// "name = value" for each field that differs from its default, joined by ", ".
#pragma once

#include <string>
#include <type_traits>

#include "runtime/ew_ops.h"
#include "runtime/fields.h"
#include "tripy/dtype.h"

namespace tripy::rt {

template <class T>
std::string field_text(const T& v) {
  if constexpr (has_fields<T>::value) {
    std::string out;
    static const T defaults{};
    T::visit_fields(
        [&](const char* name, const auto& f, const auto& d) {
          if (!fields_equal(f, d)) out += (out.empty() ? "" : ", ") + std::string(name) + " = " + field_text(f);
        },
        v, defaults);
    return "{" + out + "}";
  } else if constexpr (std::is_same_v<T, DType>) {
    return std::string(dtype_name(v));
  } else if constexpr (std::is_same_v<T, EwOp>) {
    return ew_op_name(v);
  } else if constexpr (std::is_enum_v<T>) {
    const char* name = enum_names(v)[static_cast<size_t>(v)];
    return name ? name : "invalid:" + std::to_string(static_cast<int>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "'" + v + "'";
  } else {
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : ", ") + field_text(e);
    return "[" + out + "]";
  }
}

// The fields of `attrs` that differ from their defaults, without the braces ("" when none).
template <class T>
std::string fields_text(const T& attrs) {
  const std::string text = field_text(attrs);
  return text.substr(1, text.size() - 2);
}

}  // namespace tripy::rt

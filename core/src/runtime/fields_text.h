// The text form of described attributes (fields.h), for program dumps and FlatIR text (whose
// parser reads it back): "name = value" for each field that differs from its default, joined by
// ", ". Numbers print exactly (the shortest text that reads back as the same double), texts in
// double quotes, enums by name, lists in [...] and nested structs in {...}. A struct may list
// fields the text leaves out (kTextOmits: a plugin's device code, long and found by name).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/ew_ops.h"
#include "runtime/fields.h"
#include "tripy/dtype.h"

namespace tripy::rt {

template <class T, class = void>
struct has_text_omits : std::false_type {};
template <class T>
struct has_text_omits<T, std::void_t<decltype(T::kTextOmits)>> : std::true_type {};

// Whether the text form of T leaves field `name` out.
template <class T>
bool text_omits(std::string_view name) {
  if constexpr (has_text_omits<T>::value) {
    for (std::string_view omitted : T::kTextOmits)
      if (omitted == name) return true;
  }
  return false;
}

// The shortest decimal text that reads back as `v` ("0.25", "1e-05", "inf").
inline std::string exact_double_text(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// `s` in double quotes, with '"', '\\' and newlines escaped.
inline std::string quoted_text(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

template <class T>
std::string field_text(const T& v) {
  if constexpr (has_fields<T>::value) {
    std::string out;
    static const T defaults{};
    T::visit_fields(
        [&](const char* name, const auto& f, const auto& d) {
          if (!fields_equal(f, d) && !text_omits<T>(name))
            out += (out.empty() ? "" : ", ") + std::string(name) + " = " + field_text(f);
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
  } else if constexpr (std::is_floating_point_v<T>) {
    return exact_double_text(v);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return quoted_text(v);
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

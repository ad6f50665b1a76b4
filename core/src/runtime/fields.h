// Describing a struct's fields once. An attribute struct lists its fields with TRIPY_FIELDS; the
// file format's reader and writer, the program validator, program dumps, equality and hashing then
// visit them (runtime/fields_json.h, fields_text.h) instead of spelling out each field per kind.
//
//   struct DotAttrs {
//     bool transpose_lhs = false;
//     Activation activation = Activation::kNone;
//     TRIPY_FIELDS(transpose_lhs, activation)
//   };
//
// TRIPY_FIELDS defines `visit_fields(visit, self...)`, which calls visit("name", self.name...) for
// each field in order, for one struct (reading, writing) or several in step (equality).
// An enum field's names come from an `enum_names(E)` found by argument-dependent lookup.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace tripy::rt {

#define TRIPY_FIELD_VISIT_(f) visit(#f, self.f...);
#define TRIPY_FIELDS_1_(a) TRIPY_FIELD_VISIT_(a)
#define TRIPY_FIELDS_2_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_1_(__VA_ARGS__)
#define TRIPY_FIELDS_3_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_2_(__VA_ARGS__)
#define TRIPY_FIELDS_4_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_3_(__VA_ARGS__)
#define TRIPY_FIELDS_5_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_4_(__VA_ARGS__)
#define TRIPY_FIELDS_6_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_5_(__VA_ARGS__)
#define TRIPY_FIELDS_7_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_6_(__VA_ARGS__)
#define TRIPY_FIELDS_8_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_7_(__VA_ARGS__)
#define TRIPY_FIELDS_9_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_8_(__VA_ARGS__)
#define TRIPY_FIELDS_10_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_9_(__VA_ARGS__)
#define TRIPY_FIELDS_11_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_10_(__VA_ARGS__)
#define TRIPY_FIELDS_12_(a, ...) TRIPY_FIELD_VISIT_(a) TRIPY_FIELDS_11_(__VA_ARGS__)
#define TRIPY_FIELDS_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define TRIPY_FIELDS(...)                                                                          \
  static constexpr bool kHasFields = true;                                                         \
  template <class Visit, class... Self>                                                            \
  static void visit_fields(Visit&& visit, Self&... self) {                                         \
    TRIPY_FIELDS_PICK_(__VA_ARGS__, TRIPY_FIELDS_12_, TRIPY_FIELDS_11_, TRIPY_FIELDS_10_,          \
                       TRIPY_FIELDS_9_, TRIPY_FIELDS_8_, TRIPY_FIELDS_7_, TRIPY_FIELDS_6_,          \
                       TRIPY_FIELDS_5_, TRIPY_FIELDS_4_, TRIPY_FIELDS_3_, TRIPY_FIELDS_2_,          \
                       TRIPY_FIELDS_1_)(__VA_ARGS__)                                                \
  }
// A struct without attributes (a kind that needs none).
#define TRIPY_NO_FIELDS()                                                                          \
  static constexpr bool kHasFields = true;                                                         \
  template <class Visit, class... Self>                                                            \
  static void visit_fields(Visit&&, Self&...) {}

// Whether T lists its fields.
template <class T, class = void>
struct has_fields : std::false_type {};
template <class T>
struct has_fields<T, std::void_t<decltype(T::kHasFields)>> : std::true_type {};

// The names of an enum's values, indexed by value (enum_names(E) returns one).
struct EnumNames {
  const char* const* names;
  size_t count;
  const char* operator[](size_t i) const { return i < count ? names[i] : nullptr; }
};
template <size_t N>
constexpr EnumNames enum_names_of(const char* const (&names)[N]) {
  return {names, N};
}

// Field-by-field equality, through nested described structs and containers.
template <class T>
bool fields_equal(const T& a, const T& b);

namespace fields_detail {
template <class T, class = void>
struct is_range : std::false_type {};
template <class T>
struct is_range<T, std::void_t<decltype(std::declval<const T&>().begin()), decltype(std::declval<const T&>().size())>>
    : std::bool_constant<!std::is_same_v<T, std::string>> {};
}  // namespace fields_detail

template <class T>
bool fields_equal(const T& a, const T& b) {
  if constexpr (has_fields<T>::value) {
    bool same = true;
    T::visit_fields([&](const char*, const auto& x, const auto& y) { same = same && fields_equal(x, y); }, a, b);
    return same;
  } else if constexpr (fields_detail::is_range<T>::value) {
    if (a.size() != b.size()) return false;
    auto i = a.begin();
    for (const auto& y : b)
      if (!fields_equal(*i++, y)) return false;
    return true;
  } else {
    return a == b;
  }
}

// Appends an exact key of `v` to `key`: numbers and enums as their bytes, texts and lists with
// their length, described structs field by field. Equal keys mean equal values (CSE, the eager
// cache).
template <class T>
void append_field_key(std::string& key, const T& v) {
  if constexpr (has_fields<T>::value) {
    T::visit_fields([&](const char*, const auto& f) { append_field_key(key, f); }, v);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    key.append(reinterpret_cast<const char*>(&v), sizeof(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    key += v;
    key += '\0';
  } else {
    static_assert(fields_detail::is_range<T>::value, "append_field_key: a field of an unsupported type");
    for (const auto& e : v) append_field_key(key, e);
    key += std::to_string(v.size()) + '\0';
  }
}

}  // namespace tripy::rt

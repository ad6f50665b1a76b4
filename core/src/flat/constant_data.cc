// Reads and writes constant elements of any dtype as doubles (the compiler's view of weights).
#include "flat/constant_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tripy::flat {
namespace {

// A small IEEE-like float format: sign, `e` exponent bits, `m` mantissa bits.
struct MiniFloat {
  int e, m, bias;
  bool has_inf;  // false for float8 e4m3fn: the top code is NaN only, overflow saturates
};
constexpr MiniFloat kHalf{5, 10, 15, true};
constexpr MiniFloat kBFloat{8, 7, 127, true};
constexpr MiniFloat kFloat8{4, 3, 7, false};

double decode(uint32_t bits, MiniFloat f) {
  const uint32_t man_mask = (1u << f.m) - 1, exp_max = (1u << f.e) - 1;
  bool neg = (bits >> (f.e + f.m)) & 1;
  uint32_t ex = (bits >> f.m) & exp_max, man = bits & man_mask;
  double v;
  if (f.has_inf && ex == exp_max) {
    v = man ? NAN : INFINITY;
  } else if (!f.has_inf && ex == exp_max && man == man_mask) {
    v = NAN;
  } else if (ex == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.m);
  } else {
    v = std::ldexp(1.0 + static_cast<double>(man) / (1u << f.m), static_cast<int>(ex) - f.bias);
  }
  return neg ? -v : v;
}

uint32_t encode(double v, MiniFloat f) {
  const uint32_t exp_max = (1u << f.e) - 1, man_mask = (1u << f.m) - 1;
  const uint32_t sign = std::signbit(v) ? 1u << (f.e + f.m) : 0;
  if (std::isnan(v)) return sign | (exp_max << f.m) | man_mask;
  double a = std::fabs(v);
  // The largest finite code: all-ones exponent is reserved when the format has infinities.
  const uint32_t top = f.has_inf ? ((exp_max - 1) << f.m) | man_mask : (exp_max << f.m) | (man_mask - 1);
  if (std::isinf(a)) return f.has_inf ? sign | (exp_max << f.m) : sign | top;
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);
  int ex = e2 - 1;  // a = 1.x * 2^ex
  uint32_t code;
  if (ex < 1 - f.bias) {
    // Subnormal: integer multiples of the smallest step; rounding up may reach the first normal,
    // whose code follows on naturally.
    code = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, f.bias - 1 + f.m)));
  } else {
    double man = std::nearbyint((std::ldexp(a, -ex) - 1.0) * (1u << f.m));
    uint32_t mi = static_cast<uint32_t>(man);
    if (mi > man_mask) {
      mi = 0;
      ++ex;
    }
    int64_t biased = ex + f.bias;
    if (biased >= static_cast<int64_t>(exp_max) + (f.has_inf ? 0 : 1)) {
      return f.has_inf ? sign | (exp_max << f.m) : sign | top;
    }
    code = static_cast<uint32_t>(biased) << f.m | mi;
  }
  if (code > top) return f.has_inf ? sign | (exp_max << f.m) : sign | top;
  return sign | code;
}

template <typename T>
T load(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(t.data()) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void store(const Tensor& t, int64_t i, T v) {
  std::memcpy(static_cast<char*>(t.data()) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}
// `v` as an integer of type T, saturated at T's range (NaN: 0), as a float-to-int cast of a value
// out of range would be undefined (a constant of a text or file may hold any value).
template <typename T>
T saturate(double v) {
  if (std::isnan(v)) return 0;
  // 2^(bits - 1) is exact in a double; so is -2^(bits - 1), T's least value.
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (v >= hi) return std::numeric_limits<T>::max();
  if (v <= -hi) return std::numeric_limits<T>::min();
  return static_cast<T>(v);
}

}  // namespace

double read_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return load<float>(t, i);
    case DType::kFloat16: return decode(load<uint16_t>(t, i), kHalf);
    case DType::kBFloat16: return decode(load<uint16_t>(t, i), kBFloat);
    case DType::kFloat8E4M3: return decode(load<uint8_t>(t, i), kFloat8);
    case DType::kInt4:
    case DType::kInt8: return load<int8_t>(t, i);
    case DType::kInt32: return load<int32_t>(t, i);
    case DType::kInt64: return static_cast<double>(load<int64_t>(t, i));
    case DType::kBool: return load<uint8_t>(t, i) ? 1.0 : 0.0;
  }
  return 0;
}

void write_element(const Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kFloat32: store<float>(t, i, static_cast<float>(v)); break;
    case DType::kFloat16: store<uint16_t>(t, i, static_cast<uint16_t>(encode(v, kHalf))); break;
    case DType::kBFloat16: store<uint16_t>(t, i, static_cast<uint16_t>(encode(v, kBFloat))); break;
    case DType::kFloat8E4M3: store<uint8_t>(t, i, static_cast<uint8_t>(encode(v, kFloat8))); break;
    case DType::kInt4: store<int8_t>(t, i, static_cast<int8_t>(std::fmin(7, std::fmax(-8, v)))); break;
    case DType::kInt8: store<int8_t>(t, i, saturate<int8_t>(v)); break;
    case DType::kInt32: store<int32_t>(t, i, saturate<int32_t>(v)); break;
    case DType::kInt64: store<int64_t>(t, i, saturate<int64_t>(v)); break;
    case DType::kBool: store<uint8_t>(t, i, v != 0 ? 1 : 0); break;
  }
}

Tensor splat_tensor(DType dtype, const std::vector<int64_t>& shape, double v) {
  Tensor t = Tensor::empty_host(dtype, shape);
  for (int64_t i = 0, n = t.numel(); i < n; ++i) write_element(t, i, v);
  return t;
}

bool all_elements_equal(const Tensor& t, double v) {
  if (!t.defined() || !on_host(t)) return false;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    if (read_element(t, i) != v) return false;
  }
  return true;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.data() == b.data() && a.device() == b.device()) return true;
  if (!on_host(a) || !on_host(b)) return false;
  return std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
}

namespace {

// Row i of a rows x cols matrix of T must be nonzero in columns 0..i (every column past the last
// row of a wide matrix) and zero after, or the reverse when inverted. An element is zero when its
// bits under `value_bits` are (a float's: all but the sign). Integer ANDs and ORs over each run,
// which the compiler vectorises: a 1024 x 1024 float32 mask is a fraction of a millisecond.
template <typename T>
bool typed_triangle(const Tensor& t, int64_t rows, int64_t cols, bool inverted, T value_bits) {
  const T* p = static_cast<const T*>(t.data());
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t ones = std::min(cols, i + 1);  // columns j <= i
    const T* row = p + i * cols;
    bool all_nonzero = true;  // of the run that must be nonzero
    T any_bits = 0;           // of the run that must be zero
    const T *nonzero_from = inverted ? row + ones : row, *nonzero_to = inverted ? row + cols : row + ones;
    const T *zero_from = inverted ? row : row + ones, *zero_to = inverted ? row + ones : row + cols;
    for (const T* q = nonzero_from; q < nonzero_to; ++q) all_nonzero &= (*q & value_bits) != 0;
    for (const T* q = zero_from; q < zero_to; ++q) any_bits |= *q & value_bits;
    if (!all_nonzero || any_bits != 0) return false;
  }
  return true;
}

}  // namespace

bool is_lower_triangle(const Tensor& t, bool inverted) {
  const std::vector<int64_t>& shape = t.shape();
  if (shape.size() < 2 || !on_host(t)) return false;
  for (size_t d = 0; d + 2 < shape.size(); ++d)
    if (shape[d] != 1) return false;
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  switch (t.dtype()) {
    // Floats are zero exactly when every bit but the sign is (NaN codes are nonzero).
    case DType::kFloat32: return typed_triangle<uint32_t>(t, rows, cols, inverted, 0x7fffffffu);
    case DType::kFloat16:
    case DType::kBFloat16: return typed_triangle<uint16_t>(t, rows, cols, inverted, 0x7fff);
    case DType::kFloat8E4M3: return typed_triangle<uint8_t>(t, rows, cols, inverted, 0x7f);
    case DType::kInt4:
    case DType::kInt8:
    case DType::kBool: return typed_triangle<uint8_t>(t, rows, cols, inverted, 0xff);
    case DType::kInt32: return typed_triangle<uint32_t>(t, rows, cols, inverted, 0xffffffffu);
    case DType::kInt64: return typed_triangle<uint64_t>(t, rows, cols, inverted, ~uint64_t{0});
  }
  return false;
}

}  // namespace tripy::flat

// Scalar conversions between float32 and the narrow float storage types (float16, bfloat16,
// float8 e4m3fn), done on the host. Kernels compute these types in float32 and convert only on load
// and store; passes (weight folding), plugins and the binding convert constants with the same code,
// so this lives in common, below every layer (the namespace says where it is used most: the CPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tripy::cpu {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// IEEE binary16, round to nearest even; overflow gives inf, NaN stays NaN (quiet).
inline uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {
    // Subnormal (or zero): the half's unit is 2^-24, so scaling is exact and nearbyint rounds
    // to even; a result of 0x400 is the smallest normal, which the bit layout already encodes.
    uint32_t m = static_cast<uint32_t>(std::nearbyint(bits_float(a) * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// bfloat16: the top half of a float32, rounded to nearest even.
inline uint16_t float_to_bfloat16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float bfloat16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// float8 e4m3fn (bias 7, no infinities, S.1111.111 is NaN, max 448). Out-of-range values
// saturate to +-448 as TensorRT's quantisation does, rather than becoming NaN.
inline uint8_t float_to_float8(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448
  if (a < 0x3c800000u) {                                             // below 2^-6: subnormal
    uint32_t m = static_cast<uint32_t>(std::nearbyint(bits_float(a) * 512.0f));
    return static_cast<uint8_t>(sign | m);
  }
  uint32_t h = (((a >> 23) - 120u) << 3) | ((a & 0x7fffffu) >> 20);
  uint32_t rem = a & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (h & 1u))) ++h;
  if (h > 0x7eu) h = 0x7eu;
  return static_cast<uint8_t>(sign | h);
}

inline float float8_to_float(uint8_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t exp = (v >> 3) & 0xfu, mant = v & 7u;
  if (exp == 15 && mant == 7) return bits_float(sign | 0x7fc00000u);
  if (exp == 0) {
    float r = static_cast<float>(mant) * (1.0f / 512.0f);
    return sign ? -r : r;
  }
  return bits_float(sign | ((exp + 120u) << 23) | (mant << 20));
}

// int4 is stored one value per byte; a store keeps the low nibble, sign-extended.
inline int8_t wrap_int4(int64_t v) { return static_cast<int8_t>(((v & 0xf) ^ 8) - 8); }

}  // namespace tripy::cpu

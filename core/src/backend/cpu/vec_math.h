// Branch-free float32 exp, tanh and erf for the fused interpreter's tile loops: libm calls stop
// the compiler from vectorising, and these are the hot ops of softmax, GELU and attention. Also the
// activations, defined once here for both the fused kernels' rows and the GEMM and convolution
// epilogues (activate()).
// (Selects only if-convert without trapping math: see the pragma in fused_ops.cc.)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tripy::cpu {

// Cephes-style exp: x = n ln2 + r, a degree-6 polynomial for exp(r), then 2^n applied as two
// factors so that overflow gives inf and small results underflow gradually. ~1 ulp.
inline float exp_f32(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  xc = xc == xc ? xc : 0.0f;  // NaN (returned as it is below) must not reach the int conversion
  float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  // Shifted as unsigned: the biased exponents of tiny results are negative (UBSan: shifting a
  // negative value is undefined); the bits are the same.
  uint32_t b1 = static_cast<uint32_t>((ni >> 1) + 127) << 23, b2 = static_cast<uint32_t>((ni - (ni >> 1)) + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  float y = p * s1 * s2;
  return x != x ? x : y;
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the exp form elsewhere.
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                  1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
  float big = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  return ax < 0.625f ? small : big;
}

// erf: Taylor series near 0 (relative accuracy), Abramowitz & Stegun 7.1.26 elsewhere
// (absolute error < 1.5e-7).
inline float erf_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float small = x * (1.12837916709551f +
                     z * (-0.37612638903f + z * (0.11283791671f + z * (-0.02686617065f +
                                                                        z * 0.00522397762f))));
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
                                                             t * (-1.453152027f + t * 1.061405429f))));
  float big = 1.0f - poly * exp_f32(-z);
  big = x < 0 ? -big : big;
  return ax < 0.5f ? small : big;
}

// expm1: exp(x) - 1 without its cancellation near 0 (Taylor to x^8 for |x| < 0.5: < 1e-8).
inline float expm1_f32(float x) {
  const float p = x * (1.0f + x * (0.5f + x * (1.0f / 6 + x * (1.0f / 24 + x * (1.0f / 120 + x * (1.0f / 720 +
                  x * (1.0f / 5040 + x * (1.0f / 40320))))))));
  const float big = exp_f32(x) - 1.0f;
  return std::fabs(x) < 0.5f ? p : big;
}

// The activations (rt::Activation; gelu and silu are also EwOps). relu propagates NaN, as
// max(x, 0) does.
inline float relu_f32(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
// GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)).
inline float gelu_f32(float x) { return 0.5f * x * (1.0f + erf_f32(x * 0.70710678118654752f)); }
// SiLU (swish): x * sigmoid(x).
inline float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }

}  // namespace tripy::cpu

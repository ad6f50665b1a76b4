// The epilogue activations of GEMMs and convolutions on the CPU, chosen by rt::Activation: the
// same functions (vec_math.h) that the fused kernels' gelu and silu rows use, so each activation
// is defined once for this backend.
#pragma once

#include <cstdint>

#include "backend/cpu/vec_math.h"
#include "runtime/program.h"

namespace tripy::cpu {

inline float activate(rt::Activation act, float x) {
  switch (act) {
    case rt::Activation::kNone: return x;
    case rt::Activation::kRelu: return relu_f32(x);
    case rt::Activation::kGelu: return gelu_f32(x);
    case rt::Activation::kSilu: return silu_f32(x);
  }
  return x;
}

// In place over n values; one switch per span, so each loop can vectorise.
inline void activate_span(rt::Activation act, float* x, int64_t n) {
  switch (act) {
    case rt::Activation::kNone: return;
    case rt::Activation::kRelu: for (int64_t i = 0; i < n; ++i) x[i] = relu_f32(x[i]); return;
    case rt::Activation::kGelu: for (int64_t i = 0; i < n; ++i) x[i] = gelu_f32(x[i]); return;
    case rt::Activation::kSilu: for (int64_t i = 0; i < n; ++i) x[i] = silu_f32(x[i]); return;
  }
}

}  // namespace tripy::cpu

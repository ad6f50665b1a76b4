// Element access to constant tensors for the compiler (printing, parsing, pattern matching):
// every dtype read and written as a double, narrow floats converted with round-to-nearest-even.
// A constant is usually a host tensor; a large weight that the user's tensor already holds on a
// GPU stays there (device-resident: the executable shares it), and a pass that reads its elements
// asks for a host copy first (copy_to(t, Device{})). The element readers below take host tensors only.
#pragma once

#include <cstdint>
#include <vector>

#include "tripy/tensor.h"

namespace tripy::flat {

// Constants at least this large stay in the device memory the user's tensor holds them in.
inline constexpr int64_t kDeviceConstantMinBytes = 64 << 10;

inline bool on_host(const Tensor& t) { return t.device().kind == Device::Kind::kCpu; }

double read_element(const Tensor& t, int64_t i);
void write_element(const Tensor& t, int64_t i, double v);
// A host tensor of `dtype` and `shape` with every element equal to `v`.
Tensor splat_tensor(DType dtype, const std::vector<int64_t>& shape, double v);
// True when every element of `t` equals `v` (false for a device-resident `t`: not read).
bool all_elements_equal(const Tensor& t, double v);
// Whether two constants are equal: the same memory, or host tensors of equal dtype, shape and
// bytes.
bool same_tensor(const Tensor& a, const Tensor& b);
// Whether host tensor `t` (two or more dims, all but the last two 1) is nonzero exactly on and
// below the diagonal of its last two dims, or, when `inverted`, exactly above it. Elements are
// nonzero as read_element's values compare (NaN is, -0 is not), read in their own dtype: a causal
// mask of GPT-2's 1024 x 1024 is a millisecond's scan, not a double conversion per element.
bool is_lower_triangle(const Tensor& t, bool inverted);

}  // namespace tripy::flat

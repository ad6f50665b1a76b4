// Element access to constant tensors for the compiler (printing, parsing, pattern matching):
// every dtype read and written as a double, narrow floats converted with round-to-nearest-even.
#pragma once

#include <cstdint>
#include <vector>

#include "tripy/tensor.h"

namespace tripy::flat {

double read_element(const Tensor& t, int64_t i);
void write_element(const Tensor& t, int64_t i, double v);
// A host tensor of `dtype` and `shape` with every element equal to `v`.
Tensor splat_tensor(DType dtype, const std::vector<int64_t>& shape, double v);
// True when every element of `t` equals `v`.
bool all_elements_equal(const Tensor& t, double v);
// Bytes of a host tensor's elements, equal when the dtype, shape and contents are.
bool same_tensor(const Tensor& a, const Tensor& b);

}  // namespace tripy::flat

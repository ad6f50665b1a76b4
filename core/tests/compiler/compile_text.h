// For end-to-end tests on the CPU: FlatIR text compiled by compile_graph, and float32 host tensors
// in and out.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace tripy::testing {

inline Tensor host(std::vector<int64_t> shape, const std::vector<float>& data) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  std::copy(data.begin(), data.end(), static_cast<float*>(t.data()));
  return t;
}

inline std::vector<float> values(const Tensor& t) {
  const float* p = static_cast<const float*>(t.data());
  return std::vector<float>(p, p + t.numel());
}

inline StatusOr<Executable> compile_text(const std::string& text) {
  auto g = flat::parse_graph(text);
  if (!g.ok()) return g.status();
  return compile_graph(std::move(g.value()), CompileOptions{});
}

}  // namespace tripy::testing

// Built-in plugins. CustomGeluPluginDynamic is the GELU plugin of TensorRT's samples, which
// nvtripy documents tp.plugin with: GELU in its tanh approximation,
//   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
// with the field type_id choosing the precision (0: float32, 1: float16, as the input's dtype).
#include <cmath>

#include <nlohmann/json.hpp>

#include "common/half.h"
#include "runtime/plugin_builtin.h"

namespace tripy::rt {
namespace {

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

Status gelu_cpu(const std::vector<Tensor>& inputs, const Tensor& output, const std::string& fields) {
  if (inputs.size() != 1 || inputs[0].dtype() != output.dtype() || inputs[0].numel() != output.numel())
    return invalid_argument("CustomGeluPluginDynamic takes one input shaped and typed like its output.");
  const int64_t n = output.numel();
  if (output.dtype() == DType::kFloat32) {
    const float* x = static_cast<const float*>(inputs[0].data());
    float* y = static_cast<float*>(output.data());
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
  } else if (output.dtype() == DType::kFloat16) {
    const uint16_t* x = static_cast<const uint16_t*>(inputs[0].data());
    uint16_t* y = static_cast<uint16_t*>(output.data());
    for (int64_t i = 0; i < n; ++i) y[i] = cpu::float_to_half(gelu_tanh(cpu::half_to_float(x[i])));
  } else {
    return invalid_argument("CustomGeluPluginDynamic supports float32 (type_id 0) and float16 (type_id 1).");
  }
  return ok_status();
}

// One thread per element, in a grid-stride loop; the math is in float for both precisions.
const char* kGeluSource = R"CUDA(
DEVI float tripy_gelu_tanh(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

extern "C" __global__ void custom_gelu(PluginArgs args) {
  const i64 n = args.n;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
#if TRIPY_FIELD_type_id == 1
    const unsigned short* x = (const unsigned short*)args.inputs[0].data;
    ((unsigned short*)args.output.data)[i] = f2h(tripy_gelu_tanh(h2f(x[i])));
#else
    const float* x = (const float*)args.inputs[0].data;
    ((float*)args.output.data)[i] = tripy_gelu_tanh(x[i]);
#endif
  }
}
)CUDA";

}  // namespace

std::vector<std::pair<std::string, PluginDef>> builtin_plugins() {
  std::vector<std::pair<std::string, PluginDef>> out;
  PluginDef gelu;
  gelu.cpu = gelu_cpu;
  gelu.cuda_source = kGeluSource;
  gelu.cuda_entry = "custom_gelu";
  out.emplace_back(plugin_key("CustomGeluPluginDynamic"), std::move(gelu));
  return out;
}

}  // namespace tripy::rt

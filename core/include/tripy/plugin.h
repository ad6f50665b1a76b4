// Plugins: custom ops that programs call by name (tp.plugin in Python). A plugin has a shape and
// dtype rule (in Python, where programs are traced), CUDA C++ device code (compiled with NVRTC
// when a GPU program is built, and saved with the executable) and a CPU implementation, which
// lives in the process: like a TensorRT plugin library, it must be registered before a CPU
// executable that calls it runs. Applications of the C++ runtime register theirs here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy {

// Runs a plugin on the CPU: reads `inputs`, writes every element of `output` (already allocated
// with the shape and dtype the rule gave). `fields` is the call's plugin fields as JSON text
// (e.g. {"type_id": 0}). Return a Status to report bad input; it reaches the user with the line
// of their tp.plugin call.
using CpuPluginFn =
    std::function<Status(const std::vector<Tensor>& inputs, const Tensor& output, const std::string& fields)>;

// The registry key of a plugin, as programs store it: "namespace::name/version".
std::string plugin_key(const std::string& name, const std::string& version = "1",
                       const std::string& plugin_namespace = "");

struct PluginDef {
  CpuPluginFn cpu;          // may be empty: the plugin then runs on GPUs only
  std::string cuda_source;  // may be empty: the plugin then runs on the CPU only
  std::string cuda_entry;   // the __global__ function in cuda_source (see the PluginArgs layout)
  int block = 256;          // CUDA threads per block; the grid covers the output's elements
};

// Registers (or replaces) the plugin `key`. Thread-safe.
void register_plugin(const std::string& key, PluginDef def);
// The plugin registered as `key`, or nullptr.
const PluginDef* find_plugin(const std::string& key);
// Every registered key, sorted (for error messages).
std::vector<std::string> plugin_keys();

}  // namespace tripy

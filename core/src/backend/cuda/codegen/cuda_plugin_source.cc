// A plugin's CUDA module: its source behind the prelude that defines PluginArgs
// (kernels/plugin_prelude.cuh) and its fields as macros (cuda_plugin.h describes the calling
// convention users write to).
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/cuda_plugin.h"

#include <cctype>

#include <nlohmann/json.hpp>

namespace tripy::rt::cuda {
namespace {

bool identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string number(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>()) + "LL";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v.get<double>());
  return buf;
}

}  // namespace

StatusOr<std::string> plugin_module_source(const PluginAttrs& plugin) {
  nlohmann::json fields = nlohmann::json::parse(plugin.fields, nullptr, false);
  if (!fields.is_object()) return invalid_argument("plugin '" + plugin.name + "': its fields are not a JSON object");
  std::string macros;
  for (const auto& [key, value] : fields.items()) {
    if (!identifier(key)) continue;
    const std::string name = "TRIPY_FIELD_" + key;
    if (value.is_number() || value.is_boolean()) {
      macros += "#define " + name + " " + number(value) + "\n";
    } else if (value.is_array()) {
      std::string list;
      bool numeric = true;
      for (const auto& item : value) {
        numeric = numeric && (item.is_number() || item.is_boolean());
        if (numeric) list += (list.empty() ? "" : ", ") + number(item);
      }
      if (!numeric) continue;
      macros += "#define " + name + " {" + list + "}\n#define " + name + "_COUNT " + std::to_string(value.size()) + "\n";
    }
  }
  return device_prelude() + kernels::kPluginPrelude + macros + "\n" + plugin.cuda_source;
}

}  // namespace tripy::rt::cuda

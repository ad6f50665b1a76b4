// The process-wide plugin registry (tripy/plugin.h), and the plugins built into Tripy. Entries are
// never removed, so the pointers find_plugin returns stay valid while a program runs.
#include <map>
#include <memory>
#include <mutex>

#include "runtime/plugin_builtin.h"
#include "tripy/plugin.h"

namespace tripy {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<PluginDef>> defs;
  std::map<std::string, std::vector<std::unique_ptr<PluginDef>>> replaced;  // kept alive
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    for (auto& [key, def] : rt::builtin_plugins()) reg->defs[key] = std::make_unique<PluginDef>(std::move(def));
    return reg;
  }();
  return *r;
}

}  // namespace

std::string plugin_key(const std::string& name, const std::string& version, const std::string& plugin_namespace) {
  return plugin_namespace + "::" + name + "/" + version;
}

void register_plugin(const std::string& key, PluginDef def) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slot = r.defs[key];
  // A program may be running the old definition: keep it alive rather than free it under it.
  if (slot) r.replaced[key].push_back(std::move(slot));
  slot = std::make_unique<PluginDef>(std::move(def));
}

const PluginDef* find_plugin(const std::string& key) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.defs.find(key);
  return it == r.defs.end() ? nullptr : it->second.get();
}

std::vector<std::string> plugin_keys() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> keys;
  for (const auto& [key, def] : r.defs) keys.push_back(key);
  return keys;
}

}  // namespace tripy

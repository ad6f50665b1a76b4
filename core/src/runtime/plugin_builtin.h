// Plugins built into Tripy, registered before any user plugin (see plugin_registry.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tripy/plugin.h"

namespace tripy::rt {

// (key, definition) of every built-in plugin.
std::vector<std::pair<std::string, PluginDef>> builtin_plugins();

}  // namespace tripy::rt

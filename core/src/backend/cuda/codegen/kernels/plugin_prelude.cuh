// What a plugin's source may use besides device_prelude.cuh (plugin_module_source() in
// cuda_plugin_source.cc, which appends the plugin's fields as macros and then its source): the
// PluginArgs a launch passes (cuda_plugin.h describes the calling convention) and plugin_numel.

struct PluginTensor {
  void* data;
  i64 rank;
  i64 shape[8];
};
struct PluginArgs {
  PluginTensor inputs[8];
  PluginTensor output;
  i64 num_inputs;
  i64 n;  // elements of the output
};
DEVI i64 plugin_numel(const PluginTensor& t) {
  i64 n = 1;
  for (i64 d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

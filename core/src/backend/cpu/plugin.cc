// kPlugin on the CPU: hands the kernel's buffers to the plugin's registered CPU implementation.
// Looked up at each run, so a plugin may be registered after the program was loaded.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "tripy/plugin.h"

namespace tripy::cpu {

Status run_plugin(const KernelArgs& args) {
  const rt::PluginAttrs& p = args.kernel->plugin;
  const PluginDef* def = find_plugin(p.name);
  if (def == nullptr || !def->cpu) {
    return kernel_error(args,
                        def == nullptr ? "the plugin '" + p.name + "' is not registered in this process; register it "
                                                                   "(tp.register_plugin, or tripy::register_plugin in C++) before running"
                                       : "the plugin '" + p.name + "' has no CPU implementation; run it on a GPU",
                        StatusCode::kUnavailable);
  }
  std::vector<Tensor> inputs;
  for (const View* v : args.inputs) inputs.push_back(Tensor::borrow(v->data, v->dtype, v->shape, Device{}, nullptr));
  const View& out = *args.outputs[0];
  // The output is zeroed first: an implementation that writes only part of it (or nothing)
  // leaves zeros, never what the arena held before (another kernel's values).
  if (out.numel() > 0) std::memset(out.data, 0, static_cast<size_t>(out.numel() * dtype_size(out.dtype)));
  Tensor output = Tensor::borrow(out.data, out.dtype, out.shape, Device{}, nullptr);
  Status st = def->cpu(inputs, output, p.fields);
  if (!st.ok()) return Status(st.code(), "plugin '" + p.name + "': " + st.message(), args.where);
  return ok_status();
}

const CpuKernel kPluginKernel = {nullptr, [](const KernelArgs& args, KernelState*) { return run_plugin(args); }};

}  // namespace tripy::cpu

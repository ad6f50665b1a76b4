// Binding of the plugin registry (tripy/plugin.h): Python registers a plugin's device code and
// its CPU implementation, a callable that receives numpy views of the buffers (no copies).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "binding.h"
#include "runtime/backend.h"
#include "tripy/plugin.h"

namespace tripy::binding {
namespace {

// numpy's name for a dtype, or nullptr where numpy has none (bfloat16, float8, int4).
const char* numpy_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    default: return nullptr;
  }
}

// A numpy array over the tensor's memory, valid during the call only.
py::array view_of(const Tensor& t, bool writeable) {
  py::array a(py::dtype(numpy_name(t.dtype())), t.shape(), t.data(), py::capsule(t.data(), [](void*) {}));
  if (!writeable) a.attr("flags").attr("writeable") = false;
  return a;
}

CpuPluginFn wrap_cpu(py::function fn) {
  // Shared, so copies of the std::function release the callable once, holding the GIL.
  auto held = std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* f) {
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [held](const std::vector<Tensor>& inputs, const Tensor& output, const std::string& fields) -> Status {
    for (const Tensor& t : inputs)
      if (!numpy_name(t.dtype()))
        return invalid_argument(std::string("a CPU plugin receives numpy arrays, and numpy has no ") +
                                std::string(dtype_name(t.dtype())) + "; cast the input first");
    if (!numpy_name(output.dtype()))
      return invalid_argument(std::string("a CPU plugin writes a numpy array, and numpy has no ") +
                              std::string(dtype_name(output.dtype())));
    py::gil_scoped_acquire gil;
    try {
      py::list views;
      for (const Tensor& t : inputs) views.append(view_of(t, false));
      (*held)(views, view_of(output, true), fields);
    } catch (py::error_already_set& e) {
      return invalid_argument(std::string("its CPU implementation raised ") + e.what());
    }
    return ok_status();
  };
}

}  // namespace

void bind_plugin(py::module_& m) {
  m.def("plugin_key", [](const std::string& name, const std::string& version, const std::string& ns) {
    return plugin_key(name, version, ns);
  });
  m.def("register_plugin", [](const std::string& key, py::object cpu, const std::string& cuda_source,
                              const std::string& cuda_entry, int block) {
    PluginDef def;
    if (!cpu.is_none()) def.cpu = wrap_cpu(cpu.cast<py::function>());
    def.cuda_source = cuda_source;
    def.cuda_entry = cuda_entry;
    def.block = block;
    register_plugin(key, std::move(def));
  });
  // (has a CPU implementation, has CUDA code) of a registered plugin, or None.
  m.def("plugin_info", [](const std::string& key) -> py::object {
    const PluginDef* def = find_plugin(key);
    if (!def) return py::none();
    return py::make_tuple(static_cast<bool>(def->cpu), !def->cuda_source.empty());
  });
  m.def("plugin_keys", &plugin_keys);
#if TRIPY_WITH_CUDA
  // For tests: the PTX NVRTC makes of a registered plugin's CUDA code with these fields (no GPU
  // needed: the GPU builder's compile_plugin), or None where NVRTC cannot be loaded.
  m.def("_plugin_ptx", [](const std::string& key, const std::string& fields, int arch) -> py::object {
    rt::Builder* builder = rt::builder_for(Device::Kind::kGpu);
    if (!builder) return py::none();
    const PluginDef* def = find_plugin(key);
    if (!def || def->cuda_source.empty()) throw py::value_error("no CUDA code is registered as '" + key + "'");
    rt::PluginAttrs p;
    p.name = key;
    p.fields = fields;
    p.cuda_source = def->cuda_source;
    p.cuda_entry = def->cuda_entry;
    std::optional<std::string> ptx = unwrap(builder->compile_plugin(p, arch));
    if (!ptx) return py::none();
    return py::str(*ptx);
  });
#endif
}

}  // namespace tripy::binding

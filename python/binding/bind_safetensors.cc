// Binding of the runtime's safetensors reader and writer (runtime/safetensors.h) for
// tp.load_safetensors / tp.save_safetensors. Loaded tensors become evaluated data nodes over the
// mapped file (no host copy); for a GPU each is copied to the device once, and the mapping goes
// as soon as the last host tensor over it does. The file work runs without the GIL.
#include <pybind11/stl.h>

#include "binding.h"
#include "compiler/eager.h"
#include "runtime/backend.h"
#include "runtime/gpu_scope.h"
#include "runtime/safetensors.h"

namespace tripy::binding {
namespace {

using trace::NodeRef;

// `tensors` moved to `to` (unchanged for the CPU), or the first error.
Status place_all(std::vector<rt::NamedTensor>& tensors, const Device& to) {
  if (to.kind == Device::Kind::kCpu) return ok_status();
  rt::Backend* b = rt::backend_for(to.kind);
  if (b == nullptr) return Status(StatusCode::kUnavailable, "No GPU is available for device " + to.str() + ".");
  rt::GpuScope on(to.index);
  for (rt::NamedTensor& t : tensors) {
    TRIPY_ASSIGN_OR_RETURN(t.tensor, b->copy_from_host(t.tensor));
  }
  return ok_status();
}

// Each node's value on the host: evaluated (ops may be pending), then copied off its device.
StatusOr<std::vector<rt::NamedTensor>> on_host(const std::vector<std::pair<std::string, NodeRef>>& items) {
  std::vector<rt::NamedTensor> out;
  for (const auto& [name, node] : items) {
    TRIPY_RETURN_IF_ERROR(compiler::evaluate(node, eager_options(node->device)));
    Tensor value = node->value;
    if (value.device().kind != Device::Kind::kCpu) {
      rt::Backend* b = rt::backend_for(value.device().kind);
      if (b == nullptr) return Status(StatusCode::kUnavailable, "No backend for " + value.device().str() + ".");
      TRIPY_ASSIGN_OR_RETURN(value, b->copy_to_host(value));
    }
    out.push_back({name, std::move(value)});
  }
  return out;
}

}  // namespace

void bind_safetensors(py::module_& m) {
  // (path as bytes, device, frames) -> ([(name, node)] in file order, [(key, value)] of __metadata__)
  m.def("load_safetensors", [](const py::bytes& path, const std::string& device, py::object frames) {
    const SourceRef src = to_source(frames);
    const Device to = parse_device(device);
    const std::string file = path;
    rt::SafetensorsContents contents;
    Status st;
    {
      py::gil_scoped_release nogil;  // page faults, and for a GPU the copies, take a while
      StatusOr<rt::SafetensorsContents> read = rt::read_safetensors(file);
      st = read.status();
      if (st.ok()) {
        contents = std::move(read).value();
        st = place_all(contents.tensors, to);
      }
    }
    if (!st.ok()) raise(st.at(src));
    py::list tensors, metadata;
    for (rt::NamedTensor& t : contents.tensors)
      tensors.append(py::make_tuple(py::str(t.name), trace::make_data_node(std::move(t.tensor), src)));
    for (const auto& [key, value] : contents.metadata) metadata.append(py::make_tuple(py::str(key), py::str(value)));
    return py::make_tuple(tensors, metadata);
  });

  m.def("save_safetensors", [](const py::bytes& path, const std::vector<std::pair<std::string, NodeRef>>& items,
                               const rt::SafetensorsMetadata& metadata, py::object frames) {
    const std::string file = path;
    Status st;
    {
      py::gil_scoped_release nogil;  // evaluation waits for the eager lock (see bind_data.cc)
      StatusOr<std::vector<rt::NamedTensor>> host = on_host(items);
      st = host.ok() ? rt::write_safetensors(file, host.value(), metadata) : host.status();
    }
    if (!st.ok()) raise(st.at(to_source(frames)));
  });
}

}  // namespace tripy::binding

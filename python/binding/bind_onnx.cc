// Binding of the ONNX reader (onnx/onnx_model.h) for tp.onnx.load: the model as plain Python
// values (dicts, lists, str), its tensors as evaluated data nodes over the mapped file (no host
// copy; for a GPU each is copied to the device once). The file work runs without the GIL.
#include <pybind11/stl.h>

#include "binding.h"
#include "onnx/onnx_model.h"
#include "runtime/backend.h"
#include "runtime/gpu_scope.h"

namespace tripy::binding {
namespace {

namespace ox = tripy::onnx;

// A name from the file as Python text: bytes that are not UTF-8 become U+FFFD, never an exception.
py::str text(const std::string& s) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}
py::list texts(const std::vector<std::string>& list) {
  py::list out;
  for (const std::string& s : list) out.append(text(s));
  return out;
}

struct Converter {
  SourceRef src;

  py::object tensor(const ox::TensorValue& t) const {
    py::object node = py::none();
    if (t.tensor.defined()) node = py::cast(trace::make_data_node(t.tensor, src));
    return py::make_tuple(text(t.name), t.elem_type, py::cast(t.dims), node);
  }

  py::object value_info(const ox::ValueInfo& v) const {
    py::object dims = py::none();
    if (v.has_shape) {
      py::list list;
      for (const ox::DimInfo& d : v.dims) {
        if (d.has_value) list.append(d.value);
        else if (!d.param.empty()) list.append(text(d.param));
        else list.append(py::none());
      }
      dims = list;
    }
    return py::make_tuple(text(v.name), v.elem_type, dims);
  }

  py::object attribute(const ox::Attribute& a) const {
    py::object value;
    switch (a.type) {
      case ox::kAttrFloat: value = py::float_(a.f); break;
      case ox::kAttrInt: value = py::int_(a.i); break;
      case ox::kAttrString: value = py::bytes(a.s); break;
      case ox::kAttrTensor: value = tensor(a.t); break;
      case ox::kAttrGraph: value = graph(*a.g); break;
      case ox::kAttrFloats: value = py::cast(a.floats); break;
      case ox::kAttrInts: value = py::cast(a.ints); break;
      case ox::kAttrStrings: {
        py::list l;
        for (const std::string& s : a.strings) l.append(py::bytes(s));
        value = l;
        break;
      }
      case ox::kAttrTensors: {
        py::list l;
        for (const ox::TensorValue& t : a.tensors) l.append(tensor(t));
        value = l;
        break;
      }
      case ox::kAttrGraphs: {
        py::list l;
        for (const auto& g : a.graphs) l.append(graph(*g));
        value = l;
        break;
      }
      default: value = py::none(); break;  // sparse tensors, type protos: the frontend refuses them
    }
    return py::make_tuple(a.type, value);
  }

  py::dict graph(const ox::Graph& g) const {
    py::list nodes, initializers, inputs, outputs;
    for (const ox::Node& n : g.nodes) {
      py::dict attrs;
      for (const ox::Attribute& a : n.attributes) attrs[text(a.name)] = attribute(a);
      nodes.append(py::make_tuple(text(n.name), text(n.op_type), text(n.domain), texts(n.inputs), texts(n.outputs), attrs));
    }
    for (const ox::TensorValue& t : g.initializers) initializers.append(tensor(t));
    for (const ox::ValueInfo& v : g.inputs) inputs.append(value_info(v));
    for (const ox::ValueInfo& v : g.outputs) outputs.append(value_info(v));
    py::dict d;
    d["name"] = text(g.name);
    d["nodes"] = nodes;
    d["initializers"] = initializers;
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    py::dict containers;  // inputs and outputs that are not tensors: name -> "sequence", "optional", ...
    for (const auto* list : {&g.inputs, &g.outputs})
      for (const ox::ValueInfo& v : *list)
        if (!v.container.empty()) containers[text(v.name)] = text(v.container);
    d["containers"] = containers;
    return d;
  }
};

// Copies every tensor of `g` (initializers and tensor attributes, subgraphs too) to `to`.
Status place(ox::Graph& g, rt::Backend* b) {
  auto one = [&](ox::TensorValue& t) -> Status {
    if (!t.tensor.defined()) return ok_status();
    TRIPY_ASSIGN_OR_RETURN(t.tensor, b->copy_from_host(t.tensor));
    return ok_status();
  };
  for (ox::TensorValue& t : g.initializers) TRIPY_RETURN_IF_ERROR(one(t));
  for (ox::Node& n : g.nodes) {
    for (ox::Attribute& a : n.attributes) {
      TRIPY_RETURN_IF_ERROR(one(a.t));
      for (ox::TensorValue& t : a.tensors) TRIPY_RETURN_IF_ERROR(one(t));
      if (a.g) TRIPY_RETURN_IF_ERROR(place(*a.g, b));
      for (auto& sub : a.graphs) TRIPY_RETURN_IF_ERROR(place(*sub, b));
    }
  }
  return ok_status();
}

}  // namespace

void bind_onnx(py::module_& m) {
  // (path as bytes, device, frames) -> {"ir_version", "producer", "opsets": [(domain, version)], "graph": {...}}
  m.def("load_onnx", [](const py::bytes& path, const std::string& device, py::object frames) {
    const SourceRef src = to_source(frames);
    const Device to = parse_device(device);
    const std::string file = path;
    ox::Model model;
    Status st;
    {
      py::gil_scoped_release nogil;
      StatusOr<ox::Model> read = ox::read_onnx(file);
      st = read.status();
      if (st.ok()) {
        model = std::move(read).value();
        if (to.kind != Device::Kind::kCpu) {
          rt::Backend* b = rt::backend_for(to.kind);
          rt::GpuScope on(to.index);
          st = b == nullptr ? Status(StatusCode::kUnavailable, "No GPU is available for device " + to.str() + ".")
                            : place(model.graph, b);
        }
      }
    }
    if (!st.ok()) raise(st.at(src));
    Converter c{src};
    py::list opsets;
    for (const ox::OpsetImport& o : model.opsets) opsets.append(py::make_tuple(text(o.domain), o.version));
    py::dict d;
    d["ir_version"] = model.ir_version;
    d["producer"] = text(model.producer_name + (model.producer_version.empty() ? "" : " " + model.producer_version));
    d["opsets"] = opsets;
    d["graph"] = c.graph(model.graph);
    return d;
  });
  m.def("onnx_elem_type_name", [](int32_t elem_type) { return ox::elem_type_name(elem_type); });
}

}  // namespace tripy::binding

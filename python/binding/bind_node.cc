// Binding of Trace nodes: building ops (rules run in C++), compile inputs, evaluation, compile.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <unordered_set>

#include "binding.h"
#include "compiler/build_program.h"
#include "flat/passes/passes.h"
#include "compiler/eager.h"
#include "runtime/backend.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::binding {
namespace {

using trace::NodeRef;

// Shape entries are ints or DimensionSize nodes (whose symbolic value is known); `symbols` gets
// the table their symbols live in.
Shape to_shape(const py::handle& seq, std::shared_ptr<SymbolTable>* symbols = nullptr) {
  Shape s;
  for (const auto& d : seq) {
    if (py::isinstance<trace::Node>(d)) {
      const auto& n = d.cast<const trace::Node&>();
      if (!n.dim_value)
        raise(invalid_argument("A shape entry must be an int or a tp.DimensionSize; " + n.describe() +
                                   " is a tensor whose value is not a known size.",
                               n.source));
      if (symbols && n.symbols) *symbols = n.symbols;
      s.push_back(*n.dim_value);
    } else {
      s.push_back(Dim(d.cast<int64_t>()));
    }
  }
  return s;
}

// The convolution's typed attributes: {stride, padding: [(before, after)], dilation, groups,
// transposed, output_padding}. Types are checked here (a cast error becomes a TripyException at
// the caller); values by the op's rule, which names the user's line.
rt::ConvolutionAttrs to_conv_attrs(const py::dict& d) {
  rt::ConvolutionAttrs a;
  for (const auto& [k, v] : d) {
    std::string key = k.cast<std::string>();
    if (key == "stride") a.stride = v.cast<std::vector<int64_t>>();
    else if (key == "dilation") a.dilation = v.cast<std::vector<int64_t>>();
    else if (key == "output_padding") a.output_padding = v.cast<std::vector<int64_t>>();
    else if (key == "groups") a.groups = v.cast<int64_t>();
    else if (key == "transposed") a.transposed = v.cast<bool>();
    else if (key == "padding") {
      for (const auto& pair : v.cast<std::vector<std::pair<int64_t, int64_t>>>()) {
        a.pad_before.push_back(pair.first);
        a.pad_after.push_back(pair.second);
      }
    } else {
      throw py::value_error("unknown convolution attribute '" + key + "'");
    }
  }
  if (a.output_padding.empty()) a.output_padding.assign(a.stride.size(), 0);
  return a;
}

// Pooling's typed attributes: {kind: "max" | "avg", window, stride, padding: [(before, after)],
// count_include_pad}; values are checked by the op's rule.
rt::PoolingAttrs to_pool_attrs(const py::dict& d) {
  rt::PoolingAttrs a;
  for (const auto& [k, v] : d) {
    std::string key = k.cast<std::string>();
    if (key == "kind") {
      std::string kind = v.cast<std::string>();
      if (kind != "max" && kind != "avg") throw py::value_error("unknown pooling kind '" + kind + "'");
      a.kind = kind == "max" ? rt::PoolingAttrs::Kind::kMax : rt::PoolingAttrs::Kind::kAvg;
    } else if (key == "window") a.window = v.cast<std::vector<int64_t>>();
    else if (key == "stride") a.stride = v.cast<std::vector<int64_t>>();
    else if (key == "count_include_pad") a.count_include_pad = v.cast<bool>();
    else if (key == "padding") {
      for (const auto& pair : v.cast<std::vector<std::pair<int64_t, int64_t>>>()) {
        a.pad_before.push_back(pair.first);
        a.pad_after.push_back(pair.second);
      }
    } else {
      throw py::value_error("unknown pooling attribute '" + key + "'");
    }
  }
  return a;
}

// One attribute from Python, by the field's type.
void read_attr(py::handle v, std::vector<int64_t>& out) { out = v.cast<std::vector<int64_t>>(); }
void read_attr(py::handle v, std::vector<double>& out) { out = v.cast<std::vector<double>>(); }
void read_attr(py::handle v, Shape& out, std::shared_ptr<SymbolTable>* symbols) { out = to_shape(v, symbols); }
void read_attr(py::handle v, double& out) { out = v.cast<double>(); }
void read_attr(py::handle v, int64_t& out) { out = v.cast<int64_t>(); }
void read_attr(py::handle v, bool& out) { out = v.cast<bool>(); }
void read_attr(py::handle v, std::string& out) { out = v.cast<std::string>(); }
void read_attr(py::handle v, DType& out) { out = parse_dtype(v.cast<std::string>()); }
void read_attr(py::handle v, rt::ConvolutionAttrs& out) { out = to_conv_attrs(v.cast<py::dict>()); }
void read_attr(py::handle v, rt::PoolingAttrs& out) { out = to_pool_attrs(v.cast<py::dict>()); }
// An enum field of a described struct (rt::CollectiveAttrs::Op): by its name.
template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
void read_attr(py::handle v, E& out) {
  const std::string name = v.cast<std::string>();
  const rt::EnumNames names = enum_names(out);
  for (size_t i = 0; i < names.count; ++i)
    if (name == names[i]) {
      out = static_cast<E>(i);
      return;
    }
  throw py::value_error("unknown value '" + name + "'");
}
void read_attr(py::handle v, rt::PluginAttrs& out) {
  auto p = v.cast<py::dict>();
  out.name = p["name"].cast<std::string>();
  out.fields = p["fields"].cast<std::string>();
}
// Any other described struct (rt::SampleAttrs): a dict of its field names, each read by its type.
template <class T, std::enable_if_t<rt::has_fields<T>::value, int> = 0>
void read_attr(py::handle v, T& out) {
  for (const std::pair<py::handle, py::handle> item : v.cast<py::dict>()) {
    const std::string key = py::str(item.first);
    const py::handle value = item.second;
    bool found = false;
    T::visit_fields([&](const char* name, auto& field) {
      if (key != name) return;
      read_attr(value, field);
      found = true;
    }, out);
    if (!found) throw py::value_error("unknown attribute '" + key + "'");
  }
}

// `given` collects the names' bits, which trace::check_attrs holds against the op's declaration;
// `symbols`, the table of symbolic sizes among them.
trace::Attrs to_attrs(const py::dict& d, trace::AttrSet& given, std::shared_ptr<SymbolTable>& symbols) {
  trace::Attrs a;
  for (const auto& [k, v] : d) {
    const std::string key = k.cast<std::string>();
    const trace::AttrSet bit = trace::attr_named(key);
    if (bit == 0) throw py::value_error("unknown attribute '" + key + "'");
    given |= bit;
    trace::Attrs::visit_fields([&](const char* name, auto& field) {
      if (key != name) return;
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, Shape>) read_attr(v, field, &symbols);
      else read_attr(v, field);
    }, a);
  }
  return a;
}

// Shape as Python sees it: ints for static dims, the expression string for dynamic ones.
py::list shape_list(const trace::Node& n) {
  py::list out;
  for (const auto& d : n.shape) {
    if (d.is_static()) out.append(d.static_value());
    else out.append(d.str(n.symbols.get()));
  }
  return out;
}

CompileOptions compile_options(const std::string& device, int level, py::object dump) {
  CompileOptions o;
  o.device = parse_device(device);
  o.optimization_level = level;
  if (!dump.is_none()) {
    o.dump = [dump](const std::string& stage, const std::string& text) {
      py::gil_scoped_acquire gil;
      dump(stage, text);
    };
  }
  return o;
}

}  // namespace

NodeRef make_op(const std::string& op, std::vector<NodeRef> inputs, const py::dict& attrs, const SourceRef& src) {
  const trace::OpDef* def = trace::find_op(op);
  if (def == nullptr) raise(internal_error("unknown Trace op '" + op + "'", src));
  return make_op(*def, std::move(inputs), attrs, src);
}

NodeRef make_op(const trace::OpDef& def, std::vector<NodeRef> inputs, const py::dict& attrs, const SourceRef& src) {
  const std::string& op = def.name;
  bool creation = inputs.empty();
  trace::Attrs converted;
  trace::AttrSet given = 0;
  std::shared_ptr<SymbolTable> symbols;
  try {
    converted = to_attrs(attrs, given, symbols);
  } catch (const py::cast_error&) {
    // Python ints can be arbitrarily large; sizes, dims and steps are int64 in the core.
    raise(invalid_argument("Invalid argument for " + op + ": sizes, dimensions and steps must be integers "
                           "that fit in 64 bits.", src));
  }
  check(trace::check_attrs(def, given, src));
  NodeRef n = unwrap(trace::make_node(def, std::move(inputs), std::move(converted), src, std::move(symbols)));
  if (creation) n->device = parse_device(attrs.contains("device") ? attrs["device"].cast<std::string>() : "cpu");
  return n;
}

void bind_node(py::module_& m) {
  py::class_<trace::Node, NodeRef>(m, "Node")
      .def_property_readonly("dtype", [](const trace::Node& n) { return std::string(dtype_name(n.dtype)); })
      .def_property_readonly("shape", &shape_list)
      .def_property_readonly("rank", [](const trace::Node& n) { return n.shape.size(); })
      .def_property_readonly("device", [](const trace::Node& n) { return n.device.str(); })
      .def_property_readonly("name", &trace::Node::name)
      .def_property_readonly("id", [](const trace::Node& n) { return n.id; })
      .def_property_readonly("is_evaluated", &trace::Node::evaluated)
      .def_property_readonly("is_input", [](const trace::Node& n) { return n.input_index >= 0; })
      .def_property_readonly("is_size", [](const trace::Node& n) { return n.dim_value.has_value(); })
      .def("describe", &trace::Node::describe);

  m.def("make", [](const std::string& op, std::vector<NodeRef> inputs, py::dict attrs, py::object frames) {
    return make_op(op, std::move(inputs), attrs, to_source(frames));
  });

  m.def("symbol_table", [] { return std::make_shared<SymbolTable>(); });
  py::class_<SymbolTable, std::shared_ptr<SymbolTable>>(m, "SymbolTable")
      .def("add", &SymbolTable::add);

  // A tp.compile runtime input; dims: list of int (static) or symbol id (dynamic) pairs.
  m.def("input_node", [](int index, const std::string& name, const std::string& dtype, std::vector<py::tuple> dims,
                         const std::string& device, std::shared_ptr<SymbolTable> symbols, py::object frames) {
    Shape shape;
    for (const auto& d : dims) {
      bool dynamic = d[0].cast<bool>();
      int64_t v = d[1].cast<int64_t>();
      shape.push_back(dynamic ? Dim::symbol(static_cast<int>(v)) : Dim(v));
    }
    return trace::make_input_node(index, name, parse_dtype(dtype), std::move(shape), parse_device(device), symbols,
                                  to_source(frames));
  });

  // A tp.compile shape value (DimensionInputInfo): a tp.DimensionSize standing for `symbol`.
  m.def("shape_input_node", [](int index, const std::string& name, int symbol, const std::string& device,
                               std::shared_ptr<SymbolTable> symbols, py::object frames) {
    return trace::make_shape_input_node(index, name, symbol, parse_device(device), symbols, to_source(frames));
  });

  // Tensor.eval(): on the GPU also a host synchronisation point, so that an error the kernels
  // recorded (a gather index out of range) is raised here (docs/robustness.md). `parameter`:
  // tp.compile's frozen parameters (compiler::evaluate_parameter).
  m.def("evaluate", [](const NodeRef& n, bool parameter) {
    py::gil_scoped_release nogil;
    Status st = parameter ? compiler::evaluate_parameter(n, eager_options(n->device))
                          : compiler::evaluate(n, eager_options(n->device));
    if (st.ok()) st = synchronize_device(n->device);
    py::gil_scoped_acquire gil;
    check(st);
  }, py::arg("node"), py::arg("parameter") = false);
  // The ids of the nodes of `outputs`' graph that are still to be computed and read no runtime
  // input of tp.compile: what tp.compile may evaluate once and freeze (a module's parameters).
  m.def("pending_constant_ids", [](const std::vector<NodeRef>& outputs) {
    const auto graph = graph_lock();
    std::unordered_set<const trace::Node*> variable;
    std::vector<uint64_t> ids;
    for (trace::Node* n : trace::topo_order(outputs)) {
      bool reads_input = n->input_index >= 0;
      for (const auto& in : n->inputs) reads_input = reads_input || variable.count(in.get()) > 0;
      // A view of evaluated data (OpDef::view_of_data) compiles as an op over that data.
      bool view = n->def != nullptr && n->def->view_of_data;
      for (const auto& in : n->inputs) view = view && in->evaluated();
      if (reads_input) variable.insert(n);
      else if (!n->evaluated() && !view) ids.push_back(n->id);
    }
    return ids;
  });
  // Whether `n` is computed from a runtime input of tp.compile (so has no value while tracing).
  m.def("reads_runtime_input", [](const NodeRef& n) {
    const auto graph = graph_lock();
    for (trace::Node* m : trace::topo_order({n}))
      if (m->input_index >= 0) return true;
    return false;
  });
  m.def("raise_error", [](const std::string& message, py::object frames) {
    raise(invalid_argument(message, to_source(frames)));
  });
  m.def("eager_cache_size", &compiler::eager_cache_size);
  m.def("_clear_eager_cache", &compiler::clear_eager_cache);
  m.def("trace_str", [](const NodeRef& n) { return trace::trace_str({n}); });

  m.def("compile", [](std::vector<NodeRef> outputs, std::vector<NodeRef> inputs, std::vector<std::string> names,
                      const std::string& device, int level, py::object dump, std::vector<int32_t> donated) {
    CompileOptions o = compile_options(device, level, dump);
    o.donated_inputs = std::move(donated);
    // Without the GIL: another thread's Python (tracing, or a second tp.compile, whose NVRTC then
    // overlaps this one's) runs meanwhile. `dump` takes the GIL for its own calls.
    StatusOr<Executable> compiled = [&] {
      py::gil_scoped_release nogil;
      return compiler::compile_trace(outputs, inputs, names, o);
    }();
    return unwrap(std::move(compiled));
  }, py::arg("outputs"), py::arg("inputs"), py::arg("names"), py::arg("device"), py::arg("level"), py::arg("dump"),
        py::arg("donated") = std::vector<int32_t>{});

#if TRIPY_WITH_CUDA
  // Test hook: how often the host has waited for the GPU (a steady-state call must not).
  m.def("_cuda_host_waits", [] {
    rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu);
    return gpu ? gpu->host_waits() : int64_t{0};
  });
  // Test and benchmark hook: GPU memory that live tensors and loaded programs hold (not the
  // allocator's cache, which a device-wide count such as torch.cuda.mem_get_info includes).
  m.def("_cuda_bytes_in_use", [] {
    rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu);
    return gpu ? gpu->bytes_in_use() : int64_t{0};
  });
  // Test hook: the CUDA source of every fused and attention kernel of `n`'s eager program (the GPU
  // builder's kernel_sources). Needs no GPU, so the code generators are exercised on real programs
  // wherever the CUDA headers exist.
  m.def("_cuda_kernel_sources", [](const NodeRef& n) {
    auto lowered = unwrap(trace::lower_to_flat({n}, trace::LowerMode::kEager));
    auto program = unwrap(compiler::build_program(flat::dce(lowered.graph)));
    rt::Builder* builder = rt::builder_for(Device::Kind::kGpu);
    return builder ? unwrap(builder->kernel_sources(program)) : std::vector<std::string>{};
  });
#endif
  m.def("op_table", [] {
    py::list out;
    for (const trace::OpDef* d : trace::all_ops()) {
      py::list dts;
      for (auto set : d->input_dtypes) dts.append(trace::dtype_set_str(set));
      out.append(py::make_tuple(d->name, d->display, d->min_inputs, d->max_inputs, dts, trace::attr_set_str(d->attrs),
                                trace::attr_set_str(d->required)));
    }
    return out;
  });
}

}  // namespace tripy::binding

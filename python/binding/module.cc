// tripy._C: the Python binding of the C++ core. Python holds Node handles; every rule, check
// and computation happens in C++; errors cross as tp.TripyException.
#include <pybind11/stl.h>

#include <atomic>
#include <mutex>
#include <set>

#include "runtime/backend.h"
#include "runtime/gpu_scope.h"
#include "binding.h"

namespace tripy::binding {

void raise(const Status& status) {
  std::string text = format_error(status);
  py::object exc = py::module_::import("tripy.exception").attr("TripyException");
  // Messages may quote bytes that are not UTF-8 (a file name is any bytes): shown as \xNN.
  py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace"));
  if (!message) throw py::error_already_set();
  PyErr_SetObject(exc.ptr(), message.ptr());
  throw py::error_already_set();
}

SourceRef to_source(const py::handle& frames) {
  if (frames.is_none()) return nullptr;
  auto info = std::make_shared<SourceInfo>();
  for (const auto& f : frames) {
    auto t = f.cast<py::tuple>();
    info->push_back({t[0].cast<std::string>(), t[1].cast<int>(), t[2].cast<std::string>(), t[3].cast<int>(),
                     t[4].cast<int>()});
  }
  return info;
}

Device parse_device(const std::string& s) {
  StatusOr<Device> device = tripy::parse_device(s);
  if (!device.ok()) throw py::value_error(device.status().message());
  return device.value();
}

DType parse_dtype(const std::string& s) {
  auto dt = dtype_from_name(s);
  if (!dt) throw py::value_error("unknown dtype '" + s + "'");
  return *dt;
}

namespace {
// TRIPY_DEBUG for eager evaluation: the logger's callable (stage, text) and the stages its flags
// show, set while one of its debug flags is on (set_eager_dump). The callable is never released:
// an evaluation on another thread may still hold it.
std::atomic<PyObject*> g_eager_dump{nullptr};
std::shared_ptr<const std::set<std::string>> g_eager_stages;
std::mutex g_eager_stages_mu;
}  // namespace

Status synchronize_device(const Device& device) {
  if (device.kind != Device::Kind::kGpu) return ok_status();
  rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu);
  if (gpu == nullptr) return ok_status();
  rt::GpuScope on(device.index);
  return gpu->synchronize(gpu->default_stream());
}

CompileOptions eager_options(const Device& device) {
  CompileOptions o;
  o.device = device;
  o.optimization_level = 0;
  if (PyObject* dump = g_eager_dump.load()) {
    std::shared_ptr<const std::set<std::string>> stages;
    {
      std::lock_guard<std::mutex> lock(g_eager_stages_mu);
      stages = g_eager_stages;
    }
    o.dump = [dump](const std::string& stage, const std::string& text) {
      py::gil_scoped_acquire gil;
      py::handle callable(dump);
      try {
        callable(stage, text);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("tripy's eager debug dump");  // a dump never fails an evaluation
      }
    };
    o.dump_wanted = [stages](const std::string& stage) { return stages && stages->count(stage) > 0; };
  }
  return o;
}

Tensor to_host(const Tensor& t) {
  if (t.device().kind == Device::Kind::kCpu) return t;
  rt::Backend* b = rt::backend_for(t.device().kind);
  if (!b) raise(Status(StatusCode::kUnavailable, "No backend for " + t.device().str()));
  return unwrap(b->copy_to_host(t));
}

}  // namespace tripy::binding

PYBIND11_MODULE(_C, m) {
  m.doc() = "Tripy's C++ core";
  tripy::binding::bind_node(m);
  tripy::binding::bind_data(m);
  tripy::binding::bind_executable(m);
  tripy::binding::bind_stream(m);
  tripy::binding::bind_plugin(m);
  tripy::binding::bind_safetensors(m);
  tripy::binding::bind_onnx(m);
  tripy::binding::bind_eager(m);
  // tp.device's parser: (kind, index), or a ValueError saying what is expected.
  m.def("parse_device", [](const std::string& text) {
    const tripy::Device d = tripy::binding::parse_device(text);
    return py::make_tuple(d.kind == tripy::Device::Kind::kGpu ? "gpu" : "cpu", d.index);
  });
  // The logger's hook for TRIPY_DEBUG in eager evaluation: `dump(stage, text)` for each of
  // `stages`, or None to turn it off.
  m.def("set_eager_dump", [](py::object dump, std::set<std::string> stages) {
    {
      std::lock_guard<std::mutex> lock(tripy::binding::g_eager_stages_mu);
      tripy::binding::g_eager_stages = std::make_shared<const std::set<std::string>>(std::move(stages));
    }
    PyObject* handle = dump.is_none() ? nullptr : dump.inc_ref().ptr();
    tripy::binding::g_eager_dump.store(handle);
  });
  m.def("gpu_available", [] { return tripy::rt::backend_for(tripy::Device::Kind::kGpu) != nullptr; });
  // (int8, float8, int8 weight-only rows): the low-precision GEMMs that quantize/dequantize around a
  // matmul compile to on `device`, and the rows up to which an int8 one with a constant weight is
  // the weight-only product instead (tests ask, since a GPU's architecture decides).
  m.def("_low_precision_gemms", [](const std::string& device) -> py::tuple {
    tripy::rt::Backend* b = tripy::rt::backend_for(tripy::binding::parse_device(device).kind);
    if (b == nullptr || !b->available()) return py::make_tuple(false, false, 0);
    const tripy::rt::LowPrecisionGemms g = b->low_precision_gemms();
    return py::make_tuple(bool{g.int8}, bool{g.float8}, g.int8_weight_only_rows);
  });
}

// Shared pieces of the tripy._C binding: Status -> tp.TripyException, source frames, devices.
#pragma once

#include <pybind11/pybind11.h>

#include <mutex>

#include "compiler/compile.h"
#include "compiler/eager.h"
#include "trace/node.h"
#include "trace/op_def.h"
#include "tripy/status.h"

namespace py = pybind11;

namespace tripy::binding {

// Raises tp.TripyException with the formatted error (never returns).
[[noreturn]] void raise(const Status& status);

template <typename T>
T unwrap(StatusOr<T> v) {
  if (!v.ok()) raise(v.status());
  return std::move(v).value();
}
// unwrap, pointing an error that has no location yet at `where` (the user's call).
template <typename T>
T unwrap_at(StatusOr<T> v, const SourceRef& where) {
  if (!v.ok()) {
    Status st = v.status();
    raise(st.at(where));
  }
  return std::move(v).value();
}
inline void check(const Status& st) {
  if (!st.ok()) raise(st);
}

// The evaluation lock (compiler::lock_graph), held while the binding reads the shared trace graph
// (a node's value, its inputs): another thread's evaluation writes them. Taken at once where free;
// else waited for without the GIL, which a plugin's CPU implementation inside that evaluation may
// need.
inline std::unique_lock<std::recursive_mutex> graph_lock() {
  std::unique_lock<std::recursive_mutex> lock = compiler::lock_graph(/*wait=*/false);
  if (!lock.owns_lock()) {
    py::gil_scoped_release nogil;
    lock = compiler::lock_graph();
  }
  return lock;
}

// (file, line, function, col, end_col) tuples from tripy.utils.stack_info -> SourceRef.
SourceRef to_source(const py::handle& frames);
Device parse_device(const std::string& s);
DType parse_dtype(const std::string& s);
CompileOptions eager_options(const Device& device);
// Waits for the work on `device`'s default stream (a GPU's; nothing for the CPU) and raises what
// that work recorded.
Status synchronize_device(const Device& device);
// Builds the Trace op `op` (tripy.frontend.trace_call.make): attributes by name, checked against
// the op's declaration; `device` places a creation op. Errors name `src`.
trace::NodeRef make_op(const std::string& op, std::vector<trace::NodeRef> inputs, const py::dict& attrs,
                       const SourceRef& src);
trace::NodeRef make_op(const trace::OpDef& def, std::vector<trace::NodeRef> inputs, const py::dict& attrs,
                       const SourceRef& src);
// The user's source frames at this point of the running Python code (those outside the tripy
// package, innermost first, at most 8), as tripy.utils.stack_info.capture_user_frames gives them.
SourceRef capture_source();
// Host copy of a tensor (identity for CPU tensors).
Tensor to_host(const Tensor& t);

void bind_node(py::module_& m);
void bind_data(py::module_& m);
void bind_executable(py::module_& m);
void bind_stream(py::module_& m);
void bind_plugin(py::module_& m);
void bind_safetensors(py::module_& m);
void bind_onnx(py::module_& m);
void bind_eager(py::module_& m);

}  // namespace tripy::binding

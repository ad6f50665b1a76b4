// Binding of tripy::Executable: run on evaluated nodes, save/load, input descriptions.
#include <pybind11/stl.h>

#include <iterator>

#include "binding.h"
#include "compiler/build_program.h"
#include "compiler/eager.h"
#include "runtime/executable_impl.h"
#include "tripy/executable.h"

namespace tripy::binding {

// A run's error points at the op it concerns (a reshape inside the compiled function, say); the
// user's call of the executable is named too, so either line leads to the other.
static Status at_call(Status st, const SourceRef& call) {
  if (st.where() && call && st.where() != call) return st.note("In this call of the executable:", call);
  return st.at(call);
}

// Evaluates a lazy argument without holding the GIL while it waits for the eager lock: the thread
// holding that lock may be running a plugin's CPU implementation, which needs the GIL.
static void evaluate_argument(const trace::NodeRef& a) {
  if (a->evaluated()) return;
  Status st;
  {
    py::gil_scoped_release nogil;
    st = compiler::evaluate(a, eager_options(a->device));
  }
  check(st);
}

void bind_executable(py::module_& m) {
  py::class_<Executable>(m, "Executable")
      .def("run",
           [](const Executable& exe, const std::vector<trace::NodeRef>& args, py::object frames) {
             SourceRef src = to_source(frames);
             std::vector<Tensor> inputs;
             for (const auto& a : args) {
               evaluate_argument(a);
               inputs.push_back(a->value);
             }
             StatusOr<std::vector<Tensor>> out = [&] {
               py::gil_scoped_release nogil;
               return exe.run(inputs);
             }();
             if (!out.ok()) raise(at_call(out.status(), src));
             std::vector<trace::NodeRef> nodes;
             for (auto& t : out.value()) nodes.push_back(trace::make_data_node(std::move(t), src));
             return nodes;
           })
      // One run that also times each kernel: (outputs, milliseconds per kernel).
      .def("profile",
           [](const Executable& exe, const std::vector<trace::NodeRef>& args, py::object frames) {
             SourceRef src = to_source(frames);
             std::vector<Tensor> inputs;
             for (const auto& a : args) {
               evaluate_argument(a);
               inputs.push_back(a->value);
             }
             std::vector<double> ms;
             StatusOr<std::vector<Tensor>> out = [&] {
               py::gil_scoped_release nogil;
               return exe.run_profiled(inputs, ms);
             }();
             if (!out.ok()) raise(at_call(out.status(), src));
             std::vector<trace::NodeRef> nodes;
             for (auto& t : out.value()) nodes.push_back(trace::make_data_node(std::move(t), src));
             return py::make_tuple(nodes, ms);
           })
      // Path errors (missing, unwritable, a directory) point at the user's save/load line.
      .def("save",
           [](const Executable& exe, const std::string& path, py::object frames) {
             Status st = [&] {
               py::gil_scoped_release nogil;  // writing and syncing a large file takes a while
               return exe.save(path);
             }();
             if (!st.ok()) raise(st.at(to_source(frames)));
           })
      .def_static("load",
                  [](const std::string& path, py::object frames) {
                    StatusOr<Executable> exe = Executable::load(path);
                    if (!exe.ok()) {
                      Status st = exe.status();
                      raise(st.at(to_source(frames)));
                    }
                    return std::move(exe).value();
                  })
      .def_property_readonly("device", [](const Executable& exe) { return exe.device().str(); })
      .def_property_readonly("output_names", &Executable::output_names)
      // The program's kernels in launch order, as (kind, name, user frame): what tests and profiles read.
      .def_property_readonly("kernels", [](const Executable& exe) {
        py::list out;
        for (const rt::Kernel& k : exe.impl()->program->kernels)
        {
          // The user frame that created the kernel's first op: (file, line, function), or None.
          py::object where = py::none();
          const auto& srcs = exe.impl()->program->sources;
          if (k.source >= 0 && static_cast<size_t>(k.source) < srcs.size() && !srcs[k.source].empty()) {
            const SourceFrame& f = srcs[k.source].front();
            where = py::make_tuple(f.file, f.line, f.function);
          }
          out.append(py::make_tuple(rt::kernel_kind_name(k.kind),
                                    k.name, where));
        }
        return out;
      })
      .def_property_readonly("program_text",
                             [](const Executable& exe) { return compiler::program_str(*exe.impl()->program); })
      // (name, dtype, dim_min, dim_opt, dim_max, value_bounds): value_bounds is (min, opt, max)
      // for a shape value (tp.DimensionInputInfo), None for a tensor.
      .def_property_readonly("inputs", [](const Executable& exe) {
        py::list out;
        for (const auto& d : exe.inputs()) {
          py::object bounds = py::none();
          if (d.kind == InputDesc::Kind::kShapeValue) bounds = py::make_tuple(d.value_min, d.value_opt, d.value_max);
          out.append(py::make_tuple(d.name, std::string(dtype_name(d.dtype)), d.dim_min, d.dim_opt, d.dim_max, bounds));
        }
        return out;
      })
      // Names of the inputs declared with tp.InputInfo(donate=True).
      .def_property_readonly("donated", [](const Executable& exe) {
        std::vector<std::string> out;
        for (const auto& d : exe.inputs())
          if (d.donated) out.push_back(d.name);
        return out;
      });
}

}  // namespace tripy::binding

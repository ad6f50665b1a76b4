// Binding of tripy::Executable: run on evaluated nodes, save/load, input descriptions.
#include <pybind11/stl.h>

#include <iterator>

#include "binding.h"
#include "compiler/build_program.h"
#include "compiler/eager.h"
#include "runtime/backend.h"
#include "runtime/collectives.h"
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
  if (const auto graph = graph_lock(); a->evaluated()) return;
  Status st;
  {
    py::gil_scoped_release nogil;
    st = compiler::evaluate(a, eager_options(a->device));
  }
  check(st);
}

// The runtime inputs of a call's argument nodes (evaluating lazy ones).
static std::vector<Tensor> argument_tensors(const std::vector<trace::NodeRef>& args) {
  std::vector<Tensor> inputs;
  for (const auto& a : args) {
    evaluate_argument(a);
    inputs.push_back(a->value);
  }
  return inputs;
}

// A profile's kernels in launch order, as (kind, name, user frame): what tests and profiles read.
static py::list kernels_of(const Executable::Impl::Profile& profile) {
  py::list out;
  for (const rt::Kernel& k : profile.program->kernels) {
    // The user frame that created the kernel's first op: (file, line, function), or None.
    py::object where = py::none();
    const auto& srcs = profile.program->sources;
    if (k.source >= 0 && static_cast<size_t>(k.source) < srcs.size() && !srcs[k.source].empty()) {
      const SourceFrame& f = srcs[k.source].front();
      where = py::make_tuple(f.file, f.line, f.function);
    }
    out.append(py::make_tuple(rt::kernel_kind_name(k.kind), k.name, where));
  }
  return out;
}

// (name, dtype, dim_min, dim_opt, dim_max, value_bounds) per input: value_bounds is (min, opt, max)
// for a shape value (tp.DimensionInputInfo), None for a tensor.
static py::list inputs_of(const std::vector<InputDesc>& descs) {
  py::list out;
  for (const auto& d : descs) {
    py::object bounds = py::none();
    if (d.kind == InputDesc::Kind::kShapeValue) bounds = py::make_tuple(d.value_min, d.value_opt, d.value_max);
    out.append(py::make_tuple(d.name, std::string(dtype_name(d.dtype)), d.dim_min, d.dim_opt, d.dim_max, bounds));
  }
  return out;
}

static const Executable::Impl::Profile& profile_at(const Executable& exe, size_t i) {
  if (i >= exe.num_profiles())
    raise(invalid_argument("This executable has " + std::to_string(exe.num_profiles()) +
                           " optimization profile(s); there is no profile " + std::to_string(i) + "."));
  return exe.impl()->profiles[i];
}

// The communicators of a sharded executable's ranks (this process's), as Python holds them.
struct Communicators {
  std::vector<std::shared_ptr<rt::Communicator>> ranks;
};

static rt::Backend* collective_backend(const std::string& device) {
  const Device d = parse_device(device);
  rt::Backend* b = rt::backend_for(d.kind);
  if (b == nullptr) raise(Status(StatusCode::kUnavailable, "no backend for device " + device));
  return b;
}

static void bind_collectives(py::module_& m) {
  py::class_<Communicators>(m, "Communicators")
      .def_property_readonly("ranks", [](const Communicators& c) {
        std::vector<std::pair<int, int>> out;
        for (const auto& r : c.ranks) out.emplace_back(r->rank(), r->world_size());
        return out;
      });
  // A rank of this process on each of `devices` (one kind: the CPU's meet in shared memory, GPUs
  // through NCCL).
  m.def("create_communicators", [](const std::vector<std::string>& devices) {
    std::vector<Device> ranks;
    for (const std::string& d : devices) ranks.push_back(parse_device(d));
    if (ranks.empty()) raise(invalid_argument("a mesh has at least one rank"));
    std::vector<std::shared_ptr<rt::Communicator>> made;
    {
      py::gil_scoped_release nogil;  // NCCL's setup may take a while
      auto c = collective_backend(devices.front())->create_communicators(ranks);
      if (!c.ok()) {
        py::gil_scoped_acquire gil;
        raise(c.status());
      }
      made = std::move(c).value();
    }
    return Communicators{std::move(made)};
  });
  // Several processes: rank 0's unique id (bytes), and one rank joining with it.
  m.def("communicator_unique_id", [](const std::string& device) {
    return py::bytes(unwrap(collective_backend(device)->communicator_unique_id()));
  });
  m.def("join_communicator", [](const std::string& device, const py::bytes& id, int rank, int world_size) {
    std::shared_ptr<rt::Communicator> c;
    {
      const std::string bytes = id;
      py::gil_scoped_release nogil;  // NCCL's bootstrap waits for every rank
      auto joined = collective_backend(device)->join_communicator(bytes, rank, world_size);
      if (!joined.ok()) {
        py::gil_scoped_acquire gil;
        raise(joined.status());
      }
      c = std::move(joined).value();
    }
    return Communicators{{c}};
  });
  // One call of a sharded executable: rank r runs programs[r] on args[r] with comms.ranks[r], each
  // on its own thread; returns every rank's outputs.
  m.def("run_ranks", [](const std::vector<Executable>& programs, const Communicators& comms,
                        const std::vector<std::vector<trace::NodeRef>>& args, py::object frames) {
    SourceRef src = to_source(frames);
    std::vector<std::vector<Tensor>> inputs;
    for (const auto& a : args) inputs.push_back(argument_tensors(a));
    std::vector<const Executable*> ptrs;
    for (const Executable& e : programs) ptrs.push_back(&e);
    StatusOr<std::vector<std::vector<Tensor>>> out = [&] {
      py::gil_scoped_release nogil;
      return rt::run_ranks(ptrs, inputs, comms.ranks);
    }();
    if (!out.ok()) raise(at_call(out.status(), src));
    std::vector<std::vector<trace::NodeRef>> nodes;
    for (auto& rank : out.value()) {
      nodes.emplace_back();
      for (auto& t : rank) nodes.back().push_back(trace::make_data_node(std::move(t), src));
    }
    return nodes;
  });
}

void bind_executable(py::module_& m) {
  bind_collectives(m);
  // tp.compile with several optimization profiles: one executable of the profiles compiled apart.
  m.def("combine_profiles", [](const std::vector<Executable>& parts) {
    std::vector<ProfileParts> profiles;
    for (const Executable& exe : parts) {
      const Executable::Impl& impl = *exe.impl();
      if (impl.profiles.size() != 1 || impl.device != parts.front().device())
        raise(internal_error("combine_profiles takes executables of one profile each, for one device"));
      profiles.push_back({impl.profiles.front().program, impl.profiles.front().artifacts});
    }
    return unwrap(make_executable(std::move(profiles), parts.front().device()));
  });
  py::class_<Executable>(m, "Executable")
      .def("run",
           [](const Executable& exe, const std::vector<trace::NodeRef>& args, py::object frames) {
             SourceRef src = to_source(frames);
             std::vector<Tensor> inputs = argument_tensors(args);
             StatusOr<std::vector<Tensor>> out = [&] {
               py::gil_scoped_release nogil;
               return exe.run(inputs);
             }();
             if (!out.ok()) raise(at_call(out.status(), src));
             std::vector<trace::NodeRef> nodes;
             for (auto& t : out.value()) nodes.push_back(trace::make_data_node(std::move(t), src));
             return nodes;
           })
      // The optimization profile a call with these arguments runs (or the call's error).
      .def("select_profile",
           [](const Executable& exe, const std::vector<trace::NodeRef>& args, py::object frames) {
             SourceRef src = to_source(frames);
             std::vector<Tensor> inputs = argument_tensors(args);
             StatusOr<size_t> chosen = exe.select_profile(inputs);
             if (!chosen.ok()) raise(at_call(chosen.status(), src));
             return chosen.value();
           })
      // One run that also times each kernel: (outputs, milliseconds per kernel, the kernels that ran).
      .def("profile",
           [](const Executable& exe, const std::vector<trace::NodeRef>& args, py::object frames) {
             SourceRef src = to_source(frames);
             std::vector<Tensor> inputs = argument_tensors(args);
             StatusOr<size_t> chosen = exe.select_profile(inputs);
             if (!chosen.ok()) raise(at_call(chosen.status(), src));
             std::vector<double> ms;
             StatusOr<std::vector<Tensor>> out = [&] {
               py::gil_scoped_release nogil;
               return exe.run_profiled(inputs, ms);
             }();
             if (!out.ok()) raise(at_call(out.status(), src));
             std::vector<trace::NodeRef> nodes;
             for (auto& t : out.value()) nodes.push_back(trace::make_data_node(std::move(t), src));
             return py::make_tuple(nodes, ms, kernels_of(exe.impl()->profiles[chosen.value()]));
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
      // Profile 0's kernels, program text and inputs; the *_of methods take a profile's number.
      .def_property_readonly("kernels", [](const Executable& exe) { return kernels_of(exe.impl()->profiles.front()); })
      .def_property_readonly("program_text",
                             [](const Executable& exe) { return compiler::program_str(*exe.impl()->program()); })
      .def_property_readonly("inputs", [](const Executable& exe) { return inputs_of(exe.inputs()); })
      .def_property_readonly("num_profiles", &Executable::num_profiles)
      .def("kernels_of", [](const Executable& exe, size_t i) { return kernels_of(profile_at(exe, i)); })
      .def("program_text_of", [](const Executable& exe, size_t i) { return compiler::program_str(*profile_at(exe, i).program); })
      .def("inputs_of", [](const Executable& exe, size_t i) { return inputs_of(profile_at(exe, i).input_descs); })
      // The number of ranks the collectives of every profile were compiled for (a saved rank's
      // mesh size), or None for a program without collectives. Collectives that disagree are a
      // program no mesh can run: kDataLoss.
      .def_property_readonly("collective_world_size", [](const Executable& exe) -> py::object {
        int64_t world = 0;
        for (const auto& profile : exe.impl()->profiles)
          for (const rt::Kernel& k : profile.program->kernels) {
            if (k.kind != rt::KernelKind::kCollective) continue;
            if (world != 0 && k.collective.world_size != world)
              raise(Status(StatusCode::kDataLoss, "the executable's collectives were compiled for meshes of " +
                                                      std::to_string(world) + " and " +
                                                      std::to_string(k.collective.world_size) + " ranks"));
            world = k.collective.world_size;
          }
        if (world == 0) return py::none();
        return py::int_(world);
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

// Executable: loading, saving and running. run() validates every input before anything touches a
// device, so a wrong call is an error that names the argument, never a crash inside a kernel.
#include <algorithm>
#include <map>
#include <string>

#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "runtime/file_format.h"
#include "runtime/run_checks.h"

namespace tripy {
namespace {

std::string input_list(const std::vector<InputDesc>& descs) {
  std::string names;
  for (size_t i = 0; i < descs.size(); ++i) names += (i ? ", " : "") + descs[i].name;
  return names;
}

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// A shape value: a 0-d int64 host tensor (whatever the executable's device: only the shape
// program reads it) whose value lies in the compiled range.
Status check_shape_value(const InputDesc& desc, const Tensor& t) {
  const std::string arg = "Argument " + quoted(desc.name);
  if (!rt::is_shape_value(t))
    return invalid_argument(arg + " is a shape value: pass a 0-d int64 tensor in host memory (Tensor::host_int64), "
                            "but got a tensor of dtype " + std::string(dtype_name(t.dtype())) + " and shape " +
                            dims_str(t.shape()) + " on " + t.device().str() + ".");
  const int64_t value = rt::shape_value_of(t);
  if (value < desc.value_min || value > desc.value_max)
    return Status(StatusCode::kOutOfRange,
                  arg + " has value " + std::to_string(value) + ", which is outside the range [" +
                      std::to_string(desc.value_min) + ", " + std::to_string(desc.value_max) +
                      "] this executable was compiled for.");
  return ok_status();
}

// Each argument alone: presence of data, dtype, rank, each dim's range, device.
Status check_argument(const InputDesc& desc, const Tensor& t, const Device& device) {
  const std::string arg = "Argument " + quoted(desc.name);
  if (!t.defined()) return invalid_argument(arg + " is not a tensor with data.");
  if (desc.kind == InputDesc::Kind::kShapeValue) return check_shape_value(desc, t);
  if (t.dtype() != desc.dtype)
    return invalid_argument(arg + " has dtype " + std::string(dtype_name(t.dtype())) +
                            ", but this executable was compiled for " + std::string(dtype_name(desc.dtype)) + ".");
  if (t.shape().size() != desc.dim_min.size())
    return invalid_argument(arg + " has rank " + std::to_string(t.shape().size()) +
                            ", but this executable was compiled for rank " + std::to_string(desc.dim_min.size()) + ".");
  for (size_t d = 0; d < t.shape().size(); ++d) {
    const int64_t size = t.shape()[d];
    if (size < desc.dim_min[d] || size > desc.dim_max[d])
      return Status(StatusCode::kOutOfRange,
                    arg + ": dimension " + std::to_string(d) + " has size " + std::to_string(size) +
                        ", which is outside the range [" + std::to_string(desc.dim_min[d]) + ", " +
                        std::to_string(desc.dim_max[d]) + "] this executable was compiled for.");
  }
  if (t.device() != device)
    return invalid_argument(arg + " is on " + t.device().str() + ", but this executable runs on " + device.str() +
                            ". Copy it to " + device.str() + " first.");
  if (t.nbytes() > 0 && t.data() == nullptr) return invalid_argument(arg + " has no data.");
  return ok_status();
}

// A donated argument is written during the run: another argument reading the same memory would
// see some of the new values, so donated memory must be the donor's alone.
Status check_donations(const std::vector<InputDesc>& descs, const std::vector<Tensor>& inputs) {
  auto range = [&](size_t i) {
    const auto* lo = static_cast<const uint8_t*>(inputs[i].data());
    return std::make_pair(lo, lo + inputs[i].nbytes());
  };
  for (size_t i = 0; i < descs.size(); ++i) {
    if (!descs[i].donated || inputs[i].nbytes() == 0) continue;
    const auto [lo, hi] = range(i);
    for (size_t j = 0; j < descs.size(); ++j) {
      if (j == i || descs[j].kind != InputDesc::Kind::kTensor || inputs[j].nbytes() == 0) continue;
      const auto [lo2, hi2] = range(j);
      if (inputs[i].device() == inputs[j].device() && lo < hi2 && lo2 < hi)
        return invalid_argument("Argument " + quoted(descs[i].name) + " is donated (updated in place), but shares "
                                "memory with argument " + quoted(descs[j].name) + ". Pass a tensor of its own.");
    }
  }
  return ok_status();
}

Status check_arguments(const rt::Program& p, const std::vector<InputDesc>& descs, const std::vector<Tensor>& inputs,
                       const Device& device) {
  const size_t want = descs.size();
  if (inputs.size() < want)
    return invalid_argument("Missing argument " + quoted(descs[inputs.size()].name) + ": this executable takes " +
                            std::to_string(want) + " input(s) (" + input_list(descs) + "), but " +
                            std::to_string(inputs.size()) + " were given.");
  if (inputs.size() > want)
    return invalid_argument("Too many arguments: this executable takes " + std::to_string(want) + " input(s) (" +
                            input_list(descs) + "), but " + std::to_string(inputs.size()) + " were given.");
  for (size_t i = 0; i < want; ++i) TRIPY_RETURN_IF_ERROR(check_argument(descs[i], inputs[i], device));
  TRIPY_RETURN_IF_ERROR(check_donations(descs, inputs));

  // Dims that share a tp.NamedDimension must agree; the first occurrence is the reference.
  struct First {
    size_t input, dim;
  };
  std::map<std::string, First> first;
  for (size_t i = 0; i < want; ++i) {
    const std::vector<std::string>& names = p.inputs[i].dim_names;
    for (size_t d = 0; d < names.size(); ++d) {
      if (names[d].empty()) continue;
      auto [it, inserted] = first.emplace(names[d], First{i, d});
      if (inserted) continue;
      const int64_t a = inputs[it->second.input].shape()[it->second.dim], b = inputs[i].shape()[d];
      if (a != b)
        return invalid_argument("Arguments " + quoted(descs[it->second.input].name) + " (dimension " +
                                std::to_string(it->second.dim) + ") and " + quoted(descs[i].name) + " (dimension " +
                                std::to_string(d) + ") share the named dimension " + quoted(names[d]) +
                                ", but have sizes " + std::to_string(a) + " and " + std::to_string(b) + ".");
    }
  }
  return ok_status();
}

}  // namespace

Executable make_executable(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts, Device device) {
  auto impl = std::make_shared<Executable::Impl>();
  for (const rt::InputSpec& in : program->inputs) {
    const bool value = in.kind == rt::InputSpec::Kind::kShapeValue;
    impl->input_descs.push_back({in.name, in.dtype, in.dim_min, in.dim_opt, in.dim_max,
                                 value ? InputDesc::Kind::kShapeValue : InputDesc::Kind::kTensor, in.value_min,
                                 in.value_opt, in.value_max});
    impl->input_descs.back().donated = in.donated;
  }
  for (const SourceInfo& s : program->sources) impl->sources.push_back(std::make_shared<SourceInfo>(s));
  impl->program = std::move(program);
  impl->artifacts = std::move(artifacts);
  impl->device = device;
  return Executable(std::move(impl));
}

StatusOr<Executable> Executable::load(const std::string& path) {
  TRIPY_ASSIGN_OR_RETURN(rt::ExecutableContents contents, rt::read_executable_file(path));
  return make_executable(std::move(contents.program), std::move(contents.artifacts), contents.device);
}

StatusOr<Executable> Executable::deserialize(const uint8_t* data, size_t size) {
  TRIPY_ASSIGN_OR_RETURN(rt::ExecutableContents contents, rt::deserialize_executable(data, size));
  return make_executable(std::move(contents.program), std::move(contents.artifacts), contents.device);
}

StatusOr<std::vector<uint8_t>> Executable::serialize() const {
  return rt::serialize_executable(*impl_->program, impl_->artifacts, impl_->device);
}

Status Executable::save(const std::string& path) const {
  TRIPY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize());
  return rt::write_executable_file(path, bytes);
}

const std::vector<InputDesc>& Executable::inputs() const { return impl_->input_descs; }
const std::vector<std::string>& Executable::output_names() const { return impl_->program->output_names; }
Device Executable::device() const { return impl_->device; }

StatusOr<Tensor> copy_to(const Tensor& tensor, Device device) {
  if (tensor.device() == device) return tensor;
  const bool to_host = device.kind == Device::Kind::kCpu;
  rt::Backend* backend = rt::backend_for(to_host ? tensor.device().kind : device.kind);
  if (backend == nullptr)
    return Status(StatusCode::kUnavailable, "Cannot copy a tensor to " + device.str() + ": this machine has no such device.");
  if (to_host) return backend->copy_to_host(tensor);
  if (tensor.device().kind != Device::Kind::kCpu) {  // device to device: through the host
    TRIPY_ASSIGN_OR_RETURN(Tensor host, copy_to(tensor, Device{}));
    return backend->copy_from_host(host);
  }
  return backend->copy_from_host(tensor);
}

StatusOr<std::vector<Tensor>> Executable::run(const std::vector<Tensor>& inputs) const { return run_with(inputs, nullptr); }

StatusOr<std::vector<Tensor>> Executable::run_profiled(const std::vector<Tensor>& inputs,
                                                       std::vector<double>& kernel_ms) const {
  kernel_ms.clear();
  return run_with(inputs, &kernel_ms);
}

StatusOr<std::vector<Tensor>> Executable::run_with(const std::vector<Tensor>& inputs,
                                                   std::vector<double>* kernel_ms) const {
  const Impl& impl = *impl_;
  const rt::Program& p = *impl.program;
  // One run at a time: backends keep per-program scratch (the arena) in the loaded program. A
  // plugin's CPU implementation runs inside a run, and calling this executable from it again
  // would wait for itself forever: refused instead.
  thread_local std::vector<const Impl*> running;
  if (std::find(running.begin(), running.end(), &impl) != running.end())
    return invalid_argument("This executable is called while it is already running on this thread: a plugin's CPU "
                            "implementation calls the executable that runs it, which would never finish.");
  std::lock_guard<std::mutex> lock(impl.mu);
  running.push_back(&impl);
  struct Pop {
    std::vector<const Impl*>& v;
    ~Pop() { v.pop_back(); }
  } pop{running};
  TRIPY_RETURN_IF_ERROR(check_arguments(p, impl.input_descs, inputs, impl.device));
  std::vector<int64_t> slots;
  p.eval_shapes(inputs, slots);
  for (const rt::ShapeCheck& check : p.checks) {
    const int64_t a = slots[static_cast<size_t>(check.a)], b = slots[static_cast<size_t>(check.b)];
    const bool ok = a == b || (check.kind == rt::ShapeCheck::Kind::kBroadcast && (a == 1 || b == 1));
    if (ok) continue;
    SourceRef where = check.source >= 0 ? impl.sources[static_cast<size_t>(check.source)] : nullptr;
    Status st = invalid_argument(check.message, where);
    return st.note("At run time the sizes were " + std::to_string(a) + " and " + std::to_string(b) + ".");
  }
  TRIPY_RETURN_IF_ERROR(rt::check_run_shapes(p, inputs, slots));

  if (!impl.loaded) {
    rt::Backend* backend = rt::backend_for(impl.device.kind);
    if (backend == nullptr)
      return Status(StatusCode::kUnavailable, "This executable runs on " + impl.device.str() +
                                                  ", but no backend for that device is available in this build or on this machine.");
    TRIPY_ASSIGN_OR_RETURN(impl.loaded, backend->load(impl.program, impl.artifacts));
  }
  if (!kernel_ms) return impl.loaded->run(inputs, slots);
  impl.loaded->set_profile(kernel_ms);
  StatusOr<std::vector<Tensor>> out = impl.loaded->run(inputs, slots);
  impl.loaded->set_profile(nullptr);
  return out;
}

}  // namespace tripy

// Executable: loading, saving and running. run() validates every input before anything touches a
// device, so a wrong call is an error that names the argument, never a crash inside a kernel, and
// picks the optimization profile that runs: the first whose ranges hold every argument.
#include <algorithm>
#include <map>
#include <string>

#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "runtime/file_format.h"
#include "runtime/gpu_scope.h"
#include "runtime/run_checks.h"

namespace tripy {
namespace {

std::string input_list(const std::vector<InputDesc>& descs) {
  std::string names;
  for (size_t i = 0; i < descs.size(); ++i) names += (i ? ", " : "") + descs[i].name;
  return names;
}

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// Each argument alone, apart from its sizes: presence of data, dtype, rank, device. What it checks
// is the same in every profile (they agree on all but ranges).
Status check_argument(const InputDesc& desc, const Tensor& t, const Device& device) {
  // Spelled out only on failure: every call of a compiled or eager program checks its arguments.
  const auto arg = [&] { return "Argument " + quoted(desc.name); };
  if (!t.defined()) return invalid_argument(arg() + " is not a tensor with data.");
  if (desc.kind == InputDesc::Kind::kShapeValue) {
    if (rt::is_shape_value(t)) return ok_status();
    return invalid_argument(arg() + " is a shape value: pass a 0-d int64 tensor in host memory (Tensor::host_int64), "
                            "but got a tensor of dtype " + std::string(dtype_name(t.dtype())) + " and shape " +
                            dims_str(t.shape()) + " on " + t.device().str() + ".");
  }
  if (t.dtype() != desc.dtype)
    return invalid_argument(arg() + " has dtype " + std::string(dtype_name(t.dtype())) +
                            ", but this executable was compiled for " + std::string(dtype_name(desc.dtype)) + ".");
  if (t.shape().size() != desc.dim_min.size())
    return invalid_argument(arg() + " has rank " + std::to_string(t.shape().size()) +
                            ", but this executable was compiled for rank " + std::to_string(desc.dim_min.size()) + ".");
  if (t.device() != device)
    return invalid_argument(arg() + " is on " + t.device().str() + ", but this executable runs on " + device.str() +
                            ". Copy it to " + device.str() + " first.");
  if (t.nbytes() > 0 && t.data() == nullptr) return invalid_argument(arg() + " has no data.");
  return ok_status();
}

// An argument's sizes (or a shape value's value) against one profile's ranges: kOutOfRange.
// `suffix` ends the message ("this executable was compiled for", or a profile's name).
Status check_range(const InputDesc& desc, const Tensor& t, const char* suffix) {
  auto outside = [&](const std::string& what, int64_t v, int64_t lo, int64_t hi) {
    return Status(StatusCode::kOutOfRange, "Argument " + quoted(desc.name) + what + std::to_string(v) + ", which is outside the range [" +
                                               std::to_string(lo) + ", " + std::to_string(hi) + "] " + suffix + ".");
  };
  if (desc.kind == InputDesc::Kind::kShapeValue) {
    const int64_t value = rt::shape_value_of(t);
    if (value < desc.value_min || value > desc.value_max)
      return outside(" has value ", value, desc.value_min, desc.value_max);
    return ok_status();
  }
  for (size_t d = 0; d < t.shape().size(); ++d) {
    const int64_t size = t.shape()[d];
    if (size < desc.dim_min[d] || size > desc.dim_max[d])
      return outside(": dimension " + std::to_string(d) + " has size ", size, desc.dim_min[d], desc.dim_max[d]);
  }
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

// Dims that share a tp.NamedDimension must agree; the first occurrence is the reference.
Status check_named_dims(const rt::Program& p, const std::vector<InputDesc>& descs, const std::vector<Tensor>& inputs) {
  struct First {
    size_t input, dim;
  };
  std::map<std::string, First> first;
  for (size_t i = 0; i < descs.size(); ++i) {
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

// What every profile agrees on: the number of arguments, each one's form, donations.
Status check_arguments(const std::vector<InputDesc>& descs, const std::vector<Tensor>& inputs, const Device& device) {
  const size_t want = descs.size();
  if (inputs.size() < want)
    return invalid_argument("Missing argument " + quoted(descs[inputs.size()].name) + ": this executable takes " +
                            std::to_string(want) + " input(s) (" + input_list(descs) + "), but " +
                            std::to_string(inputs.size()) + " were given.");
  if (inputs.size() > want)
    return invalid_argument("Too many arguments: this executable takes " + std::to_string(want) + " input(s) (" +
                            input_list(descs) + "), but " + std::to_string(inputs.size()) + " were given.");
  for (size_t i = 0; i < want; ++i) TRIPY_RETURN_IF_ERROR(check_argument(descs[i], inputs[i], device));
  return check_donations(descs, inputs);
}

// Whether one profile covers the call: every size and shape value in its ranges, named dims equal.
Status check_profile(const Executable::Impl::Profile& profile, const std::vector<Tensor>& inputs,
                     const char* suffix) {
  for (size_t i = 0; i < profile.input_descs.size(); ++i)
    TRIPY_RETURN_IF_ERROR(check_range(profile.input_descs[i], inputs[i], suffix));
  if (!profile.named_dims) return ok_status();
  return check_named_dims(*profile.program, profile.input_descs, inputs);
}

// A profile's ranges as the error that no profile covers a call prints them: "x: (1..4, 8), n: 1..16".
std::string ranges_str(const std::vector<InputDesc>& descs) {
  auto range = [](int64_t lo, int64_t hi) { return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi); };
  std::string text;
  for (const InputDesc& d : descs) {
    text += (text.empty() ? "" : ", ") + d.name + ": ";
    if (d.kind == InputDesc::Kind::kShapeValue) {
      text += range(d.value_min, d.value_max);
      continue;
    }
    text += "(";
    for (size_t k = 0; k < d.dim_min.size(); ++k) text += (k ? ", " : "") + range(d.dim_min[k], d.dim_max[k]);
    text += d.dim_min.size() == 1 ? ",)" : ")";
  }
  return text;
}

// The first profile, in order, that covers the call; with one profile, its error as it is.
StatusOr<size_t> choose_profile(const Executable::Impl& impl, const std::vector<Tensor>& inputs) {
  TRIPY_RETURN_IF_ERROR(check_arguments(impl.profiles.front().input_descs, inputs, impl.device));
  if (impl.profiles.size() == 1) {
    TRIPY_RETURN_IF_ERROR(check_profile(impl.profiles.front(), inputs, "this executable was compiled for"));
    return size_t{0};
  }
  std::vector<Status> misses;
  for (size_t i = 0; i < impl.profiles.size(); ++i) {
    const std::string suffix = "of profile " + std::to_string(i);
    Status st = check_profile(impl.profiles[i], inputs, suffix.c_str());
    if (st.ok()) return i;
    misses.push_back(std::move(st));
  }
  // Sizes that some profile's ranges hold but whose named dimensions disagree: that is the error.
  for (const Status& st : misses)
    if (st.code() != StatusCode::kOutOfRange) return st;
  std::string text = "No optimization profile of this executable covers this call (a call runs the first profile, "
                     "in order, whose ranges hold every argument):";
  for (size_t i = 0; i < impl.profiles.size(); ++i)
    text += "\n    profile " + std::to_string(i) + ": " + ranges_str(impl.profiles[i].input_descs) + "\n        " +
            misses[i].message();
  return Status(StatusCode::kOutOfRange, text);
}

}  // namespace

namespace {

Executable::Impl::Profile make_profile(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts) {
  Executable::Impl::Profile profile;
  for (const rt::InputSpec& in : program->inputs) {
    const bool value = in.kind == rt::InputSpec::Kind::kShapeValue;
    profile.input_descs.push_back({in.name, in.dtype, in.dim_min, in.dim_opt, in.dim_max,
                                   value ? InputDesc::Kind::kShapeValue : InputDesc::Kind::kTensor, in.value_min,
                                   in.value_opt, in.value_max});
    profile.input_descs.back().donated = in.donated;
  }
  for (const SourceInfo& s : program->sources) profile.sources.push_back(std::make_shared<SourceInfo>(s));
  for (const rt::InputSpec& in : program->inputs)
    for (const std::string& name : in.dim_names) profile.named_dims = profile.named_dims || !name.empty();
  profile.static_inputs = std::all_of(profile.input_descs.begin(), profile.input_descs.end(), [](const InputDesc& d) {
    return d.kind == InputDesc::Kind::kTensor && d.dim_min == d.dim_max;
  });
  profile.program = std::move(program);
  profile.artifacts = std::move(artifacts);
  return profile;
}

}  // namespace

Executable make_executable(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts, Device device) {
  auto impl = std::make_shared<Executable::Impl>();
  impl->profiles.push_back(make_profile(std::move(program), std::move(artifacts)));
  impl->device = device;
  return Executable(std::move(impl));
}

StatusOr<Executable> make_executable(std::vector<ProfileParts> profiles, Device device) {
  if (profiles.empty()) return invalid_argument("An executable needs at least one optimization profile.");
  std::vector<const rt::Program*> programs;
  for (const ProfileParts& p : profiles) programs.push_back(p.program.get());
  TRIPY_RETURN_IF_ERROR(rt::check_profiles_agree(programs));
  auto impl = std::make_shared<Executable::Impl>();
  for (ProfileParts& p : profiles) impl->profiles.push_back(make_profile(std::move(p.program), std::move(p.artifacts)));
  impl->device = device;
  return Executable(std::move(impl));
}

namespace {

bool same_memory(const Tensor& a, const Tensor& b) {
  return a.data() == b.data() && a.device() == b.device() && a.dtype() == b.dtype() && a.shape() == b.shape();
}

// The program profile `index` loads: on a device, its host constants that other profiles share
// (the weights: the loader and the compiler give them one host tensor) are replaced by one device
// copy for the whole executable, which the backend reads in place rather than copying again.
StatusOr<std::shared_ptr<const rt::Program>> with_shared_constants(const Executable::Impl& impl, size_t index) {
  const std::shared_ptr<const rt::Program>& program = impl.profiles[index].program;
  if (impl.profiles.size() == 1 || impl.device.kind == Device::Kind::kCpu) return program;
  std::shared_ptr<rt::Program> copy;
  for (size_t c = 0; c < program->constants.size(); ++c) {
    const Tensor& host = program->constants[c];
    if (host.device() != Device{} || host.nbytes() == 0) continue;
    bool shared = false;
    for (size_t p = 0; p < impl.profiles.size() && !shared; ++p)
      for (const Tensor& other : impl.profiles[p].program->constants)
        shared = shared || (p != index && same_memory(other, host));
    if (!shared) continue;
    auto it = std::find_if(impl.device_constants.begin(), impl.device_constants.end(),
                           [&](const auto& pair) { return same_memory(pair.first, host); });
    if (it == impl.device_constants.end()) {
      TRIPY_ASSIGN_OR_RETURN(Tensor on_device, copy_to(host, impl.device));
      impl.device_constants.emplace_back(host, std::move(on_device));
      it = impl.device_constants.end() - 1;
    }
    if (!copy) copy = std::make_shared<rt::Program>(*program);
    copy->constants[c] = it->second;
  }
  if (!copy) return program;
  return std::shared_ptr<const rt::Program>(std::move(copy));
}

}  // namespace

StatusOr<rt::LoadedProgram*> loaded_profile(const Executable::Impl& impl, size_t index) {
  const Executable::Impl::Profile& profile = impl.profiles[index];
  if (!profile.loaded) {
    rt::GpuScope on(impl.device.index);  // loaded on the executable's GPU
    rt::Backend* backend = rt::backend_for(impl.device.kind);
    if (backend == nullptr)
      return Status(StatusCode::kUnavailable, "This executable runs on " + impl.device.str() +
                                                  ", but no backend for that device is available in this build or on this machine.");
    TRIPY_ASSIGN_OR_RETURN(std::shared_ptr<const rt::Program> program, with_shared_constants(impl, index));
    TRIPY_ASSIGN_OR_RETURN(std::unique_ptr<rt::LoadedProgram> loaded, backend->load(program, profile.artifacts));
    if (impl.stream != nullptr) TRIPY_RETURN_IF_ERROR(loaded->set_stream(impl.stream));
    profile.loaded = std::move(loaded);
  }
  return profile.loaded.get();
}

Status set_executable_stream(const Executable::Impl& impl, void* stream) {
  std::lock_guard<std::mutex> lock(impl.mu);
  if (!impl.profiles.front().loaded) TRIPY_RETURN_IF_ERROR(loaded_profile(impl, 0).status());
  for (const Executable::Impl::Profile& profile : impl.profiles)
    if (profile.loaded) TRIPY_RETURN_IF_ERROR(profile.loaded->set_stream(stream));
  impl.stream = stream;
  return ok_status();
}

void release_executable_scratch(const Executable::Impl& impl, int64_t min_bytes) {
  std::lock_guard<std::mutex> lock(impl.mu);
  for (const Executable::Impl::Profile& profile : impl.profiles)
    if (profile.loaded) profile.loaded->release_scratch(min_bytes);
}

namespace {

StatusOr<Executable> from_contents(rt::ExecutableContents contents) {
  if (contents.profiles.size() == 1)
    return make_executable(std::move(contents.profiles[0].program), std::move(contents.profiles[0].artifacts),
                           contents.device);
  // The loader has checked that the profiles agree (a file where they do not is corrupt).
  return make_executable(std::move(contents.profiles), contents.device);
}

}  // namespace

StatusOr<Executable> Executable::load(const std::string& path) {
  TRIPY_ASSIGN_OR_RETURN(rt::ExecutableContents contents, rt::read_executable_file(path));
  return from_contents(std::move(contents));
}

StatusOr<Executable> Executable::deserialize(const uint8_t* data, size_t size) {
  TRIPY_ASSIGN_OR_RETURN(rt::ExecutableContents contents, rt::deserialize_executable(data, size));
  return from_contents(std::move(contents));
}

StatusOr<std::vector<uint8_t>> Executable::serialize() const {
  std::vector<ProfileParts> parts;
  for (const Impl::Profile& p : impl_->profiles) parts.push_back({p.program, p.artifacts});
  return rt::serialize_executable(parts, impl_->device);
}

Status Executable::save(const std::string& path) const {
  TRIPY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize());
  return rt::write_executable_file(path, bytes);
}

const std::vector<InputDesc>& Executable::inputs() const { return impl_->profiles.front().input_descs; }
const std::vector<std::string>& Executable::output_names() const { return impl_->program()->output_names; }
Device Executable::device() const { return impl_->device; }
size_t Executable::num_profiles() const { return impl_->profiles.size(); }
const std::vector<InputDesc>& Executable::profile_inputs(size_t profile) const {
  return impl_->profiles.at(profile).input_descs;
}
StatusOr<size_t> Executable::select_profile(const std::vector<Tensor>& inputs) const {
  return choose_profile(*impl_, inputs);
}

StatusOr<Tensor> copy_to(const Tensor& tensor, Device device) {
  if (tensor.device() == device) return tensor;
  rt::GpuScope on(device.index);  // a copy to gpu:N is made there (one from it, the backend places)
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

namespace {

// The sizes a run derives from its inputs (`slots`): the checks the compiler could not prove
// (an equality or broadcast at some user line), then the program's consistency with them.
Status check_shapes(const Executable::Impl::Profile& profile, const std::vector<Tensor>& inputs,
                    const std::vector<int64_t>& slots) {
  const rt::Program& p = *profile.program;
  for (const rt::ShapeCheck& check : p.checks) {
    const int64_t a = slots[static_cast<size_t>(check.a)], b = slots[static_cast<size_t>(check.b)];
    const bool ok = a == b || (check.kind == rt::ShapeCheck::Kind::kBroadcast && (a == 1 || b == 1));
    if (ok) continue;
    SourceRef where = check.source >= 0 ? profile.sources[static_cast<size_t>(check.source)] : nullptr;
    Status st = invalid_argument(check.message, where);
    return st.note("At run time the sizes were " + std::to_string(a) + " and " + std::to_string(b) + ".");
  }
  return rt::check_run_shapes(p, inputs, slots);
}

}  // namespace

StatusOr<std::vector<Tensor>> Executable::run(const std::vector<Tensor>& inputs) const { return run_with(inputs, nullptr); }

StatusOr<std::vector<Tensor>> Executable::run_profiled(const std::vector<Tensor>& inputs,
                                                       std::vector<double>& kernel_ms) const {
  kernel_ms.clear();
  return run_with(inputs, &kernel_ms);
}

StatusOr<std::vector<Tensor>> Executable::run_with(const std::vector<Tensor>& inputs,
                                                   std::vector<double>* kernel_ms) const {
  const Impl& impl = *impl_;
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
  TRIPY_ASSIGN_OR_RETURN(const size_t chosen, choose_profile(impl, inputs));
  const Impl::Profile& profile = impl.profiles[chosen];
  const rt::Program& p = *profile.program;
  std::vector<int64_t>& slots = profile.slots;  // reused: runs of one executable take turns (`mu`)
  p.eval_shapes(inputs, slots);
  if (!profile.shapes_checked) TRIPY_RETURN_IF_ERROR(check_shapes(profile, inputs, slots));
  profile.shapes_checked = profile.static_inputs;

  TRIPY_ASSIGN_OR_RETURN(rt::LoadedProgram* const loaded, loaded_profile(impl, chosen));
  if (!kernel_ms) return loaded->run(inputs, slots);
  loaded->set_profile(kernel_ms);
  StatusOr<std::vector<Tensor>> out = loaded->run(inputs, slots);
  loaded->set_profile(nullptr);
  return out;
}

}  // namespace tripy

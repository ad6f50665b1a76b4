// What an Executable holds, and the factories the compiler and the loader use to make one. The
// runtime's private header: the public API (tripy/executable.h) exposes only load/save/run.
//
// An executable holds one or more optimization profiles: each is a Program compiled for its own
// input ranges (and tuned for its own `opt` sizes), with its backend artifacts. Every profile takes
// the same inputs (names, dtypes, ranks, kinds) and returns the same outputs; only the ranges, and
// so the code, differ. A run uses the first profile, in order, whose ranges cover the call.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/backend.h"
#include "runtime/program.h"
#include "tripy/executable.h"

namespace tripy {

// One optimization profile's program and the backend's artifacts for it.
struct ProfileParts {
  std::shared_ptr<const rt::Program> program;
  rt::Artifacts artifacts;
};

struct Executable::Impl {
  struct Profile {
    std::shared_ptr<const rt::Program> program;
    rt::Artifacts artifacts;
    std::vector<InputDesc> input_descs;  // derived from program->inputs
    std::vector<SourceRef> sources;      // program->sources, shared by the errors that cite them
    // The backend's prepared program, made on the profile's first run (loading may cost device
    // memory, so profiles that never run, and executables that are only saved or inspected, never
    // pay for it). Guarded by `mu`.
    mutable std::unique_ptr<rt::LoadedProgram> loaded;
    // Every input static (each dim's min equal to its max, no shape values): the sizes a run
    // derives are the same on every call the ranges admit, so the run-time shape checks that
    // passed once pass again and are skipped (eager programs: the key fixes every shape).
    bool static_inputs = false;
    // Some input dims share a tp.NamedDimension: a run checks that their sizes agree.
    bool named_dims = false;
    mutable bool shapes_checked = false;  // guarded by `mu`
    mutable std::vector<int64_t> slots;   // a run's sizes (Program::eval_shapes), guarded by `mu`
  };
  std::vector<Profile> profiles;  // at least one
  Device device;
  // The stream set by set_stream (nullptr: the backend's default); profiles loaded later get it too.
  mutable void* stream = nullptr;
  // On a device: the one device copy of each host constant that several profiles share, made when
  // the first of them loads (guarded by `mu`).
  mutable std::vector<std::pair<Tensor, Tensor>> device_constants;
  mutable std::mutex mu;

  // Profile 0: what a single-profile executable is (the compiler's and eager mode's view).
  const std::shared_ptr<const rt::Program>& program() const { return profiles.front().program; }
};

// For the compiler (after Backend::build) and the file loader. `program` must have passed
// rt::validate_program: the loader checks every file, the compiler every program it builds.
Executable make_executable(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts, Device device);
// An executable of several profiles (each program validated, as above). The profiles must agree
// (rt::check_profiles_agree); where they do not, kInvalidArgument says how.
StatusOr<Executable> make_executable(std::vector<ProfileParts> profiles, Device device);

// The profile's prepared program, loading it on first use (with `impl.mu` held).
StatusOr<rt::LoadedProgram*> loaded_profile(const Executable::Impl& impl, size_t profile);
// Sets the stream every profile's runs are enqueued on (loading profile 0 if none is loaded yet,
// so that a wrong stream is reported here).
Status set_executable_stream(const Executable::Impl& impl, void* stream);
// Each loaded profile's rt::LoadedProgram::release_scratch(min_bytes).
void release_executable_scratch(const Executable::Impl& impl, int64_t min_bytes);

}  // namespace tripy

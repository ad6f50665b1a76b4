// What an Executable holds, and the factory the compiler uses to make one. The runtime's private
// header: the public API (tripy/executable.h) exposes only load/save/run.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/backend.h"
#include "runtime/program.h"
#include "tripy/executable.h"

namespace tripy {

struct Executable::Impl {
  std::shared_ptr<const rt::Program> program;
  rt::Artifacts artifacts;
  Device device;
  std::vector<InputDesc> input_descs;  // derived from program->inputs
  std::vector<SourceRef> sources;      // program->sources, shared by the errors that cite them

  // The backend's prepared program, made on the first run (loading may cost device memory, so
  // executables that are only saved or inspected never pay for it). Guarded by `mu`.
  mutable std::mutex mu;
  mutable std::unique_ptr<rt::LoadedProgram> loaded;
};

// For the compiler (after Backend::build) and the file loader. `program` must have passed
// rt::validate_program: the loader checks every file, the compiler every program it builds.
Executable make_executable(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts, Device device);

}  // namespace tripy

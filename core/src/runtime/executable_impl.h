// What an Executable holds, and the factory the compiler uses to make one. The runtime's private
// header: the public API (tripy/executable.h) exposes only load/save/run.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "runtime/program.h"
#include "tripy/executable.h"

namespace tripy {

struct Executable::Impl {
  std::shared_ptr<const rt::Program> program;
  rt::Artifacts artifacts;
  Device device;
  std::vector<InputDesc> input_descs;  // derived from program->inputs
  std::vector<SourceRef> sources;      // program->sources, shared by the errors that cite them

  // Guarded by `mu`, set up on the first run: the program's validation (files are validated on
  // load; this catches compiler bugs as errors instead of crashes) and the backend's prepared
  // program (loading may cost device memory, so executables only saved or inspected never pay).
  mutable std::mutex mu;
  mutable bool validated = false;
  mutable std::unique_ptr<rt::LoadedProgram> loaded;
};

// For the compiler (after Backend::build) and the file loader. Cheap: the program is validated on
// the first run, not here.
Executable make_executable(std::shared_ptr<const rt::Program> program, rt::Artifacts artifacts, Device device);

}  // namespace tripy

// Public C++ API of the runtime: load a saved executable and run it. Needs neither Python nor the
// compiler (link tripy_runtime only).
//
//   auto exe = tripy::Executable::load("model.tpy");
//   if (!exe.ok()) { std::cerr << tripy::format_error(exe.status()); return 1; }
//   auto out = exe->run({input});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy {

namespace rt {
struct Program;
}

// What a runtime input accepts. A tensor: dtype and, per dim, [min, opt, max]. A shape value
// (tp.DimensionInputInfo): a 0-d int64 host tensor (Tensor::host_int64) whose value lies in
// [value_min, value_max]; it has no dims, and only sizes are computed from it.
struct InputDesc {
  enum class Kind : uint8_t { kTensor, kShapeValue };
  std::string name;
  DType dtype;
  std::vector<int64_t> dim_min, dim_opt, dim_max;
  Kind kind = Kind::kTensor;
  int64_t value_min = 0, value_opt = 0, value_max = 0;  // kShapeValue
  // tp.InputInfo(donate=True): the run may update this tensor in place (an output that is
  // `update_slice` of it is returned as this same memory). It must share no memory with the
  // other arguments.
  bool donated = false;
};

// Optimization profiles: an executable compiled with several (tp.compile's optimization_profiles)
// holds one program per profile, each compiled and tuned for its own input ranges. They take the
// same inputs (names, dtypes, ranks) and return the same outputs. A run uses the first profile, in
// order, whose ranges hold every input's sizes and every shape value; a call that none holds is a
// kOutOfRange error listing each profile's ranges and what falls outside them.
class Executable {
 public:
  // The file format version this build writes. It also reads version 3 (one profile per file).
  static constexpr uint32_t kFormatVersion = 4;

  static StatusOr<Executable> load(const std::string& path);
  static StatusOr<Executable> deserialize(const uint8_t* data, size_t size);
  Status save(const std::string& path) const;
  StatusOr<std::vector<uint8_t>> serialize() const;

  // Validates every input (dtype, rank, each dim inside [min, max], device; a shape value's
  // value inside [value_min, value_max]) and runs.
  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) const;
  // Runs like run() and reports the milliseconds each kernel took (kernel_ms[i] for kernel i of the
  // profile that ran, select_profile(inputs)): wall time on the CPU, CUDA events on the GPU (launched directly, no graph replay).
  StatusOr<std::vector<Tensor>> run_profiled(const std::vector<Tensor>& inputs, std::vector<double>& kernel_ms) const;

  // The inputs with the ranges of profile 0 (the only one unless the executable has several).
  const std::vector<InputDesc>& inputs() const;
  size_t num_profiles() const;
  // The inputs with the ranges of `profile` (< num_profiles()).
  const std::vector<InputDesc>& profile_inputs(size_t profile) const;
  // The profile a run with `inputs` would use, or the error that run would give.
  StatusOr<size_t> select_profile(const std::vector<Tensor>& inputs) const;
  const std::vector<std::string>& output_names() const;
  Device device() const;

  // Internal: the compiler builds executables from a Program and backend artifacts.
  struct Impl;
  explicit Executable(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  StatusOr<std::vector<Tensor>> run_with(const std::vector<Tensor>& inputs, std::vector<double>* kernel_ms) const;
  std::shared_ptr<Impl> impl_;
};

// Copies `tensor` to `device` (host memory is Device{kCpu}); a tensor already there is returned as
// it is. Inputs of a GPU executable go through it before run(), outputs after, to be read.
StatusOr<Tensor> copy_to(const Tensor& tensor, Device device);

}  // namespace tripy

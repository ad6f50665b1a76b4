// A tensor's memory as the runtime sees it: dtype, static shape, device and shared ownership of
// the bytes. Used for executable inputs/outputs, constants and evaluated eager tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tripy/dtype.h"
#include "tripy/status.h"

namespace tripy {

struct Device {
  enum class Kind : uint8_t { kCpu = 0, kGpu = 1 };
  Kind kind = Kind::kCpu;
  int index = 0;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu" or "gpu:0"
};
// The device `text` names: "cpu" (or "cpu:0"), "gpu" (gpu:0) or "gpu:N", as Device::str() writes
// them; the one parser of device names (tp.device's, the binding's, the executable file's).
StatusOr<Device> parse_device(std::string_view text);

// Owns (or borrows, with a keep-alive) a dense row-major buffer.
class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised host memory (64-byte aligned); throws std::bad_alloc on failure.
  static Tensor empty_host(DType dtype, std::vector<int64_t> shape);
  // The same, but a failure (no memory, or a shape whose size overflows) is a kResourceExhausted
  // Status that says how many bytes were asked for, of which dtype and shape, and for `what`.
  static StatusOr<Tensor> try_empty_host(DType dtype, std::vector<int64_t> shape, const std::string& what);
  // Wraps memory owned elsewhere; `keep_alive` is released when the last Tensor goes.
  static Tensor borrow(void* data, DType dtype, std::vector<int64_t> shape, Device device,
                       std::shared_ptr<void> keep_alive);
  // A 0-d int64 host tensor holding `value`: how a shape value (an input declared with
  // tp.DimensionInputInfo) is passed to Executable::run.
  static Tensor host_int64(int64_t value);

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  Device device() const { return device_; }
  int64_t numel() const;
  int64_t nbytes() const;
  bool defined() const { return owner_ != nullptr || data_ != nullptr; }
  const std::shared_ptr<void>& owner() const { return owner_; }

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  Device device_;
  std::shared_ptr<void> owner_;
};

int64_t numel_of(const std::vector<int64_t>& shape);
// Row-major element strides of a dense tensor of `shape`.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);
// "(3, 4)", "(3,)", "()": shapes as error messages print them (Python's tuple form).
std::string dims_str(const std::vector<int64_t>& shape);

}  // namespace tripy

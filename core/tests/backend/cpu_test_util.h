// Helpers for the CPU backend tests: build small Programs by hand (slots given directly, so the
// tests need no shape program) and run them through the backend.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "runtime/program.h"

namespace tripy::cpu::testing {

using namespace tripy::rt;

// Builds a Program whose slots are constants: slot(v) adds a slot holding v.
class ProgramBuilder {
 public:
  Slot slot(int64_t v) {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] == v) return static_cast<Slot>(i);
    slots_.push_back(v);
    return static_cast<Slot>(slots_.size() - 1);
  }
  std::vector<Slot> dims(const std::vector<int64_t>& shape) {
    std::vector<Slot> s;
    for (int64_t d : shape) s.push_back(slot(d));
    return s;
  }
  int32_t buffer(BufferDesc::Kind kind, int32_t index, DType dtype, const std::vector<int64_t>& shape,
                 int64_t offset = 0) {
    BufferDesc b;
    b.kind = kind;
    b.index = index;
    b.dtype = dtype;
    b.shape = dims(shape);
    b.offset = offset;
    p_.buffers.push_back(b);
    return static_cast<int32_t>(p_.buffers.size() - 1);
  }
  int32_t input(DType dtype, const std::vector<int64_t>& shape) {
    return buffer(BufferDesc::Kind::kInput, num_inputs_++, dtype, shape);
  }
  int32_t output(DType dtype, const std::vector<int64_t>& shape) {
    int32_t b = buffer(BufferDesc::Kind::kOutput, static_cast<int32_t>(p_.outputs.size()), dtype, shape);
    p_.outputs.push_back(b);
    p_.output_names.push_back("out" + std::to_string(b));
    return b;
  }
  // Temps are laid out one after another, 256-byte aligned.
  int32_t temp(DType dtype, const std::vector<int64_t>& shape) {
    int64_t bytes = dtype_size(dtype);
    for (int64_t d : shape) bytes *= d;
    int32_t b = buffer(BufferDesc::Kind::kTemp, 0, dtype, shape, arena_);
    arena_ += (bytes + 255) / 256 * 256;
    p_.arena_bytes = arena_;
    return b;
  }
  int32_t constant(Tensor t) {
    p_.constants.push_back(t);
    return buffer(BufferDesc::Kind::kConstant, static_cast<int32_t>(p_.constants.size() - 1),
                  t.dtype(), t.shape());
  }
  int32_t alias(int32_t of, const std::vector<int64_t>& shape) {
    return buffer(BufferDesc::Kind::kAlias, of, p_.buffers[of].dtype, shape);
  }
  Kernel& kernel(KernelKind kind, const std::string& name, std::vector<int32_t> in,
                 std::vector<int32_t> out) {
    Kernel k;
    k.kind = kind;
    k.name = name;
    k.inputs = std::move(in);
    k.outputs = std::move(out);
    p_.kernels.push_back(std::move(k));
    return p_.kernels.back();
  }
  Program& program() { return p_; }
  const std::vector<int64_t>& slots() const { return slots_; }

  StatusOr<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) {
    if (!loaded_) {
      auto l = cpu_backend()->load(std::make_shared<Program>(p_), {});
      if (!l.ok()) return l.status();
      loaded_ = std::move(l).value();
    }
    return loaded_->run(inputs, slots_);
  }

 private:
  Program p_;
  std::vector<int64_t> slots_;
  int32_t num_inputs_ = 0;
  int64_t arena_ = 0;
  std::unique_ptr<LoadedProgram> loaded_;
};

template <class T>
Tensor make_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t = Tensor::empty_host(dtype, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

inline Tensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  return make_tensor(DType::kFloat32, std::move(shape), v);
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = static_cast<const T*>(t.data());
  return std::vector<T>(p, p + t.numel());
}

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed = 1) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return v;
}

inline Instr ins(EwOp op, DType dtype, int32_t a = -1, int32_t b = -1, int32_t c = -1,
                 double imm = 0) {
  Instr i;
  i.op = op;
  i.dtype = dtype;
  i.a = a;
  i.b = b;
  i.c = c;
  i.imm = imm;
  return i;
}

}  // namespace tripy::cpu::testing

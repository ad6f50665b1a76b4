// Proves the runtime stands alone: this program links tripy_runtime only (no compiler, no Python),
// builds a Program by hand, saves it, loads it back and runs it on the CPU. It has no builder for
// the GPU (code generation is the compiler side's), so on a GPU machine loading a program without
// GPU code asks for one compiled for the GPU.
//
//   runtime_only_test OUTPUT_DIR      prints "runtime-only: ok" and exits 0 on success
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "runtime/program.h"
#include "tripy/executable.h"

namespace {

using namespace tripy;

// out = x * 2 + 1 for x: float32 [n], n in [1, 8] (opt 4), as one fused kernel.
rt::Program affine_program() {
  rt::Program p;
  p.shape_program = {{rt::ShapeInstr::Op::kInputDim, 0, 0}};
  p.inputs = {{"x", DType::kFloat32, {1}, {4}, {8}, {""}}};
  p.input_shapes = {{0}};
  p.buffers = {{rt::BufferDesc::Kind::kInput, 0, DType::kFloat32, {0}},
               {rt::BufferDesc::Kind::kOutput, 0, DType::kFloat32, {0}}};
  p.outputs = {1};
  p.output_names = {"out"};
  rt::Kernel k;
  k.kind = rt::KernelKind::kFused;
  k.name = "fused_mul_add";
  k.inputs = {0};
  k.outputs = {1};
  k.fused.domain = {0};
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0}};
  k.fused.instrs = {{rt::EwOp::kLoad, DType::kFloat32, 0},
                    {rt::EwOp::kConst, DType::kFloat32, -1, -1, -1, 2.0},
                    {rt::EwOp::kMul, DType::kFloat32, 0, 1},
                    {rt::EwOp::kConst, DType::kFloat32, -1, -1, -1, 1.0},
                    {rt::EwOp::kAdd, DType::kFloat32, 2, 3}};
  k.fused.output_regs = {4};
  p.kernels = {k};
  return p;
}

int fail(const std::string& what) {
  std::cerr << "runtime-only: FAILED: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const std::string path = dir + "/rt_only.tpy";

  Executable built = make_executable(std::make_shared<rt::Program>(affine_program()), {}, Device{});
  Status saved = built.save(path);
  if (!saved.ok()) return fail(format_error(saved));

  auto exe = Executable::load(path);
  if (!exe.ok()) return fail(format_error(exe.status()));
  if (exe->inputs().size() != 1 || exe->inputs()[0].name != "x") return fail("the loaded executable lost its input");

  Tensor x = Tensor::empty_host(DType::kFloat32, {3});
  const float in[3] = {1.0f, -2.0f, 0.5f};
  for (int i = 0; i < 3; ++i) static_cast<float*>(x.data())[i] = in[i];
  auto out = exe->run({x});
  if (!out.ok()) return fail(format_error(out.status()));
  if (out->size() != 1 || (*out)[0].shape() != std::vector<int64_t>{3}) return fail("wrong output shape");
  const float* got = static_cast<const float*>((*out)[0].data());
  for (int i = 0; i < 3; ++i)
    if (got[i] != in[i] * 2 + 1)
      return fail("out[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " + std::to_string(in[i] * 2 + 1));

  std::remove(path.c_str());

  // The runtime registers the CPU's (trivial) builder only; the CUDA builder comes with the compiler.
  if (rt::builder_for(Device::Kind::kCpu) == nullptr) return fail("no CPU builder");
  if (rt::builder_for(Device::Kind::kGpu) != nullptr) return fail("the runtime alone has a GPU builder");
  if (rt::Backend* gpu = rt::backend_for(Device::Kind::kGpu)) {
    auto loaded = gpu->load(std::make_shared<rt::Program>(affine_program()), {});
    if (loaded.ok()) return fail("a program without GPU code loaded on the GPU with no compiler");
    if (loaded.status().code() != StatusCode::kUnavailable ||
        loaded.status().message().find("compile this executable for the GPU") == std::string::npos)
      return fail("loading without GPU code: " + format_error(loaded.status()));
    std::cout << "runtime-only: a GPU program without device code asks to be compiled for the GPU\n";
  }
  std::cout << "runtime-only: ok\n";
  return 0;
}

// kPlugin in hand-built Programs: a plugin registered through the C++ API (tripy/plugin.h) runs
// on the CPU with the kernel's buffers and fields, errors name the plugin, an unregistered one is
// refused at run time, its attributes round-trip through JSON, and validation bounds arity and
// ranks (what the CUDA launch words can describe).
#include <gtest/gtest.h>

#include <functional>

#include "runtime/executable_impl.h"
#include "runtime/program_json.h"
#include "tripy/plugin.h"

namespace tripy {
namespace {

using rt::BufferDesc;
using rt::KernelKind;
using rt::Program;
using rt::ShapeInstr;

// out = x * scale + y, with x (n, 3) and y (3): a plugin that reads fields and two inputs.
Program axpy_program(const std::string& key) {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kInputDim, 0, 0}, {ShapeInstr::Op::kConst, 3, 0}};
  rt::InputSpec x{"x", DType::kFloat32, {1, 3}, {2, 3}, {8, 3}, {"", ""}};
  rt::InputSpec y{"y", DType::kFloat32, {3}, {3}, {3}, {""}};
  p.inputs = {x, y};
  p.input_shapes = {{0, 1}, {1}};
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat32, {0, 1}},
               {BufferDesc::Kind::kInput, 1, DType::kFloat32, {1}},
               {BufferDesc::Kind::kOutput, 0, DType::kFloat32, {0, 1}}};
  rt::Kernel k;
  k.kind = KernelKind::kPlugin;
  k.name = "plugin_axpy";
  k.inputs = {0, 1};
  k.outputs = {2};
  k.plugin.name = key;
  k.plugin.fields = R"({"scale": 2.5})";
  p.kernels = {k};
  p.outputs = {2};
  p.output_names = {"out"};
  return p;
}

Status axpy(const std::vector<Tensor>& in, const Tensor& out, const std::string& fields) {
  if (fields != R"({"scale": 2.5})") return invalid_argument("unexpected fields " + fields);
  const auto* x = static_cast<const float*>(in[0].data());
  const auto* y = static_cast<const float*>(in[1].data());
  auto* o = static_cast<float*>(out.data());
  const int64_t cols = out.shape()[1];
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = x[i] * 2.5f + y[i % cols];
  if (out.shape()[0] == 7) return invalid_argument("seven rows are refused");
  return ok_status();
}

Tensor filled(std::vector<int64_t> shape, float start) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] = start + static_cast<float>(i);
  return t;
}

TEST(PluginProgram, cpu_implementation_runs_with_fields_and_shapes) {
  const std::string key = plugin_key("Axpy", "2", "tests");
  EXPECT_EQ(key, "tests::Axpy/2");
  register_plugin(key, PluginDef{axpy, "", "", 256});
  Program p = axpy_program(key);
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  auto out = exe.run({filled({4, 3}, 0), filled({3}, 10)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ((*out)[0].shape(), (std::vector<int64_t>{4, 3}));
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_FLOAT_EQ(static_cast<const float*>((*out)[0].data())[i], static_cast<float>(i) * 2.5f + 10 + i % 3);
  auto bad = exe.run({filled({7, 3}, 0), filled({3}, 10)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("plugin 'tests::Axpy/2': seven rows are refused"), std::string::npos)
      << bad.status().message();
}

// A plugin that runs the executable running it would wait for that run forever: refused instead,
// and the executable runs normally afterwards.
TEST(PluginProgram, an_executable_run_from_its_own_plugin_is_refused_not_a_deadlock) {
  const std::string key = plugin_key("Reenters", "1", "tests");
  std::shared_ptr<Executable> exe;
  Status inner = ok_status();
  register_plugin(key, PluginDef{[&](const std::vector<Tensor>& in, const Tensor& out, const std::string& fields) {
                                   if (exe && inner.ok()) {
                                     inner = exe->run({filled({2, 3}, 0), filled({3}, 10)}).status();
                                     if (inner.ok()) inner = internal_error("the nested run did not fail");
                                   }
                                   return axpy(in, out, fields);
                                 },
                                 "", "", 256});
  exe = std::make_shared<Executable>(make_executable(std::make_shared<Program>(axpy_program(key)), {}, Device{}));
  auto out = exe->run({filled({4, 3}, 0), filled({3}, 10)});  // hung before
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(inner.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inner.message().find("already running on this thread"), std::string::npos) << inner.message();
  EXPECT_TRUE(exe->run({filled({4, 3}, 0), filled({3}, 10)}).ok());
}

TEST(PluginProgram, unregistered_plugin_is_refused_when_it_runs) {
  Program p = axpy_program(plugin_key("NeverRegistered"));
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  auto out = exe.run({filled({2, 3}, 0), filled({3}, 0)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("'::NeverRegistered/1' is not registered in this process"), std::string::npos)
      << out.status().message();
}

TEST(PluginProgram, attributes_round_trip_through_json) {
  Program p = axpy_program("ns::P/3");
  p.kernels[0].plugin.cuda_source = "extern \"C\" __global__ void k(PluginArgs a) {}";
  p.kernels[0].plugin.cuda_entry = "k";
  p.kernels[0].plugin.block = 64;
  Program back;
  ASSERT_TRUE(rt::program_from_json(rt::program_to_json(p), &back).ok());
  const rt::PluginAttrs& a = back.kernels[0].plugin;
  EXPECT_EQ(back.kernels[0].kind, KernelKind::kPlugin);
  EXPECT_EQ(a.name, "ns::P/3");
  EXPECT_EQ(a.fields, R"({"scale": 2.5})");
  EXPECT_EQ(a.cuda_source, p.kernels[0].plugin.cuda_source);
  EXPECT_EQ(a.cuda_entry, "k");
  EXPECT_EQ(a.block, 64);
}

TEST(PluginProgram, validation_bounds_what_launches_can_describe) {
  auto rejects = [](const std::function<void(Program&)>& mutate, const std::string& expected) {
    Program p = axpy_program("x::y/1");
    mutate(p);
    Status st = rt::validate_program(p);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
  };
  rejects([](Program& p) { p.kernels[0].plugin.name.clear(); }, "names no plugin");
  rejects([](Program& p) { p.kernels[0].plugin.block = 4096; }, "block size outside [1, 1024]");
  rejects([](Program& p) { p.kernels[0].inputs.assign(9, 0); }, "at most 8 inputs and 1 output");
  rejects([](Program& p) { p.buffers[2].shape.assign(9, 1); }, "rank above 8");
}

}  // namespace
}  // namespace tripy

// Executable: input validation messages, shape checks, save/load and running on the CPU backend.
#include "tripy/executable.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "test_programs.h"

namespace tripy {
namespace {

using rt::testing::f32;

Executable exe_of(rt::Program p, Device device = Device{}) {
  return make_executable(std::make_shared<rt::Program>(std::move(p)), {}, device);
}

std::vector<float> values(const Tensor& t) {
  const float* p = static_cast<const float*>(t.data());
  return std::vector<float>(p, p + t.numel());
}

Status run_status(const Executable& exe, const std::vector<Tensor>& inputs) { return exe.run(inputs).status(); }

TEST(Executable, describes_its_inputs_and_outputs) {
  Executable exe = exe_of(rt::testing::rich_program());
  ASSERT_EQ(exe.inputs().size(), 2u);
  EXPECT_EQ(exe.inputs()[0].name, "x");
  EXPECT_EQ(exe.inputs()[0].dim_min, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(exe.inputs()[0].dim_opt, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(exe.inputs()[0].dim_max, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(exe.output_names().size(), 5u);
  EXPECT_EQ(exe.device(), Device{});
}

TEST(ExecutableInputs, wrong_count_names_the_arguments) {
  Executable exe = exe_of(rt::testing::rich_program());
  EXPECT_EQ(run_status(exe, {f32({2, 4}, std::vector<float>(8))}).message(),
            "Missing argument 'y': this executable takes 2 input(s) (x, y), but 1 were given.");
  Tensor y = f32({2}, {0, 0});
  EXPECT_EQ(run_status(exe, {f32({2, 4}, std::vector<float>(8)), y, y}).message(),
            "Too many arguments: this executable takes 2 input(s) (x, y), but 3 were given.");
}

TEST(ExecutableInputs, dtype_rank_and_bounds_are_checked) {
  Executable exe = exe_of(rt::testing::affine_program());
  int32_t ints[3] = {1, 2, 3};
  Status st = run_status(exe, {rt::testing::host_tensor(DType::kInt32, {3}, ints)});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "Argument 'x' has dtype int32, but this executable was compiled for float32.");
  EXPECT_EQ(run_status(exe, {f32({1, 3}, {1, 2, 3})}).message(),
            "Argument 'x' has rank 2, but this executable was compiled for rank 1.");
  st = run_status(exe, {f32({5}, {1, 2, 3, 4, 5})});
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(),
            "Argument 'x': dimension 0 has size 5, which is outside the range [1, 4] this executable was compiled for.");
  EXPECT_EQ(run_status(exe, {f32({0}, {})}).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(run_status(exe, {Tensor()}).message(), "Argument 'x' is not a tensor with data.");
}

TEST(ExecutableInputs, device_must_match) {
  Executable exe = exe_of(rt::testing::affine_program());
  float data[2] = {1, 2};
  Tensor on_gpu = Tensor::borrow(data, DType::kFloat32, {2}, Device{Device::Kind::kGpu, 0}, nullptr);
  EXPECT_EQ(run_status(exe, {on_gpu}).message(),
            "Argument 'x' is on gpu:0, but this executable runs on cpu. Copy it to cpu first.");
}

TEST(ExecutableInputs, named_dimensions_must_agree) {
  Executable exe = exe_of(rt::testing::rich_program());
  EXPECT_EQ(run_status(exe, {f32({2, 4}, std::vector<float>(8)), f32({3}, {0, 0, 0})}).message(),
            "Arguments 'x' (dimension 0) and 'y' (dimension 0) share the named dimension 'batch', but have sizes 2 and 3.");
}

TEST(ExecutableInputs, failed_shape_check_cites_its_source) {
  rt::Program p = rt::testing::rich_program();
  p.inputs[1].dim_names = {""};
  Status st = run_status(exe_of(p), {f32({2, 4}, std::vector<float>(8)), f32({3}, {0, 0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "x and y must have the same batch size.");
  ASSERT_TRUE(st.where());
  EXPECT_EQ(st.where()->at(0).file, "model.py");
  EXPECT_EQ(st.where()->at(0).line, 12);
  ASSERT_EQ(st.notes().size(), 1u);
  EXPECT_EQ(st.notes()[0].text, "At run time the sizes were 2 and 3.");
}

TEST(ExecutableInputs, inconsistent_program_is_caught_before_the_backend) {
  rt::Program p = rt::testing::rich_program();
  p.buffers[3].max_bytes = 64;  // too small for batch 8
  Executable exe = exe_of(p);
  Status st = run_status(exe, {f32({8, 4}, std::vector<float>(32)), f32({8}, std::vector<float>(8))});
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("buffer 3 (8, 4) needs 128 bytes, more than the 64 planned"), std::string::npos) << st.message();
}

TEST(Executable, missing_backend_is_unavailable) {
  if (rt::backend_for(Device::Kind::kGpu) != nullptr) GTEST_SKIP() << "this machine has a GPU backend";
  Executable exe = exe_of(rt::testing::affine_program(), Device{Device::Kind::kGpu, 0});
  float data[2] = {1, 2};
  Tensor on_gpu = Tensor::borrow(data, DType::kFloat32, {2}, Device{Device::Kind::kGpu, 0}, nullptr);
  Status st = run_status(exe, {on_gpu});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("runs on gpu:0"), std::string::npos) << st.message();
}

TEST(ExecutableCpu, runs_and_survives_save_and_load) {
  Executable exe = exe_of(rt::testing::affine_program());
  auto out = exe.run({f32({3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(values((*out)[0]), (std::vector<float>{3, 5, 7}));

  const std::string path = ::testing::TempDir() + "/affine.tpy";
  ASSERT_TRUE(exe.save(path).ok());
  auto loaded = Executable::load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  out = loaded->run({f32({4}, {0, -1, 0.5f, 10})});
  ASSERT_TRUE(out.ok()) << format_error(out.status());
  EXPECT_EQ(values((*out)[0]), (std::vector<float>{1, -1, 2, 21}));
  std::remove(path.c_str());
}

TEST(ExecutableInputs, shape_values_are_host_int64_scalars_inside_their_range) {
  Executable exe = exe_of(rt::testing::rows_program());
  ASSERT_EQ(exe.inputs().size(), 2u);
  EXPECT_EQ(exe.inputs()[0].kind, InputDesc::Kind::kTensor);
  const InputDesc& n = exe.inputs()[1];
  EXPECT_EQ(n.kind, InputDesc::Kind::kShapeValue);
  EXPECT_EQ(n.dtype, DType::kInt64);
  EXPECT_TRUE(n.dim_min.empty());
  EXPECT_EQ((std::vector<int64_t>{n.value_min, n.value_opt, n.value_max}), (std::vector<int64_t>{0, 2, 6}));

  const Tensor x = f32({2}, {1, 2});
  Status st = run_status(exe, {x, Tensor::host_int64(7)});
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(), "Argument 'n' has value 7, which is outside the range [0, 6] this executable was compiled for.");
  EXPECT_EQ(run_status(exe, {x, Tensor::host_int64(-1)}).code(), StatusCode::kOutOfRange);
  const int32_t narrow = 3;
  st = run_status(exe, {x, rt::testing::host_tensor(DType::kInt32, {}, &narrow)});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "Argument 'n' is a shape value: pass a 0-d int64 tensor in host memory (Tensor::host_int64), but got a "
            "tensor of dtype int32 and shape () on cpu.");
  int64_t value = 3;
  Tensor on_gpu = Tensor::borrow(&value, DType::kInt64, {}, Device{Device::Kind::kGpu, 0}, nullptr);
  EXPECT_NE(run_status(exe, {x, on_gpu}).message().find("on gpu:0"), std::string::npos);
  EXPECT_EQ(run_status(exe, {x, Tensor()}).message(), "Argument 'n' is not a tensor with data.");
}

TEST(ExecutableCpu, shape_values_size_the_outputs_before_and_after_reload) {
  Executable exe = exe_of(rt::testing::rows_program());
  auto bytes = exe.serialize();
  ASSERT_TRUE(bytes.ok());
  auto reloaded = Executable::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().message();
  EXPECT_EQ(reloaded->inputs()[1].kind, InputDesc::Kind::kShapeValue);
  EXPECT_EQ(reloaded->inputs()[1].value_max, 6);
  for (int64_t n : {0, 1, 4, 6}) {
    std::vector<float> want;
    for (int64_t r = 0; r < n; ++r) want.insert(want.end(), {1.5f, -2.0f});
    for (const Executable* e : {&exe, &reloaded.value()}) {
      auto out = e->run({f32({2}, {1.5f, -2.0f}), Tensor::host_int64(n)});
      ASSERT_TRUE(out.ok()) << format_error(out.status());
      EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{n, 2}));
      EXPECT_EQ(values((*out)[0]), want);
    }
  }
}

// The rich program's outputs computed directly.
std::vector<std::vector<float>> rich_reference(const std::vector<float>& x, const std::vector<float>& y, int64_t batch) {
  const float c0[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  std::vector<float> t(static_cast<size_t>(batch * 4)), tt(t.size()), dot(16), sums(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < 4; ++j) {
      const float v = x[b * 4 + j] * c0[j] + y[b];
      t[b * 4 + j] = v > 0.1f ? v : 0.1f;
      tt[j * batch + b] = t[b * 4 + j];
      sums[b] += t[b * 4 + j];
    }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float acc = 0;
      for (int64_t b = 0; b < batch; ++b) acc += tt[i * batch + b] * t[b * 4 + j];
      dot[i * 4 + j] = std::max(acc + c0[j], 0.0f);
    }
  std::vector<float> joined = dot;
  joined.insert(joined.end(), dot.begin(), dot.end());
  std::vector<float> picked(joined.begin() + 12, joined.begin() + 16);
  picked.insert(picked.end(), joined.begin(), joined.begin() + 4);
  return {t, tt, joined, picked, sums};
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << "at " << i;
}

TEST(ExecutableCpu, rich_program_matches_reference_before_and_after_reload) {
  Executable exe = exe_of(rt::testing::rich_program());
  auto bytes = exe.serialize();
  ASSERT_TRUE(bytes.ok());
  auto reloaded = Executable::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().message();
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> x(static_cast<size_t>(batch * 4)), y(static_cast<size_t>(batch));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
    for (size_t i = 0; i < y.size(); ++i) y[i] = 0.5f * static_cast<float>(i);
    const auto want = rich_reference(x, y, batch);
    for (const Executable* e : {&exe, &reloaded.value()}) {
      auto out = e->run({f32({batch, 4}, x), f32({batch}, y)});
      ASSERT_TRUE(out.ok()) << format_error(out.status());
      ASSERT_EQ(out->size(), 5u);
      EXPECT_EQ((*out)[1].shape(), (std::vector<int64_t>{4, batch}));
      EXPECT_EQ((*out)[3].shape(), (std::vector<int64_t>{2, 4}));
      for (size_t o = 0; o < 5; ++o) expect_near(values((*out)[o]), want[o]);
    }
  }
}

}  // namespace
}  // namespace tripy

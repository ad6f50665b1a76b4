// Layout kernels and program plumbing on the CPU backend: transpose, slice (negative steps),
// update_slice's row windows, concat, gather (and its out-of-range error), copy, alias and temp
// buffers across kernels.
#include <numeric>
#include <thread>

#include "cpu_test_util.h"

namespace tripy::cpu::testing {
namespace {

constexpr DType F = DType::kFloat32;

std::vector<float> iota_floats(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(CpuLayout, Transpose2DBlocked) {
  const int64_t R = 70, C = 45;
  ProgramBuilder b;
  int32_t x = b.input(F, {R, C}), o = b.output(F, {C, R});
  b.kernel(KernelKind::kTranspose, "transpose", {x}, {o}).transpose.perm = {1, 0};
  auto xv = iota_floats(R * C);
  auto out = b.run({f32({R, C}, xv)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto got = values<float>((*out)[0]);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < R; ++j) ASSERT_EQ(got[i * R + j], xv[j * C + i]);
}

TEST(CpuLayout, TransposeGeneralPermutationInt16) {
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  const std::vector<int64_t> perm = {2, 0, 3, 1};
  std::vector<int64_t> oshape;
  for (int64_t p : perm) oshape.push_back(shape[p]);
  ProgramBuilder b;
  int32_t x = b.input(DType::kFloat16, shape), o = b.output(DType::kFloat16, oshape);
  b.kernel(KernelKind::kTranspose, "transpose", {x}, {o}).transpose.perm = perm;
  std::vector<uint16_t> xv(120);
  std::iota(xv.begin(), xv.end(), uint16_t(0));
  auto out = b.run({make_tensor<uint16_t>(DType::kFloat16, shape, xv)});
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto got = values<uint16_t>((*out)[0]);
  int64_t at = 0;
  for (int64_t a = 0; a < oshape[0]; ++a)
    for (int64_t c = 0; c < oshape[1]; ++c)
      for (int64_t d = 0; d < oshape[2]; ++d)
        for (int64_t e = 0; e < oshape[3]; ++e) {
          int64_t idx[4];
          idx[perm[0]] = a;
          idx[perm[1]] = c;
          idx[perm[2]] = d;
          idx[perm[3]] = e;
          ASSERT_EQ(got[at++], xv[((idx[0] * 3 + idx[1]) * 4 + idx[2]) * 5 + idx[3]]);
        }
}

TEST(CpuLayout, SliceWithNegativeSteps) {
  // x[4, 6]; out = x[3:0:-2, 1:6:2] -> rows 3, 1; cols 1, 3, 5
  ProgramBuilder b;
  int32_t x = b.input(F, {4, 6}), o = b.output(F, {2, 3});
  Kernel& k = b.kernel(KernelKind::kSlice, "slice", {x}, {o});
  k.slice.starts = {b.slot(3), b.slot(1)};
  k.slice.steps = {b.slot(-2), b.slot(2)};
  auto out = b.run({f32({4, 6}, iota_floats(24))});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{19, 21, 23, 7, 9, 11}));
}

TEST(CpuLayout, SliceOutOfBoundsIsAnError) {
  ProgramBuilder b;
  int32_t x = b.input(F, {4}), o = b.output(F, {3});
  Kernel& k = b.kernel(KernelKind::kSlice, "slice_bad", {x}, {o});
  k.slice.starts = {b.slot(2)};
  k.slice.steps = {b.slot(1)};
  auto out = b.run({f32({4}, iota_floats(4))});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("slice_bad"), std::string::npos);
}

TEST(CpuLayout, UpdateSliceRowWindowsAndAWindowPastTheRowIsAnError) {
  // cache[2, 4, 2] gets rows 1..2 from [2, 2, 3] at row offset 1: each written row of 2 starts one
  // element into the update's row of 3.
  ProgramBuilder b;
  int32_t cache = b.input(F, {2, 4, 2}), up = b.input(F, {2, 2, 3}), start = b.input(DType::kInt32, {1});
  int32_t o = b.output(F, {2, 4, 2});
  Kernel& k = b.kernel(KernelKind::kUpdateSlice, "update_window", {cache, up, start}, {o});
  k.update_slice.axis = 1;
  k.update_slice.row_offset = 1;
  const Tensor at = make_tensor(DType::kInt32, {1}, std::vector<int32_t>{1});
  auto out = b.run({f32({2, 4, 2}, std::vector<float>(16, -1.0f)), f32({2, 2, 3}, iota_floats(12)), at});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]),
            (std::vector<float>{-1, -1, 1, 2, 4, 5, -1, -1, -1, -1, 7, 8, 10, 11, -1, -1}));
  // Two elements from offset 2 would read past a row of 3: refused before any byte moves.
  ProgramBuilder bad;
  cache = bad.input(F, {2, 4, 2}), up = bad.input(F, {2, 2, 3}), start = bad.input(DType::kInt32, {1});
  o = bad.output(F, {2, 4, 2});
  Kernel& kb = bad.kernel(KernelKind::kUpdateSlice, "update_window_bad", {cache, up, start}, {o});
  kb.update_slice.axis = 1;
  kb.update_slice.row_offset = 2;
  auto refused = bad.run({f32({2, 4, 2}, std::vector<float>(16, -1.0f)), f32({2, 2, 3}, iota_floats(12)), at});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("row offset 2"), std::string::npos) << refused.status().message();
}

TEST(CpuLayout, ConcatAlongMiddleAxis) {
  ProgramBuilder b;
  int32_t x = b.input(F, {2, 1, 2}), y = b.input(F, {2, 2, 2}), o = b.output(F, {2, 3, 2});
  b.kernel(KernelKind::kConcatenate, "concat", {x, y}, {o}).concatenate.axis = 1;
  auto out = b.run({f32({2, 1, 2}, {0, 1, 2, 3}), f32({2, 2, 2}, {10, 11, 12, 13, 14, 15, 16, 17})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17}));
}

TEST(CpuLayout, GatherRowsAndNegativeIndices) {
  ProgramBuilder b;
  int32_t x = b.input(F, {3, 2}), i = b.input(DType::kInt64, {2, 2}), o = b.output(F, {2, 2, 2});
  b.kernel(KernelKind::kGather, "gather", {x, i}, {o}).gather.axis = 0;
  auto out = b.run({f32({3, 2}, {0, 1, 10, 11, 20, 21}), make_tensor<int64_t>(DType::kInt64, {2, 2}, {2, 0, -1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
}

TEST(CpuLayout, GatherAlongLastAxisInt32Indices) {
  ProgramBuilder b;
  int32_t x = b.input(F, {2, 3}), i = b.input(DType::kInt32, {2}), o = b.output(F, {2, 2});
  b.kernel(KernelKind::kGather, "gather", {x, i}, {o}).gather.axis = 1;
  auto out = b.run({f32({2, 3}, {0, 1, 2, 3, 4, 5}), make_tensor<int32_t>(DType::kInt32, {2}, {2, 0})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{2, 0, 5, 3}));
}

TEST(CpuLayout, GatherOutOfRangeNamesIndexAndBound) {
  ProgramBuilder b;
  int32_t x = b.input(F, {3}), i = b.input(DType::kInt32, {2}), o = b.output(F, {2});
  Kernel& k = b.kernel(KernelKind::kGather, "gather_embedding", {x, i}, {o});
  k.source = 0;
  b.program().sources = {{{"model.py", 42, "forward"}}};
  auto out = b.run({f32({3}, {1, 2, 3}), make_tensor<int32_t>(DType::kInt32, {2}, {1, 5})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = out.status().message();
  EXPECT_NE(m.find("gather_embedding"), std::string::npos) << m;
  EXPECT_NE(m.find("index 5"), std::string::npos) << m;
  EXPECT_NE(m.find("size 3"), std::string::npos) << m;
  ASSERT_NE(out.status().where(), nullptr);
  EXPECT_EQ((*out.status().where())[0].line, 42);
}

TEST(CpuLayout, TempsAliasesConstantsAndCopyAcrossKernels) {
  // t = transpose(x) in the arena; a = alias of t as [6]; out = a + c (a constant); out2 = copy(a)
  ProgramBuilder b;
  int32_t x = b.input(F, {2, 3});
  int32_t t = b.temp(F, {3, 2});
  int32_t a = b.alias(t, {6});
  int32_t c = b.constant(f32({6}, {100, 200, 300, 400, 500, 600}));
  int32_t o = b.output(F, {6}), o2 = b.output(F, {6});
  b.kernel(KernelKind::kTranspose, "transpose", {x}, {t}).transpose.perm = {1, 0};
  Kernel& k = b.kernel(KernelKind::kFused, "fused_add", {a, c}, {o});
  k.fused.domain = b.dims({6});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0}, {0}};
  k.fused.instrs = {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kAdd, F, 0, 1)};
  k.fused.output_regs = {2};
  b.kernel(KernelKind::kCopy, "copy", {a}, {o2});
  for (int rep = 0; rep < 2; ++rep) {  // the arena is reused by the second run
    auto out = b.run({f32({2, 3}, {1, 2, 3, 4, 5, 6})});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{101, 204, 302, 405, 503, 606}));
    EXPECT_EQ(values<float>((*out)[1]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  }
}

TEST(CpuLayout, CopyFromAndToHostShareMemory) {
  Tensor t = f32({2}, {1, 2});
  auto d = rt::cpu_backend()->copy_from_host(t);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->data(), t.data());
  auto h = rt::cpu_backend()->copy_to_host(*d);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data(), t.data());
  EXPECT_TRUE(rt::cpu_backend()->available());
  EXPECT_EQ(rt::cpu_backend()->kind(), Device::Kind::kCpu);
}

TEST(CpuLayout, RegistryServesTheCpuBackend) {
  EXPECT_EQ(rt::backend_for(Device::Kind::kCpu), rt::cpu_backend());
  auto artifacts = rt::cpu_builder()->build(Program{}, {});
  ASSERT_TRUE(artifacts.ok());
  EXPECT_TRUE(artifacts->empty());
}

TEST(CpuLayout, ConcurrentRunsOfOneProgramAgree) {
  // Two threads share one LoadedProgram (and so its arena): runs must not interleave.
  ProgramBuilder b;
  int32_t x = b.input(F, {64, 64});
  int32_t t = b.temp(F, {64, 64});
  int32_t o = b.output(F, {64, 64});
  b.kernel(KernelKind::kTranspose, "transpose", {x}, {t}).transpose.perm = {1, 0};
  b.kernel(KernelKind::kTranspose, "transpose_back", {t}, {o}).transpose.perm = {1, 0};
  auto first = b.run({f32({64, 64}, iota_floats(64 * 64))});  // loads the program
  ASSERT_TRUE(first.ok());
  auto loaded = rt::cpu_backend()->load(std::make_shared<Program>(b.program()), {});
  ASSERT_TRUE(loaded.ok());
  LoadedProgram* lp = loaded->get();
  std::vector<int> bad(2, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<float> v = iota_floats(64 * 64);
        for (float& e : v) e += static_cast<float>(w * 10000 + rep);
        auto out = lp->run({f32({64, 64}, v)}, b.slots());
        if (!out.ok() || values<float>((*out)[0]) != v) ++bad[w];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad[0] + bad[1], 0);
}

}  // namespace
}  // namespace tripy::cpu::testing

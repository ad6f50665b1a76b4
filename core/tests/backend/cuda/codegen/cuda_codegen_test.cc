// CUDA code generation without a GPU: every test program's fused kernels and the layout module
// are generated and compiled with NVRTC for sm_90 (skipped where NVRTC cannot be loaded).
#include <gtest/gtest.h>

// Built only where the CUDA headers are (core/CMakeLists.txt defines TRIPY_WITH_CUDA then).
#if TRIPY_WITH_CUDA

#include <set>

#include "backend/cuda/codegen/cuda_builder.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "cuda_test_cases.h"

namespace tripy::cuda_testing {
namespace {

TEST(CudaCodegen, EveryTestKernelCompilesWithNvrtc) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<rt::cuda::IndexFunction> every_index_function;
  for (bool update : {false, true})
    for (int size : {1, 2, 4, 8})
      for (DType index : {DType::kInt32, DType::kInt64}) every_index_function.push_back({update, size, index});
  std::vector<std::string> sources{rt::cuda::layout_module_source(),
                                   rt::cuda::index_module_source(every_index_function),
                                   rt::cuda::fill_module_source()},
      names{"layout", "index", "fill"};
  std::set<std::string> seen;
  for (const GpuCase& c : all_cases()) {
    for (const rt::Kernel& k : c.program.kernels) {
      if (k.kind != rt::KernelKind::kFused) continue;
      auto g = rt::cuda::generate_fused(c.program, k);
      ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().message();
      if (seen.insert(g->source).second) {
        sources.push_back(g->source);
        names.push_back(c.name + ":" + g->function);
      }
    }
  }
  auto compiled = rt::cuda::compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < compiled->size(); ++i) {
    EXPECT_FALSE((*compiled)[i].cubin.empty()) << names[i];
    EXPECT_FALSE((*compiled)[i].ptx.empty()) << names[i];
  }
}

// TRIPY_NVRTC_OPTIONS reaches NVRTC (an option it does not know fails the compile, naming it) and
// the cache key (the cached cubin of the same source without it is not taken).
TEST(CudaCodegen, ExtraNvrtcOptionsReachTheCompiler) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  const std::string source = "extern \"C\" __global__ void tripy_extra_options_probe(float* x) { x[0] = 1.0f; }\n";
  ASSERT_TRUE(rt::cuda::compile_modules({source}, {"probe"}, 90).ok());
  setenv("TRIPY_NVRTC_OPTIONS", "--no-such-nvrtc-option", 1);
  auto bad = rt::cuda::compile_modules({source}, {"probe"}, 90);
  setenv("TRIPY_NVRTC_OPTIONS", " --Ofast-compile=mid ", 1);
  auto fast = rt::cuda::compile_modules({source}, {"probe"}, 90);
  unsetenv("TRIPY_NVRTC_OPTIONS");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TRIPY_NVRTC_OPTIONS is '--no-such-nvrtc-option'"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(fast.ok()) << fast.status().message();
}

TEST(CudaCodegen, IndexModuleHoldsOnlyTheFunctionsAsked) {
  const std::string src = rt::cuda::index_module_source(
      {{false, 2, DType::kInt32}, {true, 8, DType::kInt64}, {false, 2, DType::kInt32}, {false, 3, DType::kInt32}});
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("void tripy_gather_2_i32("), 1u);  // asked twice, defined once
  EXPECT_EQ(count("void tripy_update_8_i64("), 1u);
  EXPECT_EQ(count("__global__"), 2u);  // nothing else, and no 3-byte gather
}

TEST(CudaCodegen, IdenticalKernelsGiveIdenticalSources) {
  GpuCase a = softmax(DType::kFloat32, 6, 7), b = softmax(DType::kFloat32, 600, 70);
  b.program.kernels[0].name = "another_name";
  auto ga = rt::cuda::generate_fused(a.program, a.program.kernels[0]);
  auto gb = rt::cuda::generate_fused(b.program, b.program.kernels[0]);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_EQ(ga->source, gb->source);  // sizes are arguments: one compile serves every shape
}

// The case's program as the compiler builds one: every slot computed by its shape program.
rt::Program with_shape_program(const GpuCase& c) {
  rt::Program p = c.program;
  p.shape_program.clear();
  for (int64_t v : c.slots) p.shape_program.push_back({rt::ShapeInstr::Op::kConst, v, 0});
  return p;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CudaCodegen, FixedSizesLeaveOutTheRowLoopsTheLaunchCannotReach) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  // 1024 floats a row: the launch plans 128 to 256 threads of 4-wide loads (more on GPUs with more
  // SMs: 8 rows leave most idle), so the vector loop keeps the row in registers (no streaming
  // loop), and so does the scalar fallback (misaligned addresses; eight values a thread). 20000 a
  // row: both stream.
  const std::string vector_cached = "const int u = threadIdx.x + e *", vector_stream = "for (i64 u = threadIdx.x; u < U",
                    scalar_cached = "const i64 j = threadIdx.x + e *", scalar_plain = "for (i64 j = threadIdx.x; j < L";
  struct Case {
    GpuCase c;
    std::vector<std::string> kept, left_out;
  } cases[] = {{layernorm(8, 1024), {vector_cached, scalar_cached}, {vector_stream, scalar_plain}},
               {layernorm(2, 20000), {vector_stream, scalar_plain}, {vector_cached, scalar_cached}}};
  std::vector<std::string> sources, names;
  for (const Case& x : cases) {
    const rt::Program fixed = with_shape_program(x.c);
    // The rows vary (1 to 4x as many): the loops the sizes over the range reach stay, and the plain
    // loop, which any run may fall through to; nothing traps. The row length too: every loop stays.
    rt::Program rows = fixed, row_len = fixed;
    rows.shape_program[0] = {rt::ShapeInstr::Op::kInputDim, 0, 0};
    rows.inputs[0].dim_min[0] = 1;
    rows.inputs[0].dim_max[0] *= 4;
    row_len.shape_program[1] = {rt::ShapeInstr::Op::kInputDim, 0, 1};
    row_len.inputs[0].dim_max[1] += 1;
    auto gf = rt::cuda::generate_fused(fixed, fixed.kernels[0]);
    auto gd = rt::cuda::generate_fused(rows, rows.kernels[0]);
    auto gl = rt::cuda::generate_fused(row_len, row_len.kernels[0]);
    ASSERT_TRUE(gf.ok() && gd.ok() && gl.ok()) << x.c.name;
    EXPECT_EQ(count(gf->source, "__trap();"), x.left_out.size()) << x.c.name;
    EXPECT_EQ(count(gd->source, "__trap();") + count(gl->source, "__trap();"), 0u) << x.c.name;
    for (const std::string& loop : x.kept) {
      EXPECT_NE(gf->source.find(loop), std::string::npos) << x.c.name << loop;
      EXPECT_NE(gd->source.find(loop), std::string::npos) << x.c.name << loop;
    }
    EXPECT_NE(gd->source.find(scalar_plain), std::string::npos) << x.c.name;
    for (const std::string& loop : x.left_out) {  // but the plain loop, kept with dynamic rows (above)
      EXPECT_EQ(gf->source.find(loop), std::string::npos) << x.c.name << loop;
      EXPECT_EQ(gd->source.find(loop) != std::string::npos, loop == scalar_plain) << x.c.name << loop;
    }
    for (const std::string& loop : {vector_cached, vector_stream, scalar_cached, scalar_plain})
      EXPECT_NE(gl->source.find(loop), std::string::npos) << x.c.name << loop;
    for (const auto* g : {&gf, &gd, &gl}) {
      sources.push_back((*g)->source);
      names.push_back(x.c.name);
    }
  }
  auto compiled = rt::cuda::compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
}

TEST(CudaCodegen, WhereEveryAddressIsTheBackendsOwnTheScalarRowLoopsAreLeftOut) {
  // A LayerNorm reading constants into a fresh output: every address is one the backend allocated
  // (16-byte aligned whatever the caller does), so every launch takes the vector loop and the
  // scalar fallback is left out. Its inputs as the caller's tensors, or its output written into a
  // donated input, keep it (the scalar loop that holds the row: 1024 values over 128 threads or more).
  const std::string vector_cached = "const int u = threadIdx.x + e *",
                    scalar_cached = "const i64 j = threadIdx.x + e *";
  const GpuCase c = layernorm(8, 1024);
  const rt::Program given = with_shape_program(c);
  rt::Program owned = given, donated;
  for (int32_t b : owned.kernels[0].inputs) {
    rt::BufferDesc& d = owned.buffers[static_cast<size_t>(b)];
    ASSERT_EQ(d.kind, rt::BufferDesc::Kind::kInput);
    d.kind = rt::BufferDesc::Kind::kConstant;
    d.index = static_cast<int32_t>(owned.constants.size());
    owned.constants.push_back(c.inputs[owned.constants.size()]);
  }
  donated = owned;
  donated.buffers[static_cast<size_t>(donated.kernels[0].outputs[0])].donor = 0;
  for (const rt::Program* p : std::vector<const rt::Program*>{&given, &owned, &donated}) {
    const rt::Kernel& k = p->kernels[0];
    auto layout = rt::cuda::analyze_fused(*p, k);
    ASSERT_TRUE(layout.ok());
    auto launches = rt::cuda::plan_fused(*p, k, *layout, nullptr, c.slots, 132);
    ASSERT_TRUE(launches.ok() && launches->size() == 1);
    const bool aligned = p == &owned;
    EXPECT_EQ(rt::cuda::always_aligned(*p, launches->front()), aligned);
    auto g = rt::cuda::generate_fused(*p, k);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_NE(g->source.find(vector_cached), std::string::npos);
    EXPECT_EQ(g->source.find(scalar_cached) != std::string::npos, !aligned);
  }
}

TEST(CudaCodegen, EveryFixedRowKernelKeepsTheLoopsItsLaunchTakes) {
  // For every row reduction among the test programs, at their fixed sizes: the launch's plan says
  // which loop runs (the vector one when the addresses allow, else the scalar one), and that loop
  // must be in the source, not a trap.
  const std::string vector_cached = "const int u = threadIdx.x + e *", vector_stream = "for (i64 u = threadIdx.x; u < U",
                    scalar_cached = "const i64 j = threadIdx.x + e *", scalar_plain = "for (i64 j = threadIdx.x; j < L";
  int checked = 0;
  for (const GpuCase& c : all_cases()) {
    const rt::Program p = with_shape_program(c);
    for (const rt::Kernel& k : p.kernels) {
      if (k.kind != rt::KernelKind::kFused) continue;
      auto layout = rt::cuda::analyze_fused(p, k);
      ASSERT_TRUE(layout.ok()) << c.name;
      if (!layout->has_reduction) continue;
      auto launches = rt::cuda::plan_fused(p, k, *layout, nullptr, c.slots, 132);
      ASSERT_TRUE(launches.ok() && launches->size() == 1) << c.name;
      const rt::cuda::Launch& l = launches->front();
      const int64_t row_len = l.words[layout->misc_word(rt::cuda::FusedLayout::kMiscRowLen)];
      auto g = rt::cuda::generate_fused(p, k);
      ASSERT_TRUE(g.ok()) << c.name;
      if (l.vector_word >= 0) {
        const bool cached = row_len <= rt::cuda::FusedLayout::kRowCacheVector * layout->vec_width * l.block_x;
        EXPECT_NE(g->source.find(cached ? vector_cached : vector_stream), std::string::npos) << c.name;
      }
      const bool cached = !layout->has_iota && row_len <= rt::cuda::FusedLayout::kRowCacheScalar * l.block_x;
      if (!rt::cuda::always_aligned(p, l))  // else the vector loop always runs (the test above)
        EXPECT_NE(g->source.find(cached ? scalar_cached : scalar_plain), std::string::npos) << c.name;
      EXPECT_LE(count(g->source, "__trap();"), 2u) << c.name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 4);
}

TEST(CudaCodegen, ElementwiseKernelsOverSeveralAxesTakeWideLoadsWhereEveryRowStaysAligned) {
  // Broadcasts keep the axes of these kernels from merging: with 16 float16 values a row (two
  // wide loads) the launch plans the vector path; with 12 the rows would leave wide loads
  // misaligned, so it plans the scalar loop alone. A one-axis kernel keeps its vector path with a tail.
  int checked = 0;
  for (const GpuCase& c : all_cases()) {
    bool rows16 = c.name == "vector_rows_f16_16", rows12 = c.name == "vector_rows_f16_12";
    if (!rows16 && !rows12 && c.name != "vector_f16_scalar") continue;
    const rt::Program p = with_shape_program(c);
    const rt::Kernel& k = p.kernels[0];
    auto layout = rt::cuda::analyze_fused(p, k);
    ASSERT_TRUE(layout.ok()) << c.name;
    auto launches = rt::cuda::plan_fused(p, k, *layout, nullptr, c.slots, 132);
    ASSERT_TRUE(launches.ok() && launches->size() == 1) << c.name;
    EXPECT_EQ(launches->front().vector_word >= 0, !rows12) << c.name;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST(CudaCodegen, UndefinedOpIsAnError) {
  GpuCase c = elementwise(EwOp::kExp, DType::kInt32, DType::kInt32, 1);
  auto g = rt::cuda::generate_fused(c.program, c.program.kernels[0]);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("exp"), std::string::npos) << g.status().message();
}

TEST(CudaCodegen, UnavailableWithoutGpuIsClean) {
  // On machines without a GPU the backend must say so rather than crash.
  if (rt::cuda_backend()->available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(rt::cuda_backend()->available());
  EXPECT_EQ(rt::backend_for(Device::Kind::kGpu), nullptr);
}

TEST(CudaCodegen, LinkingTheBuildLayerRegistersTheGpuBuilder) {
  // Programs that link the compiler side (this test, Python) build for the GPU through the
  // registry; the runtime alone has no GPU builder (runtime_only_loads_and_runs checks that).
  EXPECT_EQ(rt::builder_for(Device::Kind::kGpu), rt::cuda_builder());
  EXPECT_NE(rt::builder_for(Device::Kind::kCpu), nullptr);
}

}  // namespace
}  // namespace tripy::cuda_testing

#endif  // TRIPY_WITH_CUDA

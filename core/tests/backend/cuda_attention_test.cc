// The CUDA attention kernels without a GPU: every variant (dtype x head size x causal x mask kind)
// generates and compiles with NVRTC for sm_90, the tensor-core kernel exactly where it applies;
// launch planning picks it only for layouts it can read. Skipped where NVRTC cannot be loaded.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_compile.h"

namespace tripy::rt::cuda {
namespace {

// q (2, 4, 100, D), k and v (2, 2, 70, D), out (2, 4, 100, D), an optional (1, 1, 100, 70) mask.
Program program(DType t, int64_t d, bool causal, MaskKind mask) {
  Program p;
  for (int64_t v : {int64_t{2}, int64_t{4}, int64_t{100}, d, int64_t{70}, int64_t{1}})
    p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  // slots: 0 B, 1 Hq / 4, 2 L, 3 D, 4 S, 5 one; Hkv is 2: reuse B's slot.
  p.buffers = {{BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}}, {BufferDesc::Kind::kTemp, 0, t, {0, 0, 4, 3}},
               {BufferDesc::Kind::kTemp, 0, t, {0, 0, 4, 3}}, {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}}};
  Kernel k;
  k.kind = KernelKind::kAttention;
  k.name = "attention";
  k.inputs = {0, 1, 2};
  k.outputs = {3};
  k.attention.causal = causal;
  k.attention.scale = 0.125;
  k.attention.mask = mask;
  if (mask != MaskKind::kNone) {
    p.buffers.push_back({BufferDesc::Kind::kTemp, 0, mask == MaskKind::kBool ? DType::kBool : t, {5, 5, 2, 4}});
    k.inputs.push_back(4);
  }
  p.kernels = {k};
  return p;
}

TEST(CudaAttention, EveryVariantCompilesWithNvrtc) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<std::string> sources, names;
  std::vector<bool> flash;
  // Each dtype and head size once, and every causal x mask combination at one of them.
  struct Variant {
    DType t;
    int64_t d;
    bool causal;
    MaskKind m;
  };
  std::vector<Variant> variants;
  for (DType t : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (int64_t d : {64, 128, 80}) variants.push_back({t, d, true, MaskKind::kBool});
  for (bool causal : {false, true})
    for (MaskKind m : {MaskKind::kNone, MaskKind::kAdditive}) variants.push_back({DType::kFloat16, 64, causal, m});
  for (const Variant& x : variants) {
    Program p = program(x.t, x.d, x.causal, x.m);
    auto g = generate_attention(p, p.kernels[0]);
    ASSERT_TRUE(g.ok()) << g.status().message();
    sources.push_back(g->source);
    names.push_back(std::string(dtype_name(x.t)) + "_d" + std::to_string(x.d) + (x.causal ? "_causal" : "") + "_m" +
                    std::to_string(static_cast<int>(x.m)));
    flash.push_back(x.t != DType::kFloat32 && x.d != 80);
  }
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < compiled->size(); ++i) {
    const std::string& ptx = (*compiled)[i].ptx;
    EXPECT_FALSE((*compiled)[i].cubin.empty()) << names[i];
    EXPECT_NE(ptx.find(".entry tripy_attention_generic"), std::string::npos) << names[i];
    EXPECT_EQ(ptx.find(".entry tripy_attention_flash") != std::string::npos, flash[i]) << names[i];
    if (flash[i]) {
      // The tensor-core path really uses the instructions it was written for.
      EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << names[i];
      EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans"), std::string::npos) << names[i];
      EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << names[i];
    }
  }
}

TEST(CudaAttention, PlanPicksFlashOnlyForLayoutsItReads) {
  Program p = program(DType::kFloat16, 64, true, MaskKind::kBool);
  const std::vector<int64_t> slots = {2, 4, 100, 64, 70, 1};
  auto l = plan_attention_words(p, p.kernels[0], true, slots);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->flash);
  EXPECT_EQ(l->grid, 2u * 4 * 1);  // 100 queries fit one block of 128
  EXPECT_FALSE(plan_attention_words(p, p.kernels[0], false, slots)->flash);  // no flash kernel compiled
  // q read with the head dim strided (a layout the tiles cannot copy): the generic kernel.
  p.kernels[0].attention.perms[AttentionAttrs::kQ] = {0, 1, 3, 2};
  p.buffers[0].shape = {0, 1, 3, 2};
  l = plan_attention_words(p, p.kernels[0], true, slots);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_FALSE(l->flash);
  EXPECT_EQ(l->grid, (100u + 3) / 4 * 2 * 4);
  // Sizes that break the rule never launch.
  p = program(DType::kFloat16, 64, true, MaskKind::kNone);
  p.buffers[1].shape[3] = 2;  // k's head size 100 vs q's 64
  EXPECT_FALSE(plan_attention_words(p, p.kernels[0], true, slots).ok());
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

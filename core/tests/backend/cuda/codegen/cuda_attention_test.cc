// The CUDA attention kernels without a GPU: every variant (dtype x head size x causal x mask kind,
// causal offsets of either dtype, many or few query rows per kv head) generates and compiles with
// NVRTC for sm_90, the tensor-core and split-KV kernels exactly where they apply; launch planning
// picks the flash kernel only for layouts it can read, and split-KV for decode sizes, with chunks
// that fill the GPU. Compiling is skipped where NVRTC cannot be loaded.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <cstdlib>
#include <tuple>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_kinds.h"
#include "backend/cuda/cuda_launch.h"
#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"

namespace tripy::rt::cuda {
namespace {

// q (B, Hq, L, D), k and v (B, Hkv, S, D), out like q, an optional (1, 1, L, S) mask (a causal
// offset: (1, 1, 1, 1) of `offset`); by default B 2, Hq 4, L 100, Hkv 2, S 70.
struct Sizes {
  int64_t b = 2, hq = 4, l = 100, hkv = 2, s = 70;
};
Program program(DType t, int64_t d, bool causal, MaskKind mask, Sizes z = {}, DType offset = DType::kInt32) {
  Program p;
  for (int64_t v : {z.b, z.hq, z.l, d, z.s, int64_t{1}, z.hkv})
    p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  // slots: 0 B, 1 Hq, 2 L, 3 D, 4 S, 5 one, 6 Hkv.
  p.buffers = {{BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}}, {BufferDesc::Kind::kTemp, 0, t, {0, 6, 4, 3}},
               {BufferDesc::Kind::kTemp, 0, t, {0, 6, 4, 3}}, {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}}};
  Kernel k;
  k.kind = KernelKind::kAttention;
  k.name = "attention";
  k.inputs = {0, 1, 2};
  k.outputs = {3};
  k.attention.causal = causal;
  k.attention.scale = 0.125;
  k.attention.mask = mask;
  if (mask == MaskKind::kCausalOffset) {
    p.buffers.push_back({BufferDesc::Kind::kTemp, 0, offset, {5, 5, 5, 5}});
    k.inputs.push_back(4);
  } else if (mask != MaskKind::kNone) {
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
  // Decode sizes (one query row) take split1 only; a GQA group of 4 heads, split16 only.
  struct Variant {
    DType t;
    int64_t d;
    bool causal;
    MaskKind m;
    Sizes z = {};
    DType offset = DType::kInt32;
  };
  const Sizes decode{1, 12, 1, 12, 1024}, gqa{1, 8, 1, 2, 300}, prefill{2, 4, 1024, 2, 1024};
  std::vector<Variant> variants;
  for (DType t : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (int64_t d : {64, 128, 80}) variants.push_back({t, d, true, MaskKind::kBool});
  variants.push_back({DType::kFloat16, 64, true, MaskKind::kNone, prefill});  // 128 query rows per CTA
  for (bool causal : {false, true})
    for (MaskKind m : {MaskKind::kNone, MaskKind::kAdditive}) variants.push_back({DType::kFloat16, 64, causal, m});
  for (DType t : {DType::kFloat16, DType::kFloat32}) variants.push_back({t, 64, false, MaskKind::kBool, decode});
  variants.push_back({DType::kBFloat16, 128, true, MaskKind::kAdditive, gqa});
  variants.push_back({DType::kFloat16, 80, false, MaskKind::kNone, gqa});
  // A causal offset (a KV cache's position, int32 or int64) on every path: flash, split1, split16
  // and the generic kernel (float32).
  const MaskKind co = MaskKind::kCausalOffset;
  variants.push_back({DType::kFloat16, 64, false, co, prefill, DType::kInt64});
  variants.push_back({DType::kBFloat16, 128, false, co, {}, DType::kInt32});
  variants.push_back({DType::kFloat16, 64, false, co, decode, DType::kInt32});
  variants.push_back({DType::kBFloat16, 128, false, co, gqa, DType::kInt64});
  variants.push_back({DType::kFloat32, 80, false, co, {}, DType::kInt64});
  // Query rows from 1 to 1024 (an input dim): split1, its tensor-core path and the flash kernel in
  // one module (their names must not collide).
  variants.push_back({DType::kBFloat16, 64, false, co, Sizes{1, 12, -1, 12, 1024}});
  std::vector<bool> split1, split16, tensor_split, generic;
  for (const Variant& x : variants) {
    Program p = program(x.t, x.d, x.causal, x.m, x.z, x.offset);
    const bool dynamic = x.z.l < 0;
    if (dynamic) {  // slot 2 (L) from input 0's dim 2, from 1 to 1024
      InputSpec q;
      q.dim_min = {1, 12, 1, x.d};
      q.dim_opt = {1, 12, 1, x.d};
      q.dim_max = {1, 12, 1024, x.d};
      p.inputs.push_back(q);
      p.shape_program[2] = {ShapeInstr::Op::kInputDim, 0, 2};
    }
    auto g = generate_attention(p, p.kernels[0]);
    ASSERT_TRUE(g.ok()) << g.status().message();
    sources.push_back(g->source);
    names.push_back(std::string(dtype_name(x.t)) + "_d" + std::to_string(x.d) + (x.causal ? "_causal" : "") + "_m" +
                    std::to_string(static_cast<int>(x.m)) + "_l" + std::to_string(x.z.l) + "_g" +
                    std::to_string(x.z.hq / x.z.hkv) + (x.m == co ? "_" + std::string(dtype_name(x.offset)) : ""));
    const int64_t rows = x.z.hq / x.z.hkv * (dynamic ? 1 : x.z.l), rows_hi = dynamic ? 1024 : rows;
    flash.push_back(x.t != DType::kFloat32 && x.d != 80 && rows_hi > kAttentionSplitRows);
    split1.push_back(rows == 1);
    split16.push_back(rows > 1 && rows <= kAttentionSplitRows);
    // Contiguous heads: flash and split-KV serve every size they are there for.
    generic.push_back(!flash.back() && !split1.back() && !split16.back());
    tensor_split.push_back((split1.back() || split16.back()) && x.t != DType::kFloat32 && x.d != 80);
  }
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < compiled->size(); ++i) {
    const std::string& ptx = (*compiled)[i].ptx;
    EXPECT_FALSE((*compiled)[i].cubin.empty()) << names[i];
    // Where every run takes the flash kernel or split-KV, the generic one is left out.
    EXPECT_EQ(ptx.find(".entry tripy_attention_generic") != std::string::npos, generic[i]) << names[i];
    EXPECT_EQ(ptx.find(".entry tripy_attention_flash") != std::string::npos, flash[i]) << names[i];
    EXPECT_EQ(ptx.find(".entry tripy_attention_split1(") != std::string::npos, split1[i]) << names[i];
    EXPECT_EQ(ptx.find(".entry tripy_attention_split16(") != std::string::npos, split16[i]) << names[i];
    // The tensor-core form's own entry points, beside the ones they serve.
    EXPECT_EQ(ptx.find(".entry tripy_attention_split1_tc(") != std::string::npos, split1[i] && tensor_split[i])
        << names[i];
    EXPECT_EQ(ptx.find(".entry tripy_attention_split16_tc(") != std::string::npos, split16[i] && tensor_split[i])
        << names[i];
    // The last block of each group merges, found with a counter that wraps back to zero.
    if (split1[i] || split16[i]) EXPECT_NE(ptx.find("atom.global.inc.u32"), std::string::npos) << names[i];
    // Split-KV's tensor-core path (float16/bfloat16, heads of 64 and 128) likewise.
    if (tensor_split[i]) EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans"), std::string::npos) << names[i];
    if (flash[i]) {
      // The tensor-core path really uses the instructions it was written for.
      EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << names[i];
      EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans"), std::string::npos) << names[i];
      EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << names[i];
    }
  }
}

TEST(CudaAttention, TheGenericKernelStaysWhereSomeRunMayTakeIt) {
  const Sizes prefill{2, 4, 1024, 2, 1024};
  auto has_generic = [](const Program& p) {
    auto g = generate_attention(p, p.kernels[0]);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return g.ok() && g->source.find("#define HAS_GENERIC 1\n") != std::string::npos;
  };
  // The query length from an input's dim, any of 1..1024 at run time.
  auto dynamic_length = [](Program p) {
    p.shape_program[2] = {ShapeInstr::Op::kInputDim, 0, 0};
    InputSpec length;
    length.dim_min = {1};
    length.dim_opt = {512};
    length.dim_max = {1024};
    p.inputs.push_back(length);
    return p;
  };
  const Program fixed = program(DType::kFloat16, 64, true, MaskKind::kNone, prefill);
  EXPECT_FALSE(has_generic(fixed));  // fixed sizes, contiguous: always flash
  // Contiguous heads of 64 keep every stride and offset a multiple of 8 elements at any length,
  // so every run takes the flash kernel: no generic one, and the plan agrees at each length.
  const Program dynamic = dynamic_length(fixed);
  EXPECT_FALSE(has_generic(dynamic));
  const AttentionFunctions flash_only{nullptr, reinterpret_cast<CUfunc_st*>(uintptr_t{16}), nullptr, nullptr};
  std::vector<int64_t> slots;
  for (int64_t length = 1; length <= 1024; length += 37) {
    std::vector<Tensor> inputs{Tensor::borrow(nullptr, DType::kFloat16, {length}, Device{Device::Kind::kGpu, 0}, nullptr)};
    dynamic.eval_shapes(inputs, slots);
    auto l = plan_attention_words(dynamic, dynamic.kernels[0], flash_only, slots, 132);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(l->path, AttentionLaunch::Path::kFlash) << length;
  }
  // No flash kernel for heads of 80 or for float32: the generic one serves every run.
  EXPECT_TRUE(has_generic(dynamic_length(program(DType::kFloat16, 80, true, MaskKind::kNone, prefill))));
  EXPECT_TRUE(has_generic(program(DType::kFloat32, 64, true, MaskKind::kNone, prefill)));
}

TEST(CudaAttention, OneQueryRowTakesTheFlashKernelWhereNoRunHasKeysToSplit) {
  // Self-attention of 1 to `keys` tokens (L = S, GPT-2's prefill compiled for a range): split1
  // would give a one-row run one block per head either way, so the module is the flash kernel alone
  // until the keys outnumber one split-KV block; then split1 joins it only where the compile is
  // tuned for one row (opt), not for a prefill's many.
  auto module = [](int64_t keys, int64_t opt) {
    Program p = program(DType::kFloat16, 64, true, MaskKind::kNone, Sizes{1, 12, 1, 12, 1});
    p.shape_program[2] = p.shape_program[4] = {ShapeInstr::Op::kInputDim, 0, 0};
    InputSpec length;
    length.dim_min = {1};
    length.dim_opt = {opt};
    length.dim_max = {keys};
    p.inputs.push_back(length);
    auto g = generate_attention(p, p.kernels[0]);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return g.ok() ? g->source : "";
  };
  const std::string short_keys = module(128, 128), long_prefill = module(4096, 4096), long_one_row = module(4096, 1);
  EXPECT_NE(short_keys.find("#define HAS_FLASH 1\n"), std::string::npos);
  EXPECT_NE(short_keys.find("#define HAS_SPLIT1 0\n"), std::string::npos);
  EXPECT_NE(short_keys.find("#define HAS_GENERIC 0\n"), std::string::npos);
  EXPECT_NE(long_prefill.find("#define HAS_FLASH 1\n"), std::string::npos);
  EXPECT_NE(long_prefill.find("#define HAS_SPLIT1 0\n"), std::string::npos);
  EXPECT_NE(long_one_row.find("#define HAS_FLASH 1\n"), std::string::npos);
  EXPECT_NE(long_one_row.find("#define HAS_SPLIT1 1\n"), std::string::npos);
  EXPECT_NE(long_one_row.find("#define HAS_GENERIC 0\n"), std::string::npos);
}

TEST(CudaAttention, ADecodeStepsModuleHasNoGenericKernel) {
  // One query row per head over a 1024-key cache, and a GQA group of 4: split-KV serves every run.
  const Sizes decode{1, 12, 1, 12, 1024}, gqa{1, 8, 1, 2, 300};
  for (const Sizes& z : {decode, gqa})
    for (DType t : {DType::kFloat16, DType::kFloat32}) {
      const Program p = program(t, 64, false, MaskKind::kCausalOffset, z);
      auto g = generate_attention(p, p.kernels[0]);
      ASSERT_TRUE(g.ok()) << g.status().message();
      EXPECT_NE(g->source.find("#define HAS_GENERIC 0\n"), std::string::npos) << dtype_name(t);
    }
}

// Stand-ins for loaded functions: the plan only asks which exist.
CUfunc_st* const kSome = reinterpret_cast<CUfunc_st*>(uintptr_t{16});
const AttentionFunctions kAll{kSome, kSome, kSome, kSome};
const AttentionFunctions kNoSplit{kSome, kSome, nullptr, nullptr};
const AttentionFunctions kGenericOnly{kSome, nullptr, nullptr, nullptr};

std::vector<int64_t> slots_of(int64_t d, Sizes z = {}) { return {z.b, z.hq, z.l, d, z.s, 1, z.hkv}; }

TEST(CudaAttention, FlashTakes128RowsPerBlockOnlyForLongSequencesOfHead64) {
  const Sizes long_sequence{2, 4, 1024, 2, 1024};
  struct Case {
    int64_t d;
    Sizes z;
    unsigned grid;
  } cases[] = {
      {64, long_sequence, 2u * 4 * (1024 / 128)},
      {64, {}, 2u * 4 * 2},                        // 100 queries: 64 rows per block
      {128, long_sequence, 2u * 4 * (1024 / 64)},  // head 128: always 64
  };
  for (const Case& c : cases) {
    Program p = program(DType::kFloat16, c.d, true, MaskKind::kNone, c.z);
    EXPECT_EQ(flash_wm(p, p.kernels[0], c.d), c.grid == 2u * 4 * (1024 / 128) ? 2 : 1) << c.d;
    auto l = plan_attention_words(p, p.kernels[0], kNoSplit, slots_of(c.d, c.z), 132);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_TRUE(l->flash) << c.d;
    EXPECT_EQ(l->grid, c.grid) << c.d << " x " << c.z.l;
  }
}

TEST(CudaAttention, PlanPicksFlashOnlyForLayoutsItReads) {
  Program p = program(DType::kFloat16, 64, true, MaskKind::kBool);
  const std::vector<int64_t> slots = slots_of(64);
  auto l = plan_attention_words(p, p.kernels[0], kAll, slots, 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->flash);
  EXPECT_EQ(l->grid, 2u * 4 * 2);  // 100 queries, a short sequence: two blocks of 64 rows per head
  EXPECT_FALSE(plan_attention_words(p, p.kernels[0], kGenericOnly, slots, 132)->flash);  // no flash kernel compiled
  // q read with the head dim strided (a layout the tiles cannot copy): the generic kernel.
  p.kernels[0].attention.perms[AttentionAttrs::kQ] = {0, 1, 3, 2};
  p.buffers[0].shape = {0, 1, 3, 2};
  l = plan_attention_words(p, p.kernels[0], kAll, slots, 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_FALSE(l->flash);
  EXPECT_EQ(l->grid, (100u + 3) / 4 * 2 * 4);
  // Sizes that break the rule never launch.
  p = program(DType::kFloat16, 64, true, MaskKind::kNone);
  p.buffers[1].shape[3] = 2;  // k's head size 100 vs q's 64
  EXPECT_FALSE(plan_attention_words(p, p.kernels[0], kAll, slots, 132).ok());
}

TEST(CudaAttention, DecodeSplitsTheKeysToFillTheGpu) {
  // GPT-2's decode step: 12 heads, one query each, 1024 cached keys. 2 waves of 132 SMs over 12
  // groups asks for 22 chunks; chunks of at least 256 keys allow 4.
  const Sizes decode{1, 12, 1, 12, 1024};
  Program p = program(DType::kFloat16, 64, false, MaskKind::kBool, decode);
  auto l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, decode), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
  EXPECT_EQ(l->splits, 4);
  EXPECT_EQ(l->grid, 12u * 4);
  EXPECT_EQ(l->workspace_bytes, 12 * 4 * 1 * (64 + 2) * 4);  // o, m and l per chunk, float32
  EXPECT_EQ(l->counters, 12);
  EXPECT_GE(l->vec_word, 0);  // K rows are read in 16-byte pieces
  // Without the split kernels (an older executable), the flash kernel.
  l = plan_attention_words(p, p.kernels[0], kNoSplit, slots_of(64, decode), 132);
  EXPECT_EQ(l->path, AttentionLaunch::Path::kFlash);
  // A short cache gets one chunk of every key; causal with one query row sees one key.
  Sizes shortcache = decode;
  shortcache.s = 20;
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, shortcache), 132);
  EXPECT_EQ(l->splits, 1);
  p = program(DType::kFloat16, 64, true, MaskKind::kNone, decode);
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, decode), 132);
  EXPECT_EQ(l->splits, 1);
  // Many groups (a batch of 64) leave one chunk each: the GPU is full already.
  Sizes batch = decode;
  batch.b = 64;
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, batch), 132);
  EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
  EXPECT_EQ(l->splits, 1);
}

TEST(CudaAttention, TheAlignedFormTakesTheTensorCoreKernelWithMoreWarpsWhereGroupsAreFew) {
  CUfunc_st* const tc1 = reinterpret_cast<CUfunc_st*>(uintptr_t{32});
  CUfunc_st* const tc16 = reinterpret_cast<CUfunc_st*>(uintptr_t{48});
  const AttentionFunctions fns{kSome, kSome, kSome, kSome, tc1, tc16};
  // Llama-3-8B's decode step: 32 q heads over 8 kv heads (4 rows a group), head 128, bfloat16.
  Sizes step{1, 32, 1, 8, 1024};
  Program p = program(DType::kBFloat16, 128, false, MaskKind::kCausalOffset, step);
  auto l = plan_attention_words(p, p.kernels[0], fns, slots_of(128, step), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->split_tc_fn, tc16);
  EXPECT_EQ(l->split_tc_threads, 256u);  // 8 groups on 132 SMs
  auto launches = attention_launches(p, p.kernels[0], fns, *l);
  ASSERT_TRUE(launches.ok()) << launches.status().message();
  EXPECT_EQ((*launches)[0].block_x, 128u);  // the unaligned form's CUDA-core kernel
  EXPECT_EQ((*launches)[0].vector_fn, tc16);
  EXPECT_EQ((*launches)[0].vector_block_x, 256u);
  // A batch of 8: 64 groups keep two blocks of 4 warps an SM.
  step.b = 8;
  l = plan_attention_words(p, p.kernels[0], fns, slots_of(128, step), 132);
  EXPECT_EQ(l->split_tc_threads, 128u);
  // One query a kv head takes split1's form; a head of 80 has none (nor has float32).
  const Sizes mha{1, 12, 1, 12, 1024};
  p = program(DType::kFloat16, 64, false, MaskKind::kCausalOffset, mha);
  EXPECT_EQ(plan_attention_words(p, p.kernels[0], fns, slots_of(64, mha), 132)->split_tc_fn, tc1);
  p = program(DType::kFloat16, 80, false, MaskKind::kCausalOffset, mha);
  EXPECT_EQ(plan_attention_words(p, p.kernels[0], fns, slots_of(80, mha), 132)->split_tc_fn, nullptr);
}

TEST(CudaAttention, SplitServesGroupsOfUpTo16RowsAndAnyLayout) {
  // GQA: 8 q heads share 2 kv heads, 2 queries each: 8 rows per kv head.
  const Sizes gqa{1, 8, 2, 2, 4000};
  Program p = program(DType::kFloat32, 80, false, MaskKind::kAdditive, gqa);
  auto l = plan_attention_words(p, p.kernels[0], kAll, slots_of(80, gqa), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
  EXPECT_EQ(l->split_rows, 8);
  // 2 groups ask for 132 chunks; at least 256 keys each allows 16 (of 256 keys).
  EXPECT_EQ(l->splits, 16);
  // 17 rows per kv head: the flash kernel's job (float16, head 64).
  p = program(DType::kFloat16, 64, false, MaskKind::kNone, Sizes{1, 17, 1, 1, 500});
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, Sizes{1, 17, 1, 1, 500}), 132);
  EXPECT_EQ(l->path, AttentionLaunch::Path::kFlash);
  // K read with the head strided: split-KV still, with element loads.
  const Sizes decode{1, 12, 1, 12, 1024};
  p = program(DType::kFloat16, 64, false, MaskKind::kNone, decode);
  p.kernels[0].attention.perms[AttentionAttrs::kK] = {0, 1, 3, 2};
  p.buffers[1].shape = {0, 6, 3, 4};
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, decode), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
  EXPECT_EQ(l->vec_word, -1);
  // TRIPY_ATTENTION_SPLIT=0 turns it off.
  setenv("TRIPY_ATTENTION_SPLIT", "0", 1);
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, decode), 132);
  unsetenv("TRIPY_ATTENTION_SPLIT");
  EXPECT_NE(l->path, AttentionLaunch::Path::kSplit);
}

TEST(CudaAttention, TheSplitKernelForGroupsUnrollsOnlyTheRowsTheSizesNeed) {
  // rows per kv head -> rows the kernel serves (NVRTC time grows with them).
  for (auto [heads, queries, capacity] : {std::tuple<int64_t, int64_t, int64_t>{2, 1, 2}, {3, 1, 4}, {4, 1, 4},
                                          {4, 2, 8}, {5, 2, 16}, {16, 1, 16}}) {
    const Sizes z{1, heads, queries, 1, 300};
    Program p = program(DType::kFloat16, 64, false, MaskKind::kNone, z);
    EXPECT_EQ(attention_split_capacity(p, p.kernels[0]), capacity) << heads << "x" << queries;
    auto g = generate_attention(p, p.kernels[0]);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_NE(g->source.find("#define SPLIT_RM " + std::to_string(capacity) + "\n"), std::string::npos);
    auto l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, z), 132);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
    EXPECT_EQ(l->split_rows, heads * queries);
  }
}

TEST(CudaAttention, ACausalOffsetNeverGoesToCudnnAndKeepsItsSplitPlan) {
  // The offset is read by the kernel: the plan (splits, workspace) is the bool mask's, made for the
  // whole cache, and the kernel divides the keys the offset leaves visible over those blocks.
  const Sizes decode{1, 12, 1, 12, 1024};
  Program p = program(DType::kFloat16, 64, false, MaskKind::kCausalOffset, decode);
  auto l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, decode), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->path, AttentionLaunch::Path::kSplit);
  EXPECT_EQ(l->splits, 4);
  // The offset is read alone: its address (often a small temporary) is left out of the check that
  // lets q, k and v be read in 16-byte pieces.
  auto launches = attention_launches(p, p.kernels[0], kAll, *l);
  ASSERT_TRUE(launches.ok()) << launches.status().message();
  for (const PtrWord& ptr : launches->front().ptrs) EXPECT_EQ(ptr.any_alignment, ptr.buffer == 4) << ptr.buffer;
  auto g = generate_attention(p, p.kernels[0]);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(g->source.find("#define MASK_KIND 3\n#define OFFSET_T int\n"), std::string::npos);
  Program wide = program(DType::kFloat16, 64, false, MaskKind::kCausalOffset, decode, DType::kInt64);
  g = generate_attention(wide, wide.kernels[0]);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(g->source.find("#define OFFSET_T long long\n"), std::string::npos);
  // Long prefills: cuDNN takes no mask of any kind (a causal offset is not its causal rule).
  const Sizes prefill{1, 8, 1024, 8, 1024};
  p = program(DType::kFloat16, 64, false, MaskKind::kCausalOffset, prefill);
  l = plan_attention_words(p, p.kernels[0], kAll, slots_of(64, prefill), 132);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->path, AttentionLaunch::Path::kFlash);
  EXPECT_FALSE(l->cudnn.has_value());
  // The offset must be one element.
  p.buffers[4].shape = {5, 5, 2, 5};
  EXPECT_FALSE(plan_attention_words(p, p.kernels[0], kAll, slots_of(64, prefill), 132).ok());
}


// A cache write (kUpdateSlice) of `src` into `cache` from `start` along `axis`, `row_offset`
// elements into each of src's rows; `out` the cache written.
Kernel cache_write(int32_t cache, int32_t src, int32_t start, int32_t out, int64_t axis, int64_t row_offset = 0) {
  Kernel k;
  k.kind = KernelKind::kUpdateSlice;
  k.name = "update";
  k.inputs = {cache, src, start};
  k.outputs = {out};
  k.update_slice.axis = axis;
  k.update_slice.row_offset = row_offset;
  return k;
}

// Attention of q (buffer 0) over the caches k and v with a causal offset, into `out`.
Kernel offset_attention(int32_t k, int32_t v, int32_t offset, int32_t out) {
  Kernel a;
  a.kind = KernelKind::kAttention;
  a.name = "attention";
  a.inputs = {0, k, v, offset};
  a.outputs = {out};
  a.attention.mask = MaskKind::kCausalOffset;
  return a;
}

// A cache write's, a copy's or an attention's launches (fake functions) at `slots`.
StatusOr<std::vector<Launch>> plan_fake(const Program& p, const Kernel& k, const AttentionFunctions& attention,
                                        const std::vector<int64_t>& slots) {
  static const LayoutFunctions layout{
      {update_function(2, DType::kInt32), reinterpret_cast<CUfunction>(uintptr_t{64})},
      {"tripy_copy_bytes", reinterpret_cast<CUfunction>(uintptr_t{80})}};
  return k.kind == KernelKind::kUpdateSlice ? plan_update_slice(p, k, layout, slots, 132)
         : k.kind == KernelKind::kAttention  ? plan_attention(p, k, attention, slots, 132)
                                             : plan_copy(p, k, layout, slots, 132);
}

// Llama-3-8B's decode step as the compiler leaves it: the caches (B, S, Hkv, D) written in place at
// `pos` from windows of the rotated q/k heads and of the qkv projection, then split-KV attention
// reading them through a transpose. Steps as the program plans them (fake functions).
struct DecodeLayer {
  Program p;
  std::vector<Step> steps;
  std::vector<KernelCode> code;
};
DecodeLayer decode_layer(bool in_place = true, bool one_start = true, int64_t queries = 1) {
  DecodeLayer d;
  Program& p = d.p;
  // slots: 0 B, 1 Hq, 2 L, 3 D, 4 S, 5 one, 6 Hkv, 7 q and k heads (40), 8 qkv heads (48).
  for (int64_t v : {int64_t{1}, int64_t{32}, queries, int64_t{128}, int64_t{1024}, int64_t{1}, int64_t{8},
                    int64_t{40}, int64_t{48}})
    p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  const DType t = DType::kBFloat16;
  p.inputs.resize(2);
  p.buffers = {{BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}},      // 0 q
               {BufferDesc::Kind::kInput, 0, t, {0, 4, 6, 3}},     // 1 k cache
               {BufferDesc::Kind::kInput, 1, t, {0, 4, 6, 3}},     // 2 v cache
               {BufferDesc::Kind::kTemp, 0, t, {0, 2, 7, 3}},      // 3 rotated q and k heads
               {BufferDesc::Kind::kTemp, 0, t, {0, 2, 8, 3}},      // 4 qkv
               {BufferDesc::Kind::kTemp, 0, DType::kInt32, {5}},   // 5 pos
               {BufferDesc::Kind::kAlias, 1, t, {0, 4, 6, 3}},     // 6 k cache written
               {BufferDesc::Kind::kAlias, 2, t, {0, 4, 6, 3}},     // 7 v cache written
               {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}},      // 8 out
               {BufferDesc::Kind::kTemp, 0, DType::kInt32, {5}},   // 9 another start
               {BufferDesc::Kind::kTemp, 0, DType::kInt32, {5, 5, 5, 5}}};  // 10 the causal offset
  if (!in_place) p.buffers[7] = {BufferDesc::Kind::kTemp, 0, t, {0, 4, 6, 3}};
  Kernel a = offset_attention(6, 7, 10, 8);
  a.attention.perms[AttentionAttrs::kK] = a.attention.perms[AttentionAttrs::kV] = {0, 2, 1, 3};
  p.kernels = {cache_write(1, 3, 5, 6, 1, 32 * 128), cache_write(2, 4, one_start ? 5 : 9, 7, 1, 40 * 128), a};
  const std::vector<int64_t> slots = {1, 32, queries, 128, 1024, 1, 8, 40, 48};
  CUfunc_st* const tc16 = reinterpret_cast<CUfunc_st*>(uintptr_t{48});
  d.code.resize(3);
  auto fn = [](uintptr_t i) { return reinterpret_cast<CUfunc_st*>(i); };
  d.code[2].attention = AttentionFunctions{fn(96), fn(112), fn(128), fn(144), nullptr, tc16};
  for (int32_t i = 0; i < 3; ++i) {
    Step s;
    s.kernel = i;
    auto l = plan_fake(p, p.kernels[static_cast<size_t>(i)], d.code[2].attention, slots);
    EXPECT_TRUE(l.ok()) << l.status().message();
    s.launches = std::move(l).value();
    // What the program writes into a write's error words (its record, tag and election word).
    if (i < 2)
      for (int w = 0; w < 3; ++w) s.launches.back().words[kGatherErrorWord + w] = 100 * (i + 1) + w;
    d.steps.push_back(std::move(s));
  }
  return d;
}

TEST(CudaAttention, ADecodeStepsCacheWritesFoldIntoItsSplitAttention) {
  DecodeLayer d = decode_layer();
  ASSERT_EQ(d.steps[2].launches.size(), 1u);
  const size_t words = d.steps[2].launches[0].words.size(), ptrs = d.steps[2].launches[0].ptrs.size();
  fold_cache_writes(d.p, d.code, d.steps);
  EXPECT_TRUE(d.steps[0].launches.empty());
  EXPECT_TRUE(d.steps[1].launches.empty());
  const Launch& l = d.steps[2].launches[0];
  ASSERT_EQ(l.words.size(), words);
  // The writes' sources (at their windows: k's heads after the 32 q heads, v's after those 40),
  // and the start, read alone (any alignment).
  ASSERT_EQ(l.ptrs.size(), ptrs + 3);
  EXPECT_EQ(l.ptrs[ptrs].buffer, 3);
  EXPECT_EQ(l.ptrs[ptrs].byte_offset, 32 * 128 * 2);
  EXPECT_EQ(l.ptrs[ptrs + 1].buffer, 4);
  EXPECT_EQ(l.ptrs[ptrs + 1].byte_offset, 40 * 128 * 2);
  EXPECT_EQ(l.ptrs[ptrs + 2].buffer, 5);
  EXPECT_TRUE(l.ptrs[ptrs + 2].any_alignment);
  EXPECT_FALSE(l.ptrs[ptrs].any_alignment);
  // The launch's last words: the source strides (batch, head, row, element) of k and v, then the
  // k write's error words.
  const std::vector<int64_t> tail(l.words.end() - 11, l.words.end());
  EXPECT_EQ(tail, (std::vector<int64_t>{40 * 128, 128, 40 * 128, 1, 48 * 128, 128, 48 * 128, 1, 100, 101, 102}));
  EXPECT_EQ(l.words[l.words.size() - 12], 1);  // one row appended
  EXPECT_EQ(l.words[l.words.size() - 13], 0);  // an int32 start
}

TEST(CudaAttention, CacheWritesStayWhereTheAttentionCannotTakeThem) {
  // Not in place (the old cache is read elsewhere), two starts, TRIPY_ATTENTION_APPEND=0, a
  // prefill's 200 queries (flash, not split-KV), and a source in bytes of the arena that the
  // attention's output takes (a program planned without keeping the sources until the attention
  // reads them): the writes keep their launches.
  for (int c = 0; c < 5; ++c) {
    if (c == 2) setenv("TRIPY_ATTENTION_APPEND", "0", 1);
    DecodeLayer d = decode_layer(c != 0, c != 1, c == 3 ? 200 : 1);
    if (c == 4) {
      d.p.buffers[4].offset = 0, d.p.buffers[4].max_bytes = 4096;  // qkv
      d.p.buffers[8].offset = 3072, d.p.buffers[8].max_bytes = 2048;  // out
    }
    const size_t ptrs = d.steps[2].launches.at(0).ptrs.size();
    fold_cache_writes(d.p, d.code, d.steps);
    unsetenv("TRIPY_ATTENTION_APPEND");
    EXPECT_EQ(d.steps[0].launches.size(), 1u) << c;
    EXPECT_EQ(d.steps[1].launches.size(), c == 0 ? 2u : 1u) << c;  // not in place: a copy first
    EXPECT_EQ(d.steps[2].launches.at(0).ptrs.size(), ptrs) << c;
  }
}

TEST(CudaAttention, GptTwosCacheWritesFoldAcrossTheSliceBetweenThem) {
  // GPT-2's decode layer: caches (B, H, S, D) written along S from one token's (B, H, 1, D) k and
  // v (each a slice copy of the qkv projection), the v slice between the k write and the v write.
  // slots: 0 B, 1 H, 2 one, 3 D, 4 S.
  Program p;
  for (int64_t v : {int64_t{2}, int64_t{12}, int64_t{1}, int64_t{64}, int64_t{1024}})
    p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  const DType t = DType::kFloat16;
  p.inputs.resize(2);
  p.buffers = {{BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}, 0, 4096},         // 0 q
               {BufferDesc::Kind::kInput, 0, t, {0, 1, 4, 3}},                  // 1 k cache
               {BufferDesc::Kind::kInput, 1, t, {0, 1, 4, 3}},                  // 2 v cache
               {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}, 4096, 4096},       // 3 k rows
               {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}, 8192, 4096},       // 4 v rows
               {BufferDesc::Kind::kTemp, 0, DType::kInt32, {2}, 12288, 256},    // 5 pos
               {BufferDesc::Kind::kAlias, 1, t, {0, 1, 4, 3}},                  // 6 k cache written
               {BufferDesc::Kind::kAlias, 2, t, {0, 1, 4, 3}},                  // 7 v cache written
               {BufferDesc::Kind::kTemp, 0, t, {0, 1, 2, 3}, 12544, 4096},      // 8 out
               {BufferDesc::Kind::kTemp, 0, DType::kInt32, {2, 2, 2, 2}, 16640, 256},   // 9 offset
               {BufferDesc::Kind::kTemp, 0, t, {0, 1, 4, 3}, 1 << 20, 1 << 22}};     // 10 a cache's copy
  Kernel slice;  // v's slice (its input is immaterial here: the q buffer)
  slice.kind = KernelKind::kCopy;
  slice.name = "slice";
  slice.inputs = {0};
  slice.outputs = {4};
  p.kernels = {cache_write(1, 3, 5, 6, 2), slice, cache_write(2, 4, 5, 7, 2), offset_attention(6, 7, 9, 8)};
  const std::vector<int64_t> slots = {2, 12, 1, 64, 1024};
  auto fn = [](uintptr_t i) { return reinterpret_cast<CUfunc_st*>(i); };
  std::vector<KernelCode> code(4);
  code[3].attention = AttentionFunctions{fn(96), fn(112), fn(128), fn(144), fn(160), nullptr};
  auto plan = [&](const Program& prog) {
    std::vector<Step> steps;
    for (int32_t i = 0; i < 4; ++i) {
      Step s;
      s.kernel = i;
      auto l = plan_fake(prog, prog.kernels[static_cast<size_t>(i)], code[3].attention, slots);
      EXPECT_TRUE(l.ok()) << l.status().message();
      s.launches = std::move(l).value();
      steps.push_back(std::move(s));
    }
    return steps;
  };
  std::vector<Step> steps = plan(p);
  fold_cache_writes(p, code, steps);
  EXPECT_TRUE(steps[0].launches.empty());
  EXPECT_EQ(steps[1].launches.size(), 1u);  // the slice between stays
  EXPECT_TRUE(steps[2].launches.empty());
  const Launch& l = steps[3].launches.at(0);
  // Rows of (batch, head) pairs: the source's batch stride is H rows, its head stride one row.
  const std::vector<int64_t> strides(l.words.end() - 11, l.words.end() - 3);
  EXPECT_EQ(strides, (std::vector<int64_t>{12 * 64, 64, 64, 1, 12 * 64, 64, 64, 1}));
  // A step between that reads the k cache, or writes the bytes of k's rows: no fold.
  for (int c = 0; c < 2; ++c) {
    Program q = p;
    if (c == 0) q.kernels[1].inputs = {6}, q.kernels[1].outputs = {10};
    else q.buffers[4].offset = 4096;
    steps = plan(q);
    fold_cache_writes(q, code, steps);
    EXPECT_EQ(steps[0].launches.size(), 1u) << c;
    EXPECT_EQ(steps[2].launches.size(), 1u) << c;
  }
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

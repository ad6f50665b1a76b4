// kWeightOnlyDot's CUDA side without a GPU: the variants' modules (dtype x bits x tile of rows)
// compiles with NVRTC holding its entry point, and the tensor-core tile's module the ring's beside
// it (skipped where NVRTC cannot be loaded), the ring runs the launch's aligned form where its
// steps divide K and the group, tiles
// from 8 rows of float16/bfloat16 x hold tensor-core products (mma.m16n8k16 of the weight
// dequantized into x's dtype) and the others none, and a kernel's tile follows the most rows its x
// may have. GPU runs against numpy and torch:
// tests/frontend/ops/test_weight_only_dot_gpu.py.
#include <tuple>

#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_weight_only_dot.h"

namespace tripy::rt::cuda {
namespace {

TEST(CudaWeightOnlyDot, EveryVariantCompilesWithNvrtc) {
  std::vector<std::string> sources, names;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int bits : {4, 8, kWeightOnlyE4M3})
      for (int mt : kWeightOnlyRowTiles) {
        if (t != DType::kBFloat16 && mt != 1 && mt != 8) continue;  // every tile once is enough
        GeneratedKernel g = weight_only_dot_module_source(t, bits, mt);
        EXPECT_EQ(g.function, weight_only_function(t, bits, mt));
        sources.push_back(g.source);
        names.push_back(g.function);
      }
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& ptx = (*compiled)[i].ptx;
    EXPECT_NE(ptx.find(".entry " + names[i] + "("), std::string::npos) << names[i];
    // The tensor-core tile of float16/bfloat16 x also holds the ring's entry point, the tile of
    // kWeightOnlyMmaRows rows (any dtype) the weight's dequantization, the tiles of 8 and 16 rows
    // of int4 weights and bfloat16 x the register-fed tile's, and that of 8 of int4, int8 and
    // float8 weights and bfloat16 x the one-row tile's (int8's for long and short rows) and the
    // K-sliced tile's shapes (each also in its gated output's fold form, for int4 and float8 weights
    // also in its norm, residual and normed gated output's, with the CUDA-core fold), that of 8 of int4 weights and bfloat16 x the many-rows tile's two shapes
    // and their layouts, and that of 16 the few-rows tile's, its layout and its K-sliced shapes
    // (for int4 and int8 weights those also in their fold forms, with the layout's and the
    // CUDA-core fold); no more.
    const int tile = weight_only_function_tile(names[i]);
    const bool ring = tile == kWeightOnlyMmaRows && names[i].find("_f32_") == std::string::npos;
    const bool dequantize = tile == kWeightOnlyMmaRows;
    const bool frag = names[i].find("_bf16_b4_") != std::string::npos && (tile == 8 || tile == 16);
    const bool int8 = names[i].find("_bf16_b8_") != std::string::npos;
    const bool float8 = names[i].find("_bf16_e4m3_") != std::string::npos;
    const bool one_row = (frag || int8 || float8) && tile == 8, many_rows = frag && tile == 8;
    const bool few_rows = (frag || int8 || float8) && tile == 16;
    size_t entries = 0;
    for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) ++entries;
    const size_t sliced = one_row ? std::size(kWeightOnlySliced) : 0;
    const size_t few_sliced = few_rows ? std::size(kWeightOnlyFewSliced) : 0;
    // The gated output's entry points: one a shape of 2 tiles or more (weight_only_gated_shape).
    const auto of_two_tiles = [](const WeightOnlySliced& s) { return s.tiles >= 2; };
    const size_t gated_shapes =
        static_cast<size_t>(std::count_if(std::begin(kWeightOnlySliced), std::end(kWeightOnlySliced), of_two_tiles));
    const size_t few_gated_shapes =
        static_cast<size_t>(std::count_if(std::begin(kWeightOnlyFewSliced), std::end(kWeightOnlyFewSliced), of_two_tiles));
    const size_t folds = few_rows && !float8 ? few_sliced + few_gated_shapes + 2 : 0;
    const size_t one_row_folds = one_row ? (int8 ? gated_shapes : 2 * sliced + 2 * gated_shapes) + 1 : 0;
    EXPECT_EQ(entries, 1u + ring + frag + one_row + (one_row && int8) + dequantize + 4 * many_rows + 2 * few_rows +
                           sliced + few_sliced + folds + one_row_folds)
        << names[i];
    for (size_t s = 0; s < few_sliced; ++s) {
      const int bits = frag ? 4 : int8 ? 8 : kWeightOnlyE4M3;
      std::vector<std::string> entries_of_s = {weight_only_few_sliced_function(DType::kBFloat16, bits, static_cast<int>(s))};
      if (folds)
        entries_of_s.insert(entries_of_s.end(),
                            {weight_only_few_sliced_fold_function(DType::kBFloat16, bits, static_cast<int>(s)),
                             weight_only_few_sliced_fold_function(DType::kBFloat16, bits, static_cast<int>(s), true),
                             weight_only_few_x_fold_function(DType::kBFloat16, bits),
                             weight_only_fold_rows_function(DType::kBFloat16, bits, 16)});
      for (const std::string& entry : entries_of_s) {
        EXPECT_EQ(weight_only_module_function(entry), names[i]);
        EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << entry;
      }
    }
    for (size_t s = 0; s < sliced; ++s) {
      const int bits = frag ? 4 : int8 ? 8 : kWeightOnlyE4M3;
      std::vector<std::string> entries_of_s = {weight_only_sliced_function(DType::kBFloat16, bits, static_cast<int>(s))};
      if (one_row_folds) {
        using F = WeightOnlySlicedFold;
        for (F fold : int8 ? std::vector<F>{F::kGate} : std::vector<F>{F::kNorm, F::kResidual, F::kGate, F::kNormGate})
          entries_of_s.push_back(weight_only_sliced_fold_function(DType::kBFloat16, bits, static_cast<int>(s), fold));
        entries_of_s.push_back(weight_only_fold_rows_function(DType::kBFloat16, bits, 8));
      }
      for (const std::string& entry : entries_of_s) {
        EXPECT_EQ(weight_only_module_function(entry), names[i]);
        EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << entry;
      }
    }
    if (few_rows)
      for (bool layout : {false, true}) {
        const int bits = frag ? 4 : int8 ? 8 : kWeightOnlyE4M3;
        const std::string entry = weight_only_few_rows_function(DType::kBFloat16, bits, layout);
        EXPECT_EQ(entry, names[i] + (layout ? "_few_x" : "_few"));
        EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << entry;
        EXPECT_EQ(weight_only_module_function(entry), names[i]);
      }
    if (many_rows)
      for (int x_rows : {64, 32})
        for (bool layout : {false, true}) {
          const std::string entry = weight_only_many_rows_function(DType::kBFloat16, 4, x_rows, layout);
          EXPECT_EQ(entry, names[i] + "_rows" + std::to_string(x_rows) + (layout ? "_x" : ""));
          EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << entry;
          EXPECT_EQ(weight_only_module_function(entry), names[i]);
        }
    if (ring) {
      EXPECT_NE(ptx.find(".entry " + names[i] + "_ring("), std::string::npos) << names[i];
      EXPECT_EQ(weight_only_module_function(names[i] + "_ring"), names[i]);
    }
    if (frag) {  // 32 weight rows a warp group at 16 rows of x: an entry point of another name
      const std::string entry = names[i] + (tile == 16 ? "_frag32" : "_frag");
      EXPECT_EQ(weight_only_frag_function(DType::kBFloat16, 4, tile), entry);
      EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << names[i];
      EXPECT_EQ(weight_only_module_function(entry), names[i]);
    }
    if (one_row) {
      const int bits = int8 ? 8 : float8 ? kWeightOnlyE4M3 : 4;
      EXPECT_EQ(weight_only_one_row_function(DType::kBFloat16, bits, kWeightOnlyOneRowMaxK), names[i] + "_row1");
      EXPECT_EQ(weight_only_one_row_function(DType::kBFloat16, bits, kWeightOnlyOneRowShortK + 64), names[i] + "_row1");
      // Short rows have an entry point of their own for int8 only.
      const std::string shorter = names[i] + (int8 ? "_row1_short" : "_row1");
      EXPECT_EQ(weight_only_one_row_function(DType::kBFloat16, bits, kWeightOnlyOneRowShortK), shorter);
      EXPECT_EQ(weight_only_one_row_function(DType::kBFloat16, bits, 128), shorter);
      EXPECT_EQ(ptx.find(".entry " + names[i] + "_row1_short("), int8 ? ptx.find(".entry " + shorter + "(") : std::string::npos);
      for (const std::string entry : {names[i] + "_row1", shorter}) {
        EXPECT_NE(ptx.find(".entry " + entry + "("), std::string::npos) << entry;
        EXPECT_EQ(weight_only_module_function(entry), names[i]);
      }
    }
    if (dequantize) {
      EXPECT_NE(ptx.find(".entry " + names[i] + "_dequantize("), std::string::npos) << names[i];
      EXPECT_EQ(weight_only_module_function(names[i] + "_dequantize"), names[i]);
    }
  }
  EXPECT_EQ(weight_only_dequantize_function(DType::kFloat16, 8), "tripy_weight_only_dot_f16_b8_m8_dequantize");
  EXPECT_EQ(weight_only_function(DType::kBFloat16, kWeightOnlyE4M3, 1), "tripy_weight_only_dot_bf16_e4m3_m1");
  // Before sm_89 float8 bytes convert without cvt's e4m3x2 form.
  const GeneratedKernel sm80 = weight_only_dot_module_source(DType::kBFloat16, kWeightOnlyE4M3, kWeightOnlyMmaRows);
  auto older = compile_modules({sm80.source}, {sm80.function}, 80);
  ASSERT_TRUE(older.ok()) << older.status().message();
  EXPECT_EQ(weight_only_ring_function(DType::kBFloat16, 4), "tripy_weight_only_dot_bf16_b4_m8_ring");
  EXPECT_EQ(weight_only_frag_function(DType::kBFloat16, 4, 16), "tripy_weight_only_dot_bf16_b4_m16_frag32");
  EXPECT_EQ(weight_only_frag_rows(8), 16);
  EXPECT_EQ(weight_only_frag_rows(16), 32);
  EXPECT_TRUE(weight_only_frag_tile(DType::kBFloat16, 4, 8));
  EXPECT_TRUE(weight_only_frag_tile(DType::kBFloat16, 4, 16));
  EXPECT_FALSE(weight_only_frag_tile(DType::kBFloat16, 4, 32));
  EXPECT_FALSE(weight_only_frag_tile(DType::kFloat16, 4, 8));
  EXPECT_FALSE(weight_only_frag_tile(DType::kBFloat16, 8, 8));
  EXPECT_TRUE(weight_only_frag_applies(DType::kBFloat16, 4, 16, 4096, 128));
  EXPECT_FALSE(weight_only_frag_applies(DType::kBFloat16, 4, 16, 4096, 64));   // half a chunk
  EXPECT_FALSE(weight_only_frag_applies(DType::kBFloat16, 4, 8, 4160, 4160));  // K off the chunks
  // The one-row tile: 8-row module, one row of x, K within its shared memory, chunks a group a
  // power of two.
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 1, 14336, 128));
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 1, 4096, 4096));
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 1, 14336, 14336));    // a group a row: 112 chunks
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, 8, 8, 1, 14336, 14336));    // int8 per output feature
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, 8, 8, 1, 4096, 64));        // int8 chunks of 64
  EXPECT_FALSE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 2, 4096, 128));      // two rows
  EXPECT_FALSE(weight_only_one_row_applies(DType::kBFloat16, 4, 16, 1, 4096, 128));     // the 16-row module
  EXPECT_FALSE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 1, 14464, 128));     // K past its memory
  EXPECT_FALSE(weight_only_one_row_applies(DType::kBFloat16, 4, 8, 1, 3840, 384));      // 3 chunks a group
  EXPECT_FALSE(weight_only_one_row_applies(DType::kBFloat16, 8, 8, 1, 4128, 4128));     // K off int8's chunks
  EXPECT_TRUE(weight_only_one_row_applies(DType::kBFloat16, kWeightOnlyE4M3, 8, 1, 4096, 4096));  // float8
  EXPECT_FALSE(weight_only_one_row_applies(DType::kFloat16, kWeightOnlyE4M3, 8, 1, 4096, 4096));  // float16 x
  EXPECT_FALSE(weight_only_one_row_applies(DType::kFloat16, 8, 8, 1, 4096, 4096));      // float16 x
  // The many-rows tile: int4 weights, bfloat16 x, whole chunks, kWeightOnlyGemmRows to
  // kWeightOnlyTileGemmRows rows (past them the dequantized weight's GEMM).
  EXPECT_TRUE(weight_only_many_rows_applies(DType::kBFloat16, 4, kWeightOnlyGemmRows, 4096, 128));
  EXPECT_TRUE(weight_only_many_rows_applies(DType::kBFloat16, 4, kWeightOnlyTileGemmRows, 384, 384));
  EXPECT_FALSE(weight_only_many_rows_applies(DType::kBFloat16, 4, kWeightOnlyGemmRows - 1, 4096, 128));
  EXPECT_FALSE(weight_only_many_rows_applies(DType::kBFloat16, 4, kWeightOnlyTileGemmRows + 1, 4096, 128));
  EXPECT_FALSE(weight_only_many_rows_applies(DType::kBFloat16, 4, 64, 4096, 64));  // half a chunk a group
  EXPECT_FALSE(weight_only_many_rows_applies(DType::kBFloat16, 8, 64, 4096, 4096));
  EXPECT_FALSE(weight_only_many_rows_applies(DType::kFloat16, 4, 64, 4096, 128));
  // The few-rows tile: int4, int8 or float8 weights, bfloat16 x, the 16-row module, whole chunks
  // (128 int4 or 64 8-bit values), a group a power-of-two number of them or the whole row.
  EXPECT_TRUE(weight_only_few_rows_applies(DType::kBFloat16, 4, 16, 4096, 128));
  EXPECT_TRUE(weight_only_few_rows_applies(DType::kBFloat16, 4, 16, 14336, 512));
  EXPECT_TRUE(weight_only_few_rows_applies(DType::kBFloat16, 4, 16, 14336, 14336));  // 112 chunks: the row
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kBFloat16, 4, 16, 3840, 384));    // 3 chunks a group
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kBFloat16, 4, 16, 4096, 64));     // half a chunk
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kBFloat16, 4, 8, 4096, 128));     // the 8-row module
  EXPECT_TRUE(weight_only_few_rows_applies(DType::kBFloat16, 8, 16, 4096, 4096));    // int8 per output feature
  EXPECT_TRUE(weight_only_few_rows_applies(DType::kBFloat16, kWeightOnlyE4M3, 16, 4160, 4160));  // 65 chunks of 64
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kBFloat16, 8, 16, 4096, 32));     // half a chunk a group
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kBFloat16, 8, 16, 4100, 4100));   // K off the chunks
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kFloat16, 4, 16, 4096, 128));     // float16 x
  EXPECT_FALSE(weight_only_few_rows_applies(DType::kFloat16, 8, 16, 4096, 4096));
  // Its shape on an H200 (132 multiprocessors) for Llama-3-8B's products: 64 rows of x a block for
  // qkv and gate/up at 128 rows, 32 (two warps a group of weight rows) for o and down, and qkv at 64.
  const auto shape = [](int64_t N, int64_t rows) {
    const WeightOnlyManyRows m = weight_only_many_rows_shape(N, rows, 132);
    return std::vector<int64_t>{m.x_rows, m.split, m.blocks};
  };
  EXPECT_EQ(shape(6144, 128), (std::vector<int64_t>{64, 1, 48 * 2}));
  EXPECT_EQ(shape(28672, 128), (std::vector<int64_t>{64, 1, 224 * 2}));
  EXPECT_EQ(shape(28672, 48), (std::vector<int64_t>{64, 1, 224}));
  EXPECT_EQ(shape(4096, 128), (std::vector<int64_t>{32, 2, 64 * 4}));
  EXPECT_EQ(shape(6144, 64), (std::vector<int64_t>{32, 2, 96 * 2}));
  EXPECT_EQ(shape(40, 100), (std::vector<int64_t>{32, 2, 1 * 4}));  // N under one block's weight rows
  // The kernel's shared memory holds the K the launch allows.
  const std::string source = weight_only_dot_module_source(DType::kBFloat16, 8, kWeightOnlyMmaRows).source;
  EXPECT_NE(source.find("#define WO_ROW_MAX_K " + std::to_string(kWeightOnlyOneRowMaxK) + "\n"), std::string::npos);
  EXPECT_NE(source.find("#define WO_ROW_SHORT_K " + std::to_string(kWeightOnlyOneRowShortK) + "\n"), std::string::npos);
  EXPECT_EQ(weight_only_module_function("tripy_weight_only_dot_bf16_b4_m8"), "tripy_weight_only_dot_bf16_b4_m8");
}

TEST(CudaWeightOnlyDot, TheRingRunsTheAlignedFormWhereKAndTheGroupAreWholeSteps) {
  // A step of the ring is 4 pieces of a row: 128 int4 or 64 int8 values.
  WeightOnlyProblem pr;
  pr.dtype = DType::kBFloat16, pr.bits = 4, pr.rows = 1, pr.N = 4096, pr.K = 4096, pr.row_bytes = 2048;
  pr.groups = 32, pr.group = 128, pr.zero = true;
  const CUfunction fn = reinterpret_cast<CUfunction>(0x10), ring = reinterpret_cast<CUfunction>(0x20);
  auto vector_fn = [&](const WeightOnlyProblem& p, int tile, CUfunction r) {
    StatusOr<Launch> l = weight_only_launch(p, tile, fn, 132, 2, r);
    EXPECT_TRUE(l.ok());
    return l.ok() ? l->vector_fn : fn;
  };
  EXPECT_EQ(vector_fn(pr, kWeightOnlyMmaRows, ring), ring);
  EXPECT_EQ(vector_fn(pr, kWeightOnlyMmaRows, nullptr), nullptr);  // a module without it
  EXPECT_EQ(vector_fn(pr, 1, ring), nullptr);                       // CUDA-core rows
  WeightOnlyProblem g64 = pr;
  g64.group = 64, g64.groups = 64;  // half a step
  EXPECT_EQ(vector_fn(g64, kWeightOnlyMmaRows, ring), nullptr);
  WeightOnlyProblem f32 = pr;
  f32.dtype = DType::kFloat32;
  EXPECT_EQ(vector_fn(f32, kWeightOnlyMmaRows, ring), nullptr);
  WeightOnlyProblem i8 = pr;
  i8.bits = 8, i8.row_bytes = 4096, i8.groups = 1, i8.group = 4096, i8.zero = false;
  EXPECT_EQ(vector_fn(i8, kWeightOnlyMmaRows, ring), ring);
  // Warp groups of 32 weight rows on the ring, 16 on the register-fed int4 tile of bfloat16 x
  // (split 2: 4 groups a block); float16 x has no such tile: asked for it, the launch runs the
  // tensor-core tile without either.
  using F = WeightOnlyForm;
  auto blocks = [&](const WeightOnlyProblem& p, F form) {
    StatusOr<Launch> l = weight_only_launch(p, kWeightOnlyMmaRows, fn, 132, 2, ring, form);
    return l.ok() ? l->vector_grid : 0u;
  };
  EXPECT_EQ(blocks(pr, F::kRing), 4096u / 128);
  EXPECT_EQ(blocks(pr, F::kFrag), 4096u / 64);
  EXPECT_EQ(blocks(pr, F::kOneRow), 4096u / 64);
  // The one-row tile at one row of int4 or int8 weights, and not at two.
  auto one_row = [&](const WeightOnlyProblem& p) {
    StatusOr<Launch> l = weight_only_launch(p, kWeightOnlyMmaRows, fn, 132, 2, ring, F::kOneRow);
    return l.ok() ? l->vector_fn : fn;
  };
  EXPECT_EQ(one_row(pr), ring);
  EXPECT_EQ(one_row(i8), ring);
  WeightOnlyProblem two = pr;
  two.rows = 2;
  EXPECT_EQ(one_row(two), nullptr);
  WeightOnlyProblem f16 = pr;
  f16.dtype = DType::kFloat16;
  EXPECT_EQ(vector_fn(f16, kWeightOnlyMmaRows, ring), ring);
  StatusOr<Launch> f16_frag = weight_only_launch(f16, kWeightOnlyMmaRows, fn, 132, 2, ring, F::kFrag);
  ASSERT_TRUE(f16_frag.ok());
  EXPECT_EQ(f16_frag->vector_fn, nullptr);
  EXPECT_EQ(f16_frag->vector_grid, 4096u / 64);
  // The tile of 16 rows: no ring; the register-fed tile where asked, two tiles of 16 rows of x, its
  // warp groups of 32 weight rows (split 2: 4 groups, 128 rows a block).
  WeightOnlyProblem r32 = pr;
  r32.rows = 32;
  StatusOr<Launch> own16 = weight_only_launch(r32, 16, fn, 132, 2, ring, F::kRing);
  StatusOr<Launch> frag16 = weight_only_launch(r32, 16, fn, 132, 2, ring, F::kFrag);
  ASSERT_TRUE(own16.ok() && frag16.ok());
  EXPECT_EQ(own16->vector_fn, nullptr);
  EXPECT_EQ(frag16->vector_fn, ring);
  EXPECT_EQ(frag16->vector_grid, 4096u / 128 * 2);
  EXPECT_EQ(own16->vector_grid, 4096u / 64 * 2);
}

TEST(CudaWeightOnlyDot, TilesFrom8RowsOfHalfPrecisionXHoldTensorCoreProducts) {
  // int4 and int8 pieces of bfloat16 x at each tile; float16 and float32 at 8 rows. The tensor-core
  // tiles hold both forms: grouped integer products (a packed fma makes int4 integers) and
  // dequantized values (a packed conversion into x's dtype).
  struct Variant {
    DType t;
    int bits, mt;
    const char* mma;  // the mma's operand types, or null: none
  };
  const Variant variants[] = {
      {DType::kBFloat16, 4, 1, nullptr},   {DType::kBFloat16, 4, 4, nullptr},
      {DType::kBFloat16, 4, 8, ".bf16.bf16"},
      {DType::kBFloat16, 4, 16, ".bf16.bf16"}, {DType::kBFloat16, 8, 32, ".bf16.bf16"},
      {DType::kFloat16, 4, 8, ".f16.f16"},  {DType::kFloat32, 4, 8, nullptr},
  };
  std::vector<std::string> sources, names;
  for (const Variant& v : variants) {
    GeneratedKernel g = weight_only_dot_module_source(v.t, v.bits, v.mt);
    sources.push_back(g.source);
    names.push_back(g.function);
  }
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& ptx = (*compiled)[i].ptx;
    const std::string mma = "mma.sync.aligned.m16n8k16.row.col.f32";
    if (variants[i].mma == nullptr) {
      EXPECT_EQ(ptx.find(mma), std::string::npos) << names[i];
    } else {
      const bool bf16 = variants[i].t == DType::kBFloat16;
      EXPECT_NE(ptx.find(mma + variants[i].mma + ".f32"), std::string::npos) << names[i];
      if (variants[i].bits == 4)  // two nibbles a word under an exponent: one mask-and-or (WoRaw4)
        EXPECT_NE(ptx.find("lop3.b32"), std::string::npos) << names[i] << ": int4 values made two a word";
      EXPECT_NE(ptx.find(bf16 ? "cvt.rn.bf16x2.f32" : "cvt.rn.f16x2.f32"), std::string::npos)
          << names[i] << ": the weight is dequantized into x's dtype";
    }
  }
}

TEST(CudaWeightOnlyDot, TensorCoreTilesNeedHalfPrecisionXAndWholePieces) {
  EXPECT_TRUE(weight_only_mma_applies(DType::kBFloat16, 4, 8, 4096, 128));
  EXPECT_TRUE(weight_only_mma_applies(DType::kFloat16, 8, 32, 4096, 4096));
  EXPECT_TRUE(weight_only_mma_applies(DType::kBFloat16, 8, 16, 48, 16));
  EXPECT_FALSE(weight_only_mma_applies(DType::kBFloat16, 4, 4, 4096, 128));  // fewer than 8 rows
  EXPECT_FALSE(weight_only_mma_applies(DType::kFloat32, 4, 32, 4096, 128));
  EXPECT_FALSE(weight_only_mma_applies(DType::kBFloat16, 4, 32, 4112, 16));  // pieces of 32 int4 values
  EXPECT_FALSE(weight_only_mma_applies(DType::kBFloat16, 4, 32, 4096, 48));  // a group inside a piece
  EXPECT_FALSE(weight_only_mma_applies(DType::kBFloat16, 8, 32, 200, 200));
  EXPECT_TRUE(weight_only_mma_applies(DType::kBFloat16, kWeightOnlyE4M3, 16, 4096, 4096));
  EXPECT_FALSE(weight_only_mma_applies(DType::kFloat16, kWeightOnlyE4M3, 16, 4104, 4104));  // 16 values a piece
}

// x (rows, K) of `t` times a (1024, K) weight of `bits` in groups of `group`, rows at most `most`.
// `x_bound`: x is a temporary, whose buffer has its largest bytes; else it is the program's input,
// whose buffer has none (as build_program writes it) and the output's bound holds.
struct DotOf {
  Program p;
  Kernel k;
};
DotOf dot_of(int64_t most, bool x_bound = false, DType t = DType::kBFloat16, int bits = 8, int64_t K = 4096,
             int64_t group = 4096) {
  DotOf d;
  Program& p = d.p;
  const int64_t es = dtype_size(t);
  p.shape_program = {{ShapeInstr::Op::kConst, K, 0}, {ShapeInstr::Op::kInputDim, 0, 0},
                     {ShapeInstr::Op::kConst, 1024, 0}};
  BufferDesc x, w, out;
  x.kind = x_bound ? BufferDesc::Kind::kTemp : BufferDesc::Kind::kInput;
  x.dtype = out.dtype = t;
  x.shape = {1, 0};
  x.max_bytes = x_bound ? most * K * es : 0;
  w.kind = BufferDesc::Kind::kConstant;
  w.dtype = DType::kInt8;
  w.shape = {2, 0};
  out.kind = BufferDesc::Kind::kOutput;
  out.shape = {1, 2};
  out.max_bytes = x_bound ? 0 : most * 1024 * es;
  p.buffers = {x, w, out};
  d.k.kind = KernelKind::kWeightOnlyDot;
  d.k.inputs = {0, 1};
  d.k.outputs = {2};
  d.k.weight_only_dot.bits = bits;
  d.k.weight_only_dot.group_size = group;
  return d;
}

int tile_for(int64_t most, bool x_bound = false) {
  DotOf d = dot_of(most, x_bound);
  return weight_only_row_tile(d.p, d.k);
}

TEST(CudaWeightOnlyDot, TheTileHoldsTheMostRowsUpTo32ThenIsTheTensorCoreTile) {
  EXPECT_EQ(tile_for(1), 1);
  EXPECT_EQ(tile_for(3), 4);
  EXPECT_EQ(tile_for(16), 16);
  EXPECT_EQ(tile_for(17), 32);
  EXPECT_EQ(tile_for(32), 32);
  EXPECT_EQ(tile_for(33), 8);    // a prefill: its few rows on tensor cores, many through the GEMM
  EXPECT_EQ(tile_for(2048), 8);
  EXPECT_EQ(tile_for(16, /*x_bound=*/true), 16);
  EXPECT_EQ(tile_for(1, /*x_bound=*/true), 1);
  for (int mt : kWeightOnlyRowTiles) EXPECT_LE(mt * weight_only_weight_rows(mt), 32) << mt;
}

TEST(CudaWeightOnlyDot, AGatedOutputsRowsAreItsBytesOverHalfTheWeightRows) {
  // 16 rows of a gated output are 16 x 512 values: over N (1024) they would read as 8 rows.
  DotOf d = dot_of(16);
  d.k.weight_only_dot.gate_output = true;
  d.p.buffers[2].max_bytes /= 2;
  EXPECT_EQ(weight_only_row_tile(d.p, d.k), 16);
  d.p.buffers[2].max_bytes /= 2;
  EXPECT_EQ(weight_only_row_tile(d.p, d.k), 8);
}

std::vector<int> tiles_to_time(int64_t most, DType t, int bits, int64_t K, int64_t group) {
  DotOf d = dot_of(most, false, t, bits, K, group);
  return weight_only_tiles_to_time(d.p, d.k);
}

TEST(CudaWeightOnlyDot, FewRowsAlsoTimeTheTensorCoreTile) {
  using V = std::vector<int>;
  EXPECT_EQ(tiles_to_time(1, DType::kBFloat16, 4, 4096, 128), (V{1, 8}));  // a decode step
  EXPECT_EQ(tiles_to_time(4, DType::kFloat16, 4, 4096, 128), (V{4, 8}));
  EXPECT_EQ(tiles_to_time(4, DType::kFloat16, 8, 4096, 4096), (V{4}));  // int8: its own tile only
  EXPECT_EQ(tiles_to_time(16, DType::kBFloat16, 4, 4096, 128), (V{16, 8}));  // and two tiles of the ring
  EXPECT_EQ(tiles_to_time(32, DType::kFloat16, 8, 4096, 4096), (V{32, 8}));
  EXPECT_EQ(tiles_to_time(16, DType::kBFloat16, 4, 4096, 32), (V{16}));  // groups inside a ring step
  EXPECT_EQ(tiles_to_time(1, DType::kFloat32, 4, 4096, 128), (V{1}));     // no float32 mma
  EXPECT_EQ(tiles_to_time(1, DType::kBFloat16, 4, 4112, 16), (V{1}));     // pieces do not fit K
  DotOf f8 = dot_of(1, false, DType::kBFloat16, 8, 4096, 4096);
  f8.p.buffers[1].dtype = DType::kFloat8E4M3;  // float8 values, whose fragments are cheaper than int8's
  EXPECT_EQ(weight_only_tiles_to_time(f8.p, f8.k), (V{1, 8}));
}

TEST(CudaWeightOnlyDot, AFileNamingAnotherFormatsEntryPointIsRejected) {
  // int8 bytes read by an int4 entry point (or float8 values as integers) would take other row
  // lengths: the load refuses before it looks in the module.
  DotOf d = dot_of(1);
  KernelCode code;
  for (const std::string& bad :
       {weight_only_function(DType::kBFloat16, 4, 1), weight_only_function(DType::kFloat16, 8, 1),
        weight_only_function(DType::kBFloat16, kWeightOnlyE4M3, 1)}) {
    const Status st = load_weight_only_dot(d.p, d.k, nullptr, bad, code);
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << bad;
    EXPECT_NE(st.message().find("not one for its x and weight"), std::string::npos) << st.message();
  }
  d.p.buffers[1].dtype = DType::kFloat8E4M3;  // a float8 weight: its e4m3 entry points, no int8 one
  EXPECT_EQ(load_weight_only_dot(d.p, d.k, nullptr, weight_only_function(DType::kBFloat16, 8, 1), code).code(),
            StatusCode::kDataLoss);
}

TEST(CudaWeightOnlyDot, AnEntryPointsNameGivesItsTile) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int bits : {4, 8, kWeightOnlyE4M3})
      for (int mt : kWeightOnlyRowTiles) EXPECT_EQ(weight_only_function_tile(weight_only_function(t, bits, mt)), mt);
  EXPECT_EQ(weight_only_function_tile("tripy_weight_only_dot_bf16_b4_m3"), 0);  // no such tile
  EXPECT_EQ(weight_only_function_tile("tripy_weight_only_dot_bf16_b4_m"), 0);
  EXPECT_EQ(weight_only_function_tile("tripy_gemv_bf16_m1_r4"), 0);
  EXPECT_EQ(weight_only_function_tile("tripy_weight_only_dot_bf16_b4_m99999999999"), 0);
}

// `rows` rows of bfloat16 x against an int4 weight [N, 4096] in groups of 128.
WeightOnlyProblem int4_problem(int64_t rows, int64_t N) {
  WeightOnlyProblem pr;
  pr.bits = 4;
  pr.rows = rows;
  pr.N = N;
  pr.K = 4096;
  pr.row_bytes = 2048;
  pr.group = 128;
  pr.groups = 32;
  return pr;
}

TEST(CudaWeightOnlyDot, OneRowOnTheTensorCoreTileRunsOneTileOfBlocks) {
  const WeightOnlyProblem pr = int4_problem(1, 4096);
  StatusOr<Launch> own = weight_only_launch(pr, 1, nullptr, 132), mma = weight_only_launch(pr, 8, nullptr, 132);
  ASSERT_TRUE(own.ok() && mma.ok());
  EXPECT_EQ(own->vector_grid, own->scalar_grid);  // CUDA cores either way
  // Tensor cores: 16 weight rows a warp group, 8 warps a block split until the grid covers the GPU twice.
  const int64_t split = mma->words[14], groups_per_block = 8 / split;  // WoArgs::mma_split
  EXPECT_GE(split, 1);
  EXPECT_EQ(mma->vector_grid, static_cast<unsigned>((4096 + 16 * groups_per_block - 1) / (16 * groups_per_block)));
  EXPECT_EQ(mma->words[5], 1);  // rows
  EXPECT_EQ(mma->vector_word, kWeightOnlyVecWord);
  // A timed split replaces the launch's own, on either path.
  for (int split : {1, 2, 4, 8}) {
    StatusOr<Launch> tuned = weight_only_launch(pr, 8, nullptr, 132, split);
    ASSERT_TRUE(tuned.ok());
    EXPECT_EQ(tuned->words[14], split);
    EXPECT_EQ(tuned->vector_grid, static_cast<unsigned>((4096 + 16 * (8 / split) - 1) / (16 * (8 / split))));
    EXPECT_EQ(weight_only_launch(pr, 1, nullptr, 132, split)->words[11], split);  // WoArgs::split
  }
}

TEST(CudaWeightOnlyDot, TheKSlicedTileTakesItsShapesTilesABlockAndItsWarps) {
  WeightOnlyProblem pr = int4_problem(1, 28672);
  pr.constant_weight = true;
  const CUfunction tile = reinterpret_cast<CUfunction>(&pr);  // a stand-in: the launch only holds it
  for (size_t i = 0; i < std::size(kWeightOnlySliced); ++i)
    for (int warps : kWeightOnlySlicedWarps) {
      const auto form = static_cast<WeightOnlyForm>(static_cast<int>(WeightOnlyForm::kSliced) + i);
      StatusOr<Launch> l = weight_only_launch(pr, 8, nullptr, 132, warps, tile, form);
      ASSERT_TRUE(l.ok());
      EXPECT_EQ(l->vector_fn, tile);
      EXPECT_EQ(l->vector_block_x, 32u * warps);
      EXPECT_EQ(l->vector_grid, 28672u / (16 * kWeightOnlySliced[i].tiles));
      EXPECT_EQ(l->words[14], 256);  // WoArgs::mma_split: only the early flag
      EXPECT_EQ(l->block_x, 256u);   // the CUDA-core rows where the addresses are off 16 bytes
    }
  // Where it does not apply (two rows of x, K off 128 values, groups of 64), the CUDA-core rows.
  const auto first = WeightOnlyForm::kSliced;
  for (auto [rows, K, group] : {std::tuple<int64_t, int64_t, int64_t>{2, 4096, 128}, {1, 4160, 4160}, {1, 4096, 64}}) {
    WeightOnlyProblem other = int4_problem(rows, 4096);
    other.K = K, other.group = group, other.groups = K / group, other.row_bytes = K / 2;
    StatusOr<Launch> l = weight_only_launch(other, 8, nullptr, 132, 8, tile, first);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->vector_fn, nullptr);
  }
  EXPECT_TRUE(weight_only_sliced_applies(DType::kBFloat16, 4, 8, 1, 14464, 14464));  // any K of whole chunks
  EXPECT_TRUE(weight_only_sliced_applies(DType::kBFloat16, 8, 8, 1, 4160, 4160));     // 65 chunks of 64 bytes
  EXPECT_FALSE(weight_only_sliced_applies(DType::kBFloat16, 4, 8, 1, 4160, 4160));    // 32.5 of 128 int4 values
  EXPECT_FALSE(weight_only_sliced_applies(DType::kFloat16, 4, 8, 1, 4096, 128));     // bfloat16 x only
  EXPECT_FALSE(weight_only_sliced_applies(DType::kBFloat16, 4, 8, 1, 4096, 384));    // 3 chunks a group
}

TEST(CudaWeightOnlyDot, AFoldedProductAtOneRowRunsTheKSlicedFoldOrAWarpAnOutputWithTheFoldsWords) {
  WeightOnlyProblem pr = int4_problem(1, 4096);
  pr.fold = true;
  int stand_ins[2];  // the launch only holds the functions
  const CUfunction tile = reinterpret_cast<CUfunction>(&stand_ins[0]), rows = reinterpret_cast<CUfunction>(&stand_ins[1]);
  StatusOr<Launch> l = weight_only_fold_launch(pr, rows, tile, 132, 2, 16);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->vector_fn, tile);
  EXPECT_EQ(l->vector_block_x, 512u);
  EXPECT_EQ(l->vector_grid, 4096u / 32);  // 2 tiles of 16 weight rows a block
  EXPECT_EQ(l->fn, rows);                 // where an address is off the vector alignment: a warp an output
  EXPECT_EQ(l->block_x, 256u);
  EXPECT_EQ(l->scalar_grid, 4096u / 8);
  // WoFoldArgs: WoArgs, then gamma, the residual, gamma's dtype, eps and the gated output's width.
  EXPECT_EQ(l->words.size(), 21u);
  EXPECT_EQ(l->words[20], 0);
  // A gated output: N / 2 outputs, a block's tiles split between the halves (at least one each).
  pr.gate = true;
  for (size_t i = 0; i < std::size(kWeightOnlySliced); ++i) {
    StatusOr<Launch> g = weight_only_fold_launch(pr, rows, tile, 132, static_cast<int>(i), 4);
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->vector_grid, 2048u / (8 * std::max(kWeightOnlySliced[i].tiles, 2))) << i;
    EXPECT_EQ(kWeightOnlySliced[weight_only_gated_shape(static_cast<int>(i))].tiles, std::max(kWeightOnlySliced[i].tiles, 2));
    EXPECT_EQ(g->scalar_grid, 2048u / 8);
    EXPECT_EQ(g->words[20], 2048);
  }
  pr.gate = false;
  // Off the tile (K of half a chunk): no launch.
  pr.K = 4160, pr.group = 4160, pr.groups = 1, pr.row_bytes = 2080;
  EXPECT_FALSE(weight_only_fold_launch(pr, rows, tile, 132, 0, 0).ok());
  // Each fold its own entry point of the shape (a gated output's of one tile that of 2), in the
  // module of the shape's.
  using F = WeightOnlySlicedFold;
  const std::string shape = weight_only_sliced_function(DType::kBFloat16, 4, 1);
  const std::string two = weight_only_sliced_function(DType::kBFloat16, 4, 2);  // 2 tiles
  EXPECT_EQ(weight_only_sliced_fold_function(DType::kBFloat16, 4, 1, F::kNorm), shape + "_norm");
  EXPECT_EQ(weight_only_sliced_fold_function(DType::kBFloat16, 4, 1, F::kResidual), shape + "_residual");
  EXPECT_EQ(weight_only_sliced_fold_function(DType::kBFloat16, 4, 1, F::kGate), two + "_gate");
  EXPECT_EQ(weight_only_sliced_fold_function(DType::kBFloat16, 4, 1, F::kNormGate), two + "_norm_gate");
  EXPECT_EQ(weight_only_sliced_fold_function(DType::kBFloat16, 4, 2, F::kGate), two + "_gate");
  for (F fold : {F::kNorm, F::kResidual, F::kGate, F::kNormGate})
    EXPECT_EQ(weight_only_module_function(weight_only_sliced_fold_function(DType::kBFloat16, 4, 1, fold)),
              weight_only_module_function(shape));
  // The entry point the attributes ask for, where the format's module has it.
  WeightOnlyDotAttrs a;
  a.gate_output = true;
  EXPECT_EQ(weight_only_sliced_fold(a), F::kGate);
  EXPECT_TRUE(weight_only_sliced_fold_entry(8, a));
  a.norm = true;
  EXPECT_EQ(weight_only_sliced_fold(a), F::kNormGate);
  EXPECT_TRUE(weight_only_sliced_fold_entry(4, a));
  EXPECT_FALSE(weight_only_sliced_fold_entry(8, a));  // int8 folds no norm at one row
  a.norm = false, a.residual = true;
  EXPECT_FALSE(weight_only_sliced_fold_entry(4, a));  // a gated output adds no residual
}

TEST(CudaWeightOnlyDot, ProductsFoldANormOrResidualOrGateAtOneRowAndNormAndResidualAt9To16Rows) {
  struct Folds {
    bool norm = true, residual = false, gated = false, gate_output = false;
  };
  const auto fold = [](int64_t rows, int64_t K, int64_t group, int bits = 4, DType t = DType::kBFloat16,
                       Folds f = {}) {
    return weight_only_fold_applies(WeightOnlyFold{t, rows, K, group, bits, f.norm, f.gated, f.residual, f.gate_output});
  };
  EXPECT_TRUE(fold(16, 4096, 128));
  EXPECT_TRUE(fold(9, 4096, 4096, 8));
  EXPECT_TRUE(fold(12, 14336, 128));
  EXPECT_TRUE(fold(16, 4096, 128, 4, DType::kBFloat16, {true, true, false}));  // both at 16 rows
  EXPECT_TRUE(fold(1, 4096, 128));                                              // the norm at one row
  EXPECT_TRUE(fold(1, 14336, 128, 4, DType::kBFloat16, {false, true, false}));  // the residual
  EXPECT_FALSE(fold(1, 4096, 128, 4, DType::kBFloat16, {true, true, false}));  // not both at one row
  EXPECT_TRUE(fold(1, 14336, 14336, kWeightOnlyE4M3, DType::kBFloat16, {false, true, false}));  // float8
  EXPECT_FALSE(fold(1, 4096, 4096, kWeightOnlyE4M3, DType::kFloat16));  // bfloat16 x only
  EXPECT_FALSE(fold(1, 4096, 4096, 8));  // int8 at one row: its faster forms
  EXPECT_FALSE(fold(8, 4096, 128));                      // 2 to 8 rows: no fold form
  EXPECT_FALSE(fold(17, 4096, 128));                     // past the few-rows tile
  EXPECT_FALSE(fold(16, 4096, 4096, kWeightOnlyE4M3));   // float8: its kernels of their own
  EXPECT_FALSE(fold(16, 4096, 64));                      // half a chunk a group
  EXPECT_FALSE(fold(16, 4096, 128, 4, DType::kFloat16));  // bfloat16 x only
  EXPECT_FALSE(fold(16, -1, 128));                       // K unknown
  EXPECT_FALSE(fold(16, 4096, 128, 4, DType::kBFloat16, {false, false, true}));  // a SwiGLU's gate
  EXPECT_FALSE(fold(1, 4096, 128, 4, DType::kBFloat16, {false, false, true}));
  // A SwiGLU's gated output at one row: of int4, int8 or float8 weights, with the norm where the
  // format folds it, never with a residual.
  EXPECT_TRUE(fold(1, 4096, 128, 4, DType::kBFloat16, {true, false, false, true}));
  EXPECT_TRUE(fold(1, 4096, 4096, 8, DType::kBFloat16, {false, false, false, true}));
  EXPECT_FALSE(fold(1, 4096, 4096, 8, DType::kBFloat16, {true, false, false, true}));
  EXPECT_TRUE(fold(1, 4096, 4096, kWeightOnlyE4M3, DType::kBFloat16, {true, false, false, true}));
  EXPECT_FALSE(fold(1, 4096, 128, 4, DType::kBFloat16, {false, true, false, true}));
  EXPECT_TRUE(fold(16, 4096, 128, 4, DType::kBFloat16, {true, false, false, true}));   // and at 9 to 16 rows
  EXPECT_TRUE(fold(9, 4096, 4096, 8, DType::kBFloat16, {true, false, false, true}));
  EXPECT_FALSE(fold(16, 4096, 4096, kWeightOnlyE4M3, DType::kBFloat16, {false, false, false, true}));
  EXPECT_FALSE(fold(16, 4096, 128, 4, DType::kBFloat16, {false, true, false, true}));
  EXPECT_FALSE(fold(8, 4096, 128, 4, DType::kBFloat16, {false, false, false, true}));
  EXPECT_FALSE(fold(1, 4096, 64, 4, DType::kBFloat16, {false, false, false, true}));  // half a chunk a group
  // The few-rows layout keeps a double of x's squares a row and chunk for a folded product.
  WeightOnlyProblem pr = int4_problem(16, 4096);
  const int64_t plain = weight_only_few_rows_workspace(pr);
  pr.fold = true;
  EXPECT_EQ(weight_only_few_rows_workspace(pr), plain + 4096 / 128 * 16 * 8);
  // The CUDA-core fold: a warp an output of every row.
  int stand_in = 0;
  const Launch l = weight_only_fold_rows_launch(pr, reinterpret_cast<CUfunction>(&stand_in));
  EXPECT_EQ(l.grid, 16u * 4096 / 8);
  EXPECT_EQ(l.words.size(), 21u);  // WoFoldArgs: WoArgs, gamma, the residual, gamma's dtype, eps, the gate
}

TEST(CudaWeightOnlyDot, TheFewRowsKSlicedTileLaysXOutThenTakesItsTilesABlockAndItsWarps) {
  WeightOnlyProblem pr = int4_problem(16, 28672);
  pr.constant_weight = true;
  for (size_t i = 0; i < std::size(kWeightOnlyFewSliced); ++i)
    for (int warps : kWeightOnlySlicedWarps) {
      const std::vector<Launch> l = weight_only_few_sliced_launches(pr, nullptr, nullptr, 132, static_cast<int>(i), warps);
      ASSERT_EQ(l.size(), 2u);
      // The layout as the few-rows tile's; the tile RT tiles of 16 weight rows a block of `warps`.
      EXPECT_EQ(l[0].workspace_bytes, weight_only_few_rows_workspace(pr));
      EXPECT_EQ(l[1].workspace_word, kWeightOnlyXWord);
      EXPECT_EQ(l[1].block_x, 32u * warps);
      EXPECT_EQ(l[1].grid, 28672u / (16 * kWeightOnlyFewSliced[i].tiles));
      EXPECT_EQ(l[1].words[14], 256);  // WoArgs::mma_split: only the early flag
      EXPECT_TRUE(l[0].overlaps && l[1].overlaps);
    }
  // A gated output: 14336 outputs a row of x, each block's tiles split between the halves (at
  // least one each).
  pr.gate = true;
  for (size_t i = 0; i < std::size(kWeightOnlyFewSliced); ++i) {
    const std::vector<Launch> l = weight_only_few_sliced_launches(pr, nullptr, nullptr, 132, static_cast<int>(i), 8);
    EXPECT_EQ(l[1].grid, 14336u / (8 * std::max(kWeightOnlyFewSliced[i].tiles, 2))) << i;
  }
  EXPECT_EQ(weight_only_few_sliced_fold_function(DType::kBFloat16, 4, 0, true),
            weight_only_few_sliced_fold_function(DType::kBFloat16, 4, 1, true));  // 1 tile runs 2's
  const Launch rows = weight_only_fold_rows_launch(pr, nullptr);
  EXPECT_EQ(rows.grid, 16u * 14336 / 8);  // a warp an output
  EXPECT_EQ(rows.words[20], 14336);
}

TEST(CudaWeightOnlyDot, TheFewRowsTileLaysXOutThenReadsItFromTheWorkspace) {
  WeightOnlyProblem pr = int4_problem(16, 28672);
  pr.constant_weight = true;
  const std::vector<Launch> l = weight_only_few_rows_launches(pr, nullptr, nullptr, 132, 2);
  ASSERT_EQ(l.size(), 2u);
  // The layout: a thread a piece of 8 values of 16 rows, into the workspace (16 rows of x as
  // float16, then a pair of floats a row and chunk of 128), x read whole where aligned.
  EXPECT_EQ(l[0].workspace_word, kWeightOnlyOutWord);
  EXPECT_EQ(l[0].workspace_bytes, 16 * 4096 * 2 + 32 * 16 * 8);
  EXPECT_EQ(l[0].vector_word, kWeightOnlyVecWord);
  EXPECT_EQ(l[0].grid, grid_for(16 * 4096 / 8, 256, 132));
  // The tile reads x from there: 16 weight rows a group of 2 warps, 4 groups a block, and may read
  // the constant weight before its wait.
  EXPECT_EQ(l[1].workspace_word, kWeightOnlyXWord);
  EXPECT_EQ(l[1].grid, 28672u / 64);
  EXPECT_EQ(l[1].words[14], 2 | 256);  // WoArgs::mma_split with the early flag
  EXPECT_EQ(l[1].words[5], 16);        // rows
  EXPECT_TRUE(l[0].overlaps && l[1].overlaps);
  // The workspace rounds up to 256 bytes.
  pr.K = 128, pr.row_bytes = 64, pr.groups = 1, pr.group = 128;
  EXPECT_EQ(weight_only_few_rows_workspace(pr), 4352);  // 16 * 128 * 2 + 16 * 8 = 4224
  pr.bits = 8, pr.row_bytes = 128;                       // two chunks of 64 int8 values
  EXPECT_EQ(weight_only_few_rows_workspace(pr), 4352);   // 16 * 128 * 2 + 2 * 16 * 8 = 4352
}

TEST(CudaWeightOnlyDot, TheDequantizationWritesTheWorkspaceABlockAWeightRow) {
  WeightOnlyProblem pr = int4_problem(128, 28672);
  const Launch l = weight_only_dequantize_launch(pr, nullptr, 132);
  EXPECT_EQ(l.grid, 132u * 8);  // grid-stride over rows: at most 8 blocks a multiprocessor
  EXPECT_EQ(l.workspace_word, kWeightOnlyOutWord);
  EXPECT_EQ(l.workspace_bytes, 28672 * 4096 * 2);
  EXPECT_EQ(l.vector_word, kWeightOnlyVecWord);
  EXPECT_EQ(l.words[6], 28672);  // WoArgs::N
  EXPECT_EQ(l.words[10], 128);   // WoArgs::group
  // Fewer rows than the GPU's blocks: a block each; the bytes round up to the workspace's 256.
  pr.dtype = DType::kFloat16;
  pr.N = 10, pr.K = 7, pr.row_bytes = 4, pr.group = 7, pr.groups = 1;
  const Launch small = weight_only_dequantize_launch(pr, nullptr, 132);
  EXPECT_EQ(small.grid, 10u);
  EXPECT_EQ(small.workspace_bytes, 256);
}

TEST(CudaWeightOnlyDot, TheStoredChoiceIsReadBackAndADamagedOneIsIgnored) {
  for (int tile : kWeightOnlyRowTiles)
    for (int split : {1, 2, 4, 8})
      for (WeightOnlyForm form :
           {WeightOnlyForm::kRing, WeightOnlyForm::kFrag, WeightOnlyForm::kOneRow, WeightOnlyForm::kFewRows}) {
        const std::optional<WeightOnlyChoice> c = weight_only_choice(weight_only_choice_bytes({tile, split, form}));
        ASSERT_TRUE(c.has_value());
        EXPECT_EQ(c->tile, tile);
        EXPECT_EQ(c->split, split);
        EXPECT_EQ(c->form, form);
      }
  // The K-sliced tiles' shapes (one row, then few rows) store the warps a block (4, 8 or 16) as
  // their split.
  for (size_t i = 0; i < std::size(kWeightOnlySliced) + std::size(kWeightOnlyFewSliced); ++i)
    for (int warps : kWeightOnlySlicedWarps) {
      const WeightOnlyForm form = static_cast<WeightOnlyForm>(static_cast<int>(WeightOnlyForm::kSliced) + i);
      EXPECT_TRUE(weight_only_split_is_warps(form));
      const std::optional<WeightOnlyChoice> c = weight_only_choice(weight_only_choice_bytes({8, warps, form}));
      ASSERT_TRUE(c.has_value());
      EXPECT_EQ(c->split, warps);
      const bool few = i >= std::size(kWeightOnlySliced);
      EXPECT_EQ(weight_only_sliced_index(c->form), few ? -1 : static_cast<int>(i));
      EXPECT_EQ(weight_only_sliced_index(c->form, WeightOnlyForm::kFewSliced),
                few ? static_cast<int>(i - std::size(kWeightOnlySliced)) : -1);
      EXPECT_FALSE(weight_only_choice({'W', 8, 2, static_cast<uint8_t>(form)}).has_value());  // not 4, 8 or 16 warps
    }
  EXPECT_FALSE(weight_only_choice({'W', 8, 16, 2}).has_value());  // 16: the sliced tile's warps, not a split
  EXPECT_FALSE(weight_only_choice({'W', 8, 4, static_cast<uint8_t>(kWeightOnlyForms)}).has_value());
  // Saved before the register-fed tile: three bytes, the ring.
  const std::optional<WeightOnlyChoice> old = weight_only_choice({'W', 8, 4});
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->form, WeightOnlyForm::kRing);
  EXPECT_FALSE(weight_only_choice({}).has_value());
  EXPECT_FALSE(weight_only_choice({'W', 1}).has_value());
  EXPECT_FALSE(weight_only_choice({'W', 1, 3}).has_value());   // not a split of 8 warps
  EXPECT_FALSE(weight_only_choice({'W', 3, 2}).has_value());   // no such tile
  EXPECT_FALSE(weight_only_choice({'X', 1, 2}).has_value());
  EXPECT_FALSE(weight_only_choice({'W', 1, 2, 0, 0}).has_value());
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif

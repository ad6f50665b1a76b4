// kDot's GEMV tactic without a GPU: the module compiles with NVRTC for each dtype (skipped where
// NVRTC cannot be loaded) with every entry point the runtime looks up; a stored choice round-trips
// and is told apart from cuBLASLt's algorithms; which problems it takes; the launch's grid and the
// TMA form's tensor map. GPU runs against numpy (f16/bf16, M 1..16, tensor cores from 8, the TMA
// form, bias, activations, dynamic M, graph replays): tests/frontend/ops/test_matmul_gemv_gpu.py.
#include <gtest/gtest.h>

#include <set>
#include <string>

#if TRIPY_WITH_CUDA

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_gemv.h"

namespace tripy {
namespace {

using rt::cuda::DotProblem;

TEST(CudaGemv, EveryVariantCompilesWithNvrtc) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  const DType types[] = {DType::kFloat16, DType::kBFloat16};
  std::vector<std::string> sources, names;
  for (DType t : types)
    for (int tile : rt::cuda::kGemvRowTiles)
      for (int r : rt::cuda::kGemvWeightRows)
        if (rt::cuda::gemv_entry_exists(tile, r)) {
          sources.push_back(rt::cuda::gemv_module_source(t, tile, r));
          names.push_back(rt::cuda::gemv_function(t, tile, r));
        }
  for (DType t : types)
    for (int tile : rt::cuda::kGemvRowTiles)
      if (tile >= rt::cuda::kGemvMmaRows) {
        sources.push_back(rt::cuda::gemv_tma_module_source(t, tile));
        names.push_back(rt::cuda::gemv_tma_function(t, tile));
      }
  for (int arch : {80, 90}) {
    auto compiled = rt::cuda::compile_modules(sources, names, arch);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    // Each module holds its own entry point and no other; together, every one the runtime asks for.
    std::set<std::string> found;
    for (size_t i = 0; i < sources.size(); ++i)
      for (DType t : types)
        for (const std::string& f : rt::cuda::gemv_functions(t)) {
          const bool here = (*compiled)[i].ptx.find(".entry " + f + "(") != std::string::npos;
          EXPECT_EQ(here, f == names[i]) << "sm_" << arch << ": " << f;
          if (here) found.insert(f);
        }
    for (DType t : types)
      for (const std::string& f : rt::cuda::gemv_functions(t)) EXPECT_EQ(found.count(f), 1u) << f;
  }
}

// The rows read further ahead before the wait (TRIPY_GEMV_AHEAD) compile too, one row of x and
// two rows of w a group, where the register arrays grow most.
TEST(CudaGemv, DeeperEarlyReadsCompile) {
  if (!rt::cuda::nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<std::string> sources, names;
  for (int ahead : {2, 4, 8}) {
    sources.push_back(rt::cuda::gemv_module_source(DType::kBFloat16, 1, 2, ahead));
    names.push_back(rt::cuda::gemv_function(DType::kBFloat16, 1, 2));
    EXPECT_NE(sources.back().find(", " + std::to_string(ahead) + ">(a)"), std::string::npos) << ahead;
  }
  auto compiled = rt::cuda::compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (const auto& c : *compiled) EXPECT_FALSE(c.cubin.empty());
}

DotProblem decode_problem(int64_t rows);

TEST(CudaGemv, AStoredChoiceRoundTripsAndIsNoCublasLtAlgorithm) {
  std::vector<rt::cuda::GemvTactic> tactics = rt::cuda::gemv_tactics();
  for (rt::cuda::GemvTactic t : rt::cuda::gemv_tactics(decode_problem(8), 90)) tactics.push_back(t);
  for (rt::cuda::GemvTactic t : tactics) {
    const rt::cuda::AlgoBytes b = rt::cuda::gemv_choice_bytes(t);
    auto back = rt::cuda::gemv_choice(b);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->rows, t.rows);
    EXPECT_EQ(back->split, t.split);
    EXPECT_EQ(back->tma, t.tma);
  }
  EXPECT_FALSE(rt::cuda::gemv_choice({'G', 'E', 'M', 'V', 2, 1, 'T'}).has_value());  // the TMA form takes R 1
  EXPECT_FALSE(rt::cuda::gemv_choice({'G', 'E', 'M', 'V', 1, 1, 'X'}).has_value());
  EXPECT_FALSE(rt::cuda::gemv_choice(rt::cuda::AlgoBytes(64, 0)).has_value());  // a cublasLtMatmulAlgo_t
  EXPECT_FALSE(rt::cuda::gemv_choice(rt::cuda::AlgoBytes(65, 'P')).has_value());  // row phases
  EXPECT_FALSE(rt::cuda::gemv_choice({'G', 'E', 'M', 'V', 3, 1}).has_value());  // no such R
  EXPECT_FALSE(rt::cuda::gemv_choice({'G', 'E', 'M', 'V', 1, 3}).has_value());  // split must divide 8 warps
}

DotProblem decode_problem(int64_t rows) {
  DotProblem pr;  // x (rows, 2048) @ W.T, W (3072, 2048)
  pr.dtype = pr.operand = DType::kBFloat16;
  pr.trans_a = true;
  pr.m = 3072;
  pr.n = rows;
  pr.k = 2048;
  return pr;
}

TEST(CudaGemv, AppliesToFewRowsOfHalfFloatsTimesATransposedWeight) {
  for (int64_t rows : {1, 3, 16}) EXPECT_TRUE(rt::cuda::gemv_applies(decode_problem(rows))) << rows;
  EXPECT_FALSE(rt::cuda::gemv_applies(decode_problem(17)));
  DotProblem pr = decode_problem(1);
  pr.bias = true;
  pr.activation = rt::Activation::kGelu;
  EXPECT_TRUE(rt::cuda::gemv_applies(pr));
  pr.dtype = pr.operand = DType::kFloat16;
  EXPECT_TRUE(rt::cuda::gemv_applies(pr));
  pr.dtype = pr.operand = DType::kFloat32;
  EXPECT_FALSE(rt::cuda::gemv_applies(pr));
  pr = decode_problem(1);
  pr.trans_a = false;  // W stored [K, N]
  EXPECT_FALSE(rt::cuda::gemv_applies(pr));
  pr = decode_problem(1);
  pr.batch = 4;  // batched weights
  EXPECT_FALSE(rt::cuda::gemv_applies(pr));
  pr = decode_problem(1);
  pr.residual = true;
  EXPECT_FALSE(rt::cuda::gemv_applies(pr));
}

TEST(CudaGemv, OneEntryPointPerRowTileAndWeightRows) {
  EXPECT_EQ(rt::cuda::gemv_function(DType::kBFloat16, 4, 2), "tripy_gemv_bf16_m4_r2");
  DotProblem pr = decode_problem(3);
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {2, 1}), "tripy_gemv_bf16_m4_r2");  // 3 rows: the 4-row tile
  pr.n = 16;
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {1, 8}), "tripy_gemv_bf16_m16_r1");
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {4, 1}), "tripy_gemv_bf16_m16_r1");  // at most 16 sums a lane
  pr.n = 8;
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {4, 1}), "tripy_gemv_bf16_m8_r1");  // tensor cores: one tile
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {1, 4, true}), "tripy_gemv_bf16_m8_tma");
  EXPECT_EQ(rt::cuda::gemv_fallback_for(pr, {1, 4, true}), "tripy_gemv_bf16_m8_r1");
  pr.n = 3;  // below the tensor-core tiles a TMA choice runs its split on the CUDA-core rows
  EXPECT_EQ(rt::cuda::gemv_function_for(pr, {1, 4, true}), "tripy_gemv_bf16_m4_r1");
}

TEST(CudaGemv, AnExecutableKeepsTheEntryOfEveryRowCountItsRangeGives) {
  const DotProblem pr = decode_problem(1);
  using Names = std::set<std::string>;
  // One row: one tile. 3 to 40 rows: the 4-, 8- and 16-row tiles (the tensor-core ones take R = 1).
  EXPECT_EQ(rt::cuda::gemv_functions_for(pr, 1, 1, {4, 1}), Names{"tripy_gemv_bf16_m1_r4"});
  EXPECT_EQ(rt::cuda::gemv_functions_for(pr, 3, 40, {4, 1}),
            (Names{"tripy_gemv_bf16_m4_r4", "tripy_gemv_bf16_m8_r1", "tripy_gemv_bf16_m16_r1"}));
  // Every row count's entry is kept, and none the kernel does not take (more than 16 rows).
  const Names all = rt::cuda::gemv_functions_for(pr, 1, 16, {2, 2});
  for (int64_t m = 1; m <= 16; ++m) {
    DotProblem at = pr;
    at.n = m;
    EXPECT_EQ(all.count(rt::cuda::gemv_function_for(at, {2, 2})), 1u) << m;
  }
  EXPECT_TRUE(rt::cuda::gemv_functions_for(pr, 17, 64, {2, 2}).empty());
  // A TMA choice keeps its fallback beside each tensor-core tile's TMA entry.
  EXPECT_EQ(rt::cuda::gemv_functions_for(pr, 5, 16, {1, 2, true}),
            (Names{"tripy_gemv_bf16_m8_tma", "tripy_gemv_bf16_m8_r1", "tripy_gemv_bf16_m16_tma",
                   "tripy_gemv_bf16_m16_r1"}));
}

TEST(CudaGemv, TensorCoreTilesTakeOneTileOf16RowsABlock) {
  // 3072 rows of W: 8 warp groups of 2 rows a block on CUDA cores (4 rows of x); on tensor cores (8
  // rows of x) one tile of 16 rows a block whatever the tactic, its 8 warps dividing K.
  DotProblem pr = decode_problem(4);
  EXPECT_EQ(rt::cuda::plan_gemv(pr, {2, 1}, nullptr, nullptr, 0, 1, 2, -1, false).grid, 3072u / 16);
  pr.n = 8;
  for (rt::cuda::GemvTactic t : rt::cuda::gemv_tactics()) {
    const rt::cuda::Launch l = rt::cuda::plan_gemv(pr, t, nullptr, nullptr, 0, 1, 2, -1, false);
    EXPECT_EQ(l.grid, 3072u / 16);
    EXPECT_EQ(l.words[8], 8);  // split
    EXPECT_EQ(rt::cuda::gemv_function_for(pr, t), "tripy_gemv_bf16_m8_r1");
  }
  EXPECT_EQ(rt::cuda::gemv_tactics(pr, 80).size(), 1u);  // the tuner times that launch once
  EXPECT_EQ(rt::cuda::gemv_tactics(decode_problem(4), 90).size(), rt::cuda::gemv_tactics().size());
  pr.m = 3000;  // a partial last block
  EXPECT_EQ(rt::cuda::plan_gemv(pr, {2, 1}, nullptr, nullptr, 0, 1, 2, -1, false).grid, (3000u + 15) / 16);
}

TEST(CudaGemv, TheTmaFormHasItsOwnSplitAndATensorMapOfTheWeight) {
  DotProblem pr = decode_problem(8);
  const std::vector<rt::cuda::GemvTactic> tactics = rt::cuda::gemv_tactics(pr, 90);
  EXPECT_EQ(tactics.size(), 5u);  // gemv_mma's launch and the TMA form at each split
  for (size_t i = 1; i < tactics.size(); ++i) EXPECT_TRUE(tactics[i].tma);
  CUfunction tma = reinterpret_cast<CUfunction>(0x10), mma = reinterpret_cast<CUfunction>(0x20);
  const rt::cuda::Launch l = rt::cuda::plan_gemv(pr, {1, 4, true}, tma, mma, 0, 1, 2, -1, true);
  EXPECT_EQ(l.vector_fn, tma);  // 16-byte aligned operands
  EXPECT_EQ(l.fn, mma);         // else gemv_mma, one tile of 16 rows a block
  EXPECT_EQ(l.scalar_grid, 3072u / 16);
  EXPECT_EQ(l.vector_grid, 3072u / 32);  // 8 / 4 warp groups of 16 rows a block
  ASSERT_EQ(l.words.size(), 32u);
  EXPECT_EQ(l.words[8], 8);    // gemv_mma's split
  EXPECT_EQ(l.words[11], 4);   // the TMA form's
  EXPECT_EQ(l.words[12], 96);  // and its blocks
  EXPECT_EQ(l.tensor_map.word, 16);
  EXPECT_EQ(l.tensor_map.address_word, 2);  // w
  EXPECT_EQ(l.tensor_map.rows, 3072);
  EXPECT_EQ(l.tensor_map.row_bytes, 2048 * 2);
  pr.k = 2044;  // rows of 4088 bytes: no tensor map
  EXPECT_EQ(rt::cuda::gemv_tactics(pr, 90).size(), 1u);
}

TEST(CudaGemv, OnlyAConstantWeightMayBeReadBeforeTheWait) {
  const DotProblem pr = decode_problem(1);
  EXPECT_EQ(rt::cuda::plan_gemv(pr, {2, 1}, nullptr, nullptr, 0, 1, 2, -1, true).words[10], 1);  // GemvArgs::early
  EXPECT_EQ(rt::cuda::plan_gemv(pr, {2, 1}, nullptr, nullptr, 0, 1, 2, -1, false).words[10], 0);
}

}  // namespace
}  // namespace tripy

#endif

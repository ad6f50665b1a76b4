// kWeightOnlyDot's CUDA side without a GPU: the variants' modules (dtype x bits x tile of rows)
// compiles with NVRTC holding its one entry point (skipped where NVRTC cannot be loaded), and a
// kernel's tile follows the most rows its x may have. GPU runs against numpy and torch:
// tests/frontend/ops/test_weight_only_dot_gpu.py.
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
    for (int bits : {4, 8})
      for (int mt : kWeightOnlyRowTiles) {
        if (t != DType::kBFloat16 && mt != 1 && mt != 32) continue;  // every tile once is enough
        GeneratedKernel g = weight_only_dot_module_source(t, bits, mt);
        EXPECT_EQ(g.function, weight_only_function(t, bits, mt));
        sources.push_back(g.source);
        names.push_back(g.function);
      }
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_NE((*compiled)[i].ptx.find(".entry " + names[i] + "("), std::string::npos) << names[i];
    EXPECT_EQ((*compiled)[i].ptx.find(".entry ", (*compiled)[i].ptx.find(".entry ") + 1), std::string::npos)
        << names[i] << " holds another entry point";
  }
}

// x (rows, 4096) bfloat16 with rows at most `most`: the kernel's tile of rows.
int tile_for(int64_t most) {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kConst, 4096, 0}, {ShapeInstr::Op::kInputDim, 0, 0}};
  BufferDesc x;
  x.kind = BufferDesc::Kind::kInput;
  x.dtype = DType::kBFloat16;
  x.shape = {1, 0};
  x.max_bytes = most * 4096 * 2;
  p.buffers = {x};
  Kernel k;
  k.kind = KernelKind::kWeightOnlyDot;
  k.inputs = {0};
  return weight_only_row_tile(p, k);
}

TEST(CudaWeightOnlyDot, TheTileHoldsTheMostRowsUpTo32) {
  EXPECT_EQ(tile_for(1), 1);
  EXPECT_EQ(tile_for(3), 4);
  EXPECT_EQ(tile_for(16), 16);
  EXPECT_EQ(tile_for(17), 32);
  EXPECT_EQ(tile_for(2048), 32);  // a prefill: tiles of 32 rows
  for (int mt : kWeightOnlyRowTiles) EXPECT_LE(mt * weight_only_weight_rows(mt), 32) << mt;
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif

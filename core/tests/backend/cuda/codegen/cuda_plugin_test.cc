// Plugin kernels without a GPU: the built-in GELU plugin's module (prelude, field macros, source)
// compiles with NVRTC for both precisions, and a launch carries every buffer's rank and shape in
// the words PluginArgs reads. Skipped where NVRTC cannot be loaded.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_plugin.h"
#include "tripy/plugin.h"

namespace tripy::rt::cuda {
namespace {

PluginAttrs gelu(const std::string& fields) {
  const PluginDef* def = find_plugin(plugin_key("CustomGeluPluginDynamic"));
  EXPECT_NE(def, nullptr);
  PluginAttrs p;
  p.name = plugin_key("CustomGeluPluginDynamic");
  p.fields = fields;
  p.cuda_source = def->cuda_source;
  p.cuda_entry = def->cuda_entry;
  return p;
}

TEST(CudaPlugin, FieldsBecomeMacros) {
  auto src = plugin_module_source(gelu(R"({"type_id": 1, "scale": 0.5, "dims": [2, 3], "name": "x", "on": true})"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_NE(src->find("#define TRIPY_FIELD_type_id 1LL\n"), std::string::npos);
  EXPECT_NE(src->find("#define TRIPY_FIELD_scale 0.5\n"), std::string::npos);
  EXPECT_NE(src->find("#define TRIPY_FIELD_dims {2LL, 3LL}\n#define TRIPY_FIELD_dims_COUNT 2\n"), std::string::npos);
  EXPECT_NE(src->find("#define TRIPY_FIELD_on 1\n"), std::string::npos);
  EXPECT_EQ(src->find("TRIPY_FIELD_name"), std::string::npos);  // strings have no macro
  EXPECT_FALSE(plugin_module_source(gelu("[1]")).ok());
}

TEST(CudaPlugin, BuiltinGeluCompilesWithNvrtc) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<std::string> sources, names;
  for (const char* fields : {R"({"type_id": 0})", R"({"type_id": 1})"}) {
    auto src = plugin_module_source(gelu(fields));
    ASSERT_TRUE(src.ok());
    sources.push_back(*src);
    names.push_back(std::string("gelu_") + fields);
  }
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (const CompiledModule& m : *compiled) {
    EXPECT_FALSE(m.cubin.empty());
    EXPECT_NE(m.ptx.find(".entry custom_gelu"), std::string::npos);
  }
  // float16 loads and stores 16-bit values; float32 32-bit ones.
  EXPECT_NE((*compiled)[1].ptx.find("cvt.f32.f16"), std::string::npos);
  EXPECT_EQ((*compiled)[0].ptx.find("cvt.f32.f16"), std::string::npos);
}

// The kernel tp.register_plugin's documentation shows, as a user writes it.
TEST(CudaPlugin, DocumentedUserKernelCompilesWithNvrtc) {
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  PluginAttrs p;
  p.name = "::Scale/1";
  p.fields = R"({"factor": 3.0})";
  p.cuda_entry = "scale";
  p.cuda_source = R"(
extern "C" __global__ void scale(PluginArgs args) {
  i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
  if (i < args.n) ((float*)args.output.data)[i] = ((const float*)args.inputs[0].data)[i] * TRIPY_FIELD_factor;
}
)";
  auto src = plugin_module_source(p);
  ASSERT_TRUE(src.ok());
  auto compiled = compile_modules({*src}, {"scale"}, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_NE((*compiled)[0].ptx.find(".entry scale"), std::string::npos);
}



TEST(CudaPlugin, LaunchWordsDescribeEveryBuffer) {
  Program p;
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat32, {}}, {BufferDesc::Kind::kInput, 1, DType::kInt32, {}},
               {BufferDesc::Kind::kOutput, 0, DType::kFloat32, {}}};
  Kernel k;
  k.kind = KernelKind::kPlugin;
  k.name = "plugin_x";
  k.inputs = {0, 1};
  k.outputs = {2};
  k.plugin.block = 128;
  CUfunction fn = reinterpret_cast<CUfunction>(uintptr_t{1});
  auto launches = plan_plugin(p, k, fn, {{3, 5}, {7}, {3, 5, 2}});
  ASSERT_TRUE(launches.ok()) << launches.status().message();
  ASSERT_EQ(launches->size(), 1u);
  const Launch& l = (*launches)[0];
  ASSERT_EQ(l.words.size(), static_cast<size_t>(kPluginWords));
  EXPECT_EQ(l.words[1], 2);  // input 0: rank 2, shape (3, 5)
  EXPECT_EQ(l.words[2], 3);
  EXPECT_EQ(l.words[3], 5);
  EXPECT_EQ(l.words[kPluginTensorWords + 1], 1);  // input 1: rank 1, shape (7)
  EXPECT_EQ(l.words[kPluginTensorWords + 2], 7);
  EXPECT_EQ(l.words[kPluginOutputWord + 1], 3);
  EXPECT_EQ(l.words[kPluginWords - 2], 2);   // num_inputs
  EXPECT_EQ(l.words[kPluginWords - 1], 30);  // n
  EXPECT_EQ(l.block_x, 128u);
  EXPECT_EQ(l.grid, 1u);  // ceil(30 / 128)
  ASSERT_EQ(l.ptrs.size(), 3u);
  EXPECT_EQ(l.ptrs[2].word, kPluginOutputWord);
  EXPECT_EQ(l.ptrs[2].buffer, 2);
  // An empty output launches nothing.
  auto none = plan_plugin(p, k, fn, {{3, 5}, {7}, {0, 5}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif  // TRIPY_WITH_CUDA

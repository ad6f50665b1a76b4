// The CUDA C++ files under backend/cuda/codegen/kernels/, as the build embeds them: each without
// its opening comment, each inside a module that NVRTC compiles here (skipped where NVRTC cannot
// be loaded). The modules' own tests check their entry points (cuda_codegen_test.cc: layout,
// index, fill; cuda_plugin_test.cc, cuda_attention_test.cc, cuda_gemv_test.cc,
// cuda_weight_only_dot_test.cc); the modules made
// of one file per dtype (convolution, pooling, sample) are checked here, each dtype's entry point.
#include <gtest/gtest.h>

#if TRIPY_WITH_CUDA

#include <algorithm>
#include <cctype>
#include <cstring>

#include "backend/cuda/codegen/cuda_compile.h"
#include "backend/cuda/codegen/cuda_kernel_files.h"
#include "backend/cuda/codegen/cuda_sources.h"
#include "backend/cuda/cuda_weight_only_dot.h"
#include "cuda_test_cases.h"

namespace tripy::rt::cuda {
namespace {

// An attention kernel over float16 q, k, v (2, 4, 100, 64): its module holds the generic and flash
// kernels and the split-KV part (attention_split.cuh, its kernels left out by macros).
Program attention_program() {
  Program p;
  for (int64_t v : {2, 4, 100, 64}) p.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  for (int i = 0; i < 4; ++i) p.buffers.push_back({BufferDesc::Kind::kTemp, 0, DType::kFloat16, {0, 1, 2, 3}});
  Kernel k;
  k.kind = KernelKind::kAttention;
  k.name = "attention";
  k.inputs = {0, 1, 2};
  k.outputs = {3};
  k.attention.scale = 0.125;
  p.kernels = {k};
  return p;
}

// One module of each kind; every embedded file is in at least one of them.
struct Module {
  std::string name, source;
};
std::vector<Module> modules_of_every_file() {
  PluginAttrs plugin;
  plugin.name = "scale";
  plugin.fields = R"({"factor": 2})";
  plugin.cuda_source =
      "extern \"C\" __global__ void scale(const PluginArgs a) {\n"
      "  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) ((float*)a.output.data)[i] = TRIPY_FIELD_factor * ((const float*)a.inputs[0].data)[i];\n"
      "}\n";
  const Program attention = attention_program();
  return {
      {"layout", layout_module_source()},
      {"index", index_module_source({{false, 4, DType::kInt32}, {true, 2, DType::kInt64}})},
      {"fill", fill_module_source()},
      {"conv", kind_module_source(KernelKind::kConvolution, DType::kFloat16).source},
      {"pool", kind_module_source(KernelKind::kPooling, DType::kInt8).source},
      {"sample", kind_module_source(KernelKind::kSample, DType::kBFloat16).source},
      {"one_shot_collective", kind_module_source(KernelKind::kCollective, DType::kBFloat16).source},
      {"gemv", gemv_module_source(DType::kFloat16, 1, 1)},
      // The tensor-core tile's module: its entry point and the ring's.
      {"weight_only_dot", weight_only_dot_module_source(DType::kBFloat16, 4, kWeightOnlyMmaRows).source},
      {"plugin", plugin_module_source(plugin).value()},
      {"attention", generate_attention(attention, attention.kernels[0]).value().source},
  };
}

TEST(CudaKernelFiles, EveryFileIsEmbeddedWithoutItsOpeningComment) {
  ASSERT_GT(kernels::kFileCount, 0u);
  for (size_t i = 0; i < kernels::kFileCount; ++i) {
    const kernels::EmbeddedFile& f = kernels::kFiles[i];
    EXPECT_GT(std::strlen(f.text), 0u) << f.name;
    EXPECT_NE(std::strncmp(f.text, "//", 2), 0) << f.name << " starts with its opening comment";
  }
}

TEST(CudaKernelFiles, EveryFileIsInAModuleThatCompilesWithNvrtc) {
  const std::vector<Module> modules = modules_of_every_file();
  for (size_t i = 0; i < kernels::kFileCount; ++i) {
    const kernels::EmbeddedFile& f = kernels::kFiles[i];
    bool found = false;
    for (const Module& m : modules) found = found || m.source.find(f.text) != std::string::npos;
    EXPECT_TRUE(found) << f.name << " is in none of the modules this test compiles: add the module that holds it";
  }
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  std::vector<std::string> sources, names;
  for (const Module& m : modules) {
    sources.push_back(m.source);
    names.push_back(m.name);
  }
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < compiled->size(); ++i) {
    EXPECT_FALSE((*compiled)[i].cubin.empty()) << names[i];
    EXPECT_NE((*compiled)[i].ptx.find(".entry "), std::string::npos) << names[i];
  }
}

// Whether the device function `name` of `source` waits for the previous kernel itself, reading
// before the wait only what its arguments say no kernel writes (`a.early`: gemv_rows' weights;
// `wo_early(a)`: the weight-only ring's).
bool waits_itself(const std::string& source, const std::string& name) {
  const size_t def = source.find("DEVI void " + name + "(");
  if (def == std::string::npos) return false;
  const size_t wait = source.find("enter_after_previous();", def);
  const size_t next = source.find("\nDEVI ", def + 1);
  const size_t guard = std::min(source.find("a.early", def), source.find("wo_early(a)", def));
  return wait != std::string::npos && wait < next && guard < wait;
}

// The entry points of `source` whose body does not begin with enter_after_previous() (a kernel
// launched to overlap its predecessor must wait for it before touching memory), nor with a call of
// a function that waits itself (waits_itself).
std::vector<std::string> entries_that_do_not_wait(const std::string& source) {
  std::vector<std::string> bad;
  for (size_t at = source.find("__global__"); at != std::string::npos; at = source.find("__global__", at + 1)) {
    const size_t open = source.find('{', at);
    const size_t paren = source.rfind('(', open);
    if (open == std::string::npos || paren == std::string::npos) {
      bad.push_back(source.substr(at, 80));
      continue;
    }
    size_t body = open + 1;  // past blanks and a macro's line continuations
    while (body < source.size() && (std::isspace(static_cast<unsigned char>(source[body])) || source[body] == '\\'))
      ++body;
    if (source.compare(body, 23, "enter_after_previous();") == 0) continue;
    const size_t callee_end = source.find_first_of("<(", body);
    if (callee_end != std::string::npos && waits_itself(source, source.substr(body, callee_end - body))) continue;
    bad.push_back(source.substr(at, paren - at));
  }
  return bad;
}

// What a generated fused kernel reads or writes before its first wait, where a kernel may have
// written it: any output, any input but the program's constants (a row reduction loads the weights
// every row shares before it waits). Declarations (`T* out0 = (T*)a.v[0];`) are not accesses.
std::vector<std::string> fused_accesses_before_wait(const Program& p, const Kernel& k, const std::string& source) {
  const size_t open = source.find('{', source.find("__global__"));
  const size_t wait = source.find("enter_after_previous();", open);
  if (open == std::string::npos || wait == std::string::npos) return {"no wait"};
  std::vector<std::string> bad;
  const std::string head = source.substr(open, wait - open);
  size_t line_start = 0;
  while (line_start < head.size()) {
    size_t end = head.find('\n', line_start);
    if (end == std::string::npos) end = head.size();
    const std::string line = head.substr(line_start, end - line_start);
    line_start = end + 1;
    if (line.find(" = (") != std::string::npos && line.find("a.v[") != std::string::npos) continue;  // a declaration
    for (size_t o = 0; o < k.outputs.size(); ++o)
      if (line.find("out" + std::to_string(o)) != std::string::npos) bad.push_back(line);
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      const std::string name = "(in" + std::to_string(i) + " ";
      if (line.find(name) != std::string::npos && !p.is_constant(k.inputs[i])) bad.push_back(line);
    }
  }
  return bad;
}

// Launches overlap their predecessor (Launch::overlaps) on the promise that every Tripy kernel
// waits for it before touching memory it may have written: each module's entry points begin with
// that wait; a fused kernel waits before each of its loops and reads only constants before.
// Not the tuner's fill kernels (launched plainly) nor plugins (the user's code).
TEST(CudaKernelFiles, EveryEntryPointWaitsForThePreviousKernelFirst) {
  std::vector<Module> modules = modules_of_every_file();
  int fused = 0, early = 0;
  auto check_fused = [&](const std::string& name, const Program& p, const Kernel& k) {
    const std::string source = generate_fused(p, k).value().source;
    ++fused;
    for (const std::string& line : fused_accesses_before_wait(p, k, source))
      ADD_FAILURE() << name << ": before its first wait: " << line;
    size_t waits = 0, loops = 0;
    for (size_t at = source.find("enter_after_previous();\n"); at != std::string::npos;
         at = source.find("enter_after_previous();\n", at + 1))
      ++waits;
    const std::string loop = "for (i64 row0 =";
    for (size_t at = source.find(loop); at != std::string::npos; at = source.find(loop, at + 1)) ++loops;
    EXPECT_EQ(waits, std::max<size_t>(loops, 1)) << name << ": a row loop without its wait";
    const size_t body = source.find("__global__");
    early += source.find("enter_after_previous();", body) > source.find("load_pack", body);
  };
  for (const cuda_testing::GpuCase& c : cuda_testing::all_cases())
    for (const Kernel& k : c.program.kernels)
      if (k.kind == KernelKind::kFused) check_fused(c.name, c.program, k);
  EXPECT_GT(fused, 0);
  EXPECT_GT(early, 0) << "no case loads a constant before its wait (residual_rmsnorm_1x4096 should)";
  for (const Module& m : modules) {
    if (m.name == "fill" || m.name == "plugin") continue;
    EXPECT_NE(m.source.find("__global__"), std::string::npos) << m.name;
    for (const std::string& entry : entries_that_do_not_wait(m.source))
      ADD_FAILURE() << m.name << ": " << entry << " does not begin with enter_after_previous()";
  }
}

// Each kind whose module is one file of kernels/ (the builder's rows): for every dtype the file
// has an entry point for (its TRIPY_FOR_DTYPE rows), the module compiles and holds that dtype's
// function and no other.
TEST(CudaKernelFiles, EveryKindsFileModuleCompilesForEachOfItsDtypes) {
  std::vector<std::string> sources, names;
  std::vector<std::vector<std::string>> others;  // per module: the functions it must not hold
  for (size_t kind = 0; kind < kNumKernelKinds; ++kind) {
    std::vector<GeneratedKernel> modules;
    for (int t = 0; t < kNumDTypes; ++t) {
      GeneratedKernel g = kind_module_source(static_cast<KernelKind>(kind), static_cast<DType>(t));
      const std::string row = std::string("TRIPY_FOR_DTYPE(") + dtype_suffix(static_cast<DType>(t)) + ",";
      if (g.source.find(row) != std::string::npos) modules.push_back(g);
    }
    for (const GeneratedKernel& g : modules) {
      sources.push_back(g.source);
      names.push_back(g.function);
      others.emplace_back();
      for (const GeneratedKernel& o : modules)
        if (o.function != g.function) others.back().push_back(o.function);
    }
  }
  ASSERT_GE(sources.size(), 17u);  // convolution 3, pooling 6, sample 3, one-shot collective 5
  if (!nvrtc_available()) GTEST_SKIP() << "NVRTC is not available here";
  auto compiled = compile_modules(sources, names, 90);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_NE((*compiled)[i].ptx.find(".entry " + names[i] + "("), std::string::npos) << names[i];
    for (const std::string& o : others[i])
      EXPECT_EQ((*compiled)[i].ptx.find(".entry " + o + "("), std::string::npos) << names[i] << " holds " << o;
  }
}

}  // namespace
}  // namespace tripy::rt::cuda

#endif

// Program building: shape program and checks, buffers and output copies, and arena planning.
#include <gtest/gtest.h>

#include "compiler/build_program.h"
#include "compiler/memory_plan.h"

namespace tripy::compiler {
namespace {

rt::Program built(const char* text) {
  auto g = flat::parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  auto p = build_program(*g);
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (!p.ok()) return rt::Program();
  Status st = rt::validate_program(*p);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << program_str(*p);
  return std::move(p.value());
}

int64_t root_of(const rt::Program& p, int32_t b) {
  while (p.buffers[b].kind == rt::BufferDesc::Kind::kAlias) b = p.buffers[b].index;
  return b;
}

TEST(MemoryPlan, ReusesSpaceOfDeadBuffers) {
  MemoryPlan plan = plan_memory({{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {300, 3, 4}});
  // Buffers 0 and 2 never live together, so they may share; 1 overlaps both.
  EXPECT_LE(plan.arena_bytes, 2 * 1024 + 512);
  for (int64_t o : plan.offsets) EXPECT_EQ(o % kArenaAlignment, 0);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_NE(plan.offsets[1], plan.offsets[2]);
}

TEST(MemoryPlan, BestFitPicksTheSmallestGap) {
  // 0 [0,1024) and 1 [1024,1280) then 2 [1280,2304) are live at 5; 0 dies before the last buffer
  // is born, so it can take 0's space rather than grow the arena.
  MemoryPlan plan = plan_memory({{1024, 0, 2}, {256, 0, 9}, {1024, 0, 9}, {512, 3, 9}});
  EXPECT_EQ(plan.arena_bytes, 2304);
  EXPECT_EQ(plan.offsets[3], plan.offsets[0]);
}

TEST(BuildProgram, ArenaIsSmallerThanTheSumOfTempsAndLiveTempsNeverOverlap) {
  rt::Program p = built(R"(%0 : f32[64, 64] = parameter() {index = 0}
%1 : f32[64, 64] = exp(%0)
%2 : f32[64, 64] = transpose(%1) {dims = [1, 0]}
%3 : f32[64, 64] = neg(%2)
%4 : f32[64, 64] = transpose(%3) {dims = [1, 0]}
%5 : f32[64, 64] = abs(%4)
%6 : f32[64, 64] = transpose(%5) {dims = [1, 0]}
%7 : f32[64, 64] = sqrt(%6)
%8 : f32[64, 64] = transpose(%7) {dims = [1, 0]}
return %8
)");
  int64_t sum = 0;
  std::vector<int32_t> temps;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].kind != rt::BufferDesc::Kind::kTemp) continue;
    sum += p.buffers[b].max_bytes;
    temps.push_back(static_cast<int32_t>(b));
  }
  EXPECT_EQ(temps.size(), 7u);
  EXPECT_LT(p.arena_bytes, sum);
  EXPECT_EQ(p.arena_bytes, 2 * 64 * 64 * 4);
  // Recompute liveness from the kernels and check that no two live temps share bytes.
  std::vector<int> first(p.buffers.size(), -1), last(p.buffers.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (int32_t b : p.kernels[k].outputs) {
      int64_t r = root_of(p, b);
      if (first[r] < 0) first[r] = static_cast<int>(k);
      last[r] = std::max(last[r], static_cast<int>(k));
    }
    for (int32_t b : p.kernels[k].inputs) last[root_of(p, b)] = std::max(last[root_of(p, b)], static_cast<int>(k));
  }
  for (int32_t a : temps) {
    for (int32_t b : temps) {
      if (a >= b || first[a] > last[b] || first[b] > last[a]) continue;
      const auto& x = p.buffers[a];
      const auto& y = p.buffers[b];
      EXPECT_TRUE(x.offset + x.max_bytes <= y.offset || y.offset + y.max_bytes <= x.offset)
          << "buffers " << a << " and " << b << " overlap while both live";
    }
  }
}

TEST(BuildProgram, SharedSymbolsBecomeChecksAndBounds) {
  rt::Program p = built(R"(sym batch [1, 4, 8]
sym s1 [2, 3, 5]
%0 : f32[batch, s1] = parameter() {index = 0, name = "x"}
%1 : f32[batch] = parameter() {index = 1, name = "y"}
%2 : f32[batch] = reduce_sum(%0) {dims = [1]}
%3 : f32[batch] = add(%2, %1)
return %3
)");
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.inputs[0].dim_min, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(p.inputs[0].dim_opt, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(p.inputs[0].dim_max, (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(p.inputs[0].dim_names, (std::vector<std::string>{"batch", ""}));
  ASSERT_EQ(p.checks.size(), 1u);
  EXPECT_EQ(p.checks[0].kind, rt::ShapeCheck::Kind::kEqual);
  EXPECT_EQ(p.checks[0].message, "dim 0 of input 'y' must equal dim 0 of input 'x' (both are 'batch')");
  std::vector<int64_t> slots;
  p.eval_shapes({Tensor::empty_host(DType::kFloat32, {3, 5}), Tensor::empty_host(DType::kFloat32, {3})}, slots);
  EXPECT_EQ(slots[p.checks[0].a], 3);
  EXPECT_EQ(slots[p.checks[0].b], 3);
  // The output's size comes from the shape program; its bound from the symbol's max.
  const rt::BufferDesc& out = p.buffers[p.outputs[0]];
  EXPECT_EQ(p.buffer_shape(p.outputs[0], slots), (std::vector<int64_t>{3}));
  EXPECT_EQ(out.max_bytes, 8 * 4);
}

TEST(BuildProgram, GraphAssertionsBecomeChecks) {
  rt::Program p = built(R"(sym a [1, 2, 4]
sym b [1, 2, 4]
%0 : f32[a] = parameter() {index = 0}
%1 : f32[b] = parameter() {index = 1}
assert_broadcast(a, b) "sizes must broadcast"
return %0
)");
  ASSERT_EQ(p.checks.size(), 1u);
  EXPECT_EQ(p.checks[0].kind, rt::ShapeCheck::Kind::kBroadcast);
  EXPECT_EQ(p.checks[0].message, "sizes must broadcast");
}

TEST(BuildProgram, OutputsThatAreInputsOrRepeatsAreCopied) {
  rt::Program p = built(R"(%0 : f32[4] = parameter() {index = 0}
%1 : f32[4] = exp(%0)
%2 : f32[2, 2] = reshape(%1)
return %0, %1, %1, %2
)");
  ASSERT_EQ(p.outputs.size(), 4u);
  int copies = 0;
  for (const rt::Kernel& k : p.kernels) copies += k.kind == rt::KernelKind::kCopy;
  EXPECT_EQ(copies, 3);  // the input, the repeat and the reshape (an alias of output 1)
  EXPECT_EQ(p.kernels[0].kind, rt::KernelKind::kFused);
  EXPECT_EQ(p.kernels[0].outputs[0], p.outputs[1]);  // written straight into the output
  EXPECT_EQ(p.arena_bytes, 0);
}

TEST(BuildProgram, ReshapedResultsAreWrittenStraightIntoTheOutput) {
  rt::Program p = built(R"(%0 : f32[4, 6] = parameter() {index = 0}
%1 : f32[4] = reduce_sum(%0) {dims = [1]}
%2 : f32[4, 1] = reshape(%1)
%3 : f32[24] = reshape(%0)
return %2, %3
)");
  ASSERT_EQ(p.kernels.size(), 2u);  // the reduction, and a copy for the input's reshape
  EXPECT_EQ(p.kernels[0].kind, rt::KernelKind::kFused);
  EXPECT_EQ(p.kernels[1].kind, rt::KernelKind::kCopy);
  const rt::BufferDesc& written = p.buffers[p.kernels[0].outputs[0]];
  EXPECT_EQ(written.kind, rt::BufferDesc::Kind::kAlias);
  EXPECT_EQ(written.index, p.outputs[0]);
  EXPECT_EQ(p.buffers[p.outputs[0]].shape.size(), 2u);
}

TEST(BuildProgram, ReshapeIsAnAlias) {
  rt::Program p = built(R"(%0 : f32[4, 6] = parameter() {index = 0}
%1 : f32[4, 6] = exp(%0)
%2 : f32[24] = reshape(%1)
%3 : f32[24] = neg(%2)
return %3
)");
  ASSERT_EQ(p.kernels.size(), 2u);
  const rt::BufferDesc& read = p.buffers[p.kernels[1].inputs[0]];
  EXPECT_EQ(read.kind, rt::BufferDesc::Kind::kAlias);
  EXPECT_EQ(read.index, p.kernels[0].outputs[0]);
}

TEST(BuildProgram, SymbolWithoutAnInputDimIsAnError) {
  auto g = flat::parse_graph("sym n [1, 2, 3]\n%0 : f32[n] = iota() {dims = [0]}\nreturn %0\n");
  ASSERT_TRUE(g.ok());
  auto p = build_program(*g);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("'n' is neither the size of an input dim nor a shape value"), std::string::npos);
}

TEST(BuildProgram, ShapeValueInputsFeedTheShapeProgramAndGetNoBuffer) {
  rt::Program p = built(R"(sym n [0, 4, 8]
%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : i64[] = parameter() {index = 1, name = "n", value_of = n}
%2 : f32[] = constant() {value = [1]}
%3 : f32[n, 3] = broadcast(%2) {dims = []}
%4 : f32[n, 3] = exp(%3)
return %4
)");
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.inputs[1].kind, rt::InputSpec::Kind::kShapeValue);
  EXPECT_EQ(p.inputs[1].dtype, DType::kInt64);
  EXPECT_EQ(p.inputs[1].value_min, 0);
  EXPECT_EQ(p.inputs[1].value_opt, 4);
  EXPECT_EQ(p.inputs[1].value_max, 8);
  EXPECT_TRUE(p.input_shapes[1].empty());
  for (const rt::BufferDesc& b : p.buffers)
    if (b.kind == rt::BufferDesc::Kind::kInput) EXPECT_EQ(b.index, 0);
  const rt::Slot rows = p.buffers[p.outputs[0]].shape[0];
  EXPECT_EQ(p.shape_program[rows].op, rt::ShapeInstr::Op::kInputValue);
  EXPECT_EQ(p.shape_program[rows].a, 1);
  const std::string text = program_str(p);
  EXPECT_NE(text.find("input 1 'n': shape value in [0, 4, 8]"), std::string::npos) << text;
  EXPECT_NE(text.find("= input1.value"), std::string::npos) << text;

  std::vector<int64_t> slots;
  p.eval_shapes({Tensor::empty_host(DType::kFloat32, {2, 3}), Tensor::host_int64(5)}, slots);
  EXPECT_EQ(p.buffer_shape(p.outputs[0], slots), (std::vector<int64_t>{5, 3}));
}

TEST(BuildProgram, ProgramStrListsKernels) {
  rt::Program p = built(R"(%0 : f32[2, 3] = parameter() {index = 0, name = "x"}
%1 : f32[2] = reduce_max(%0) {dims = [1]}
return %1
)");
  std::string s = program_str(p);
  EXPECT_NE(s.find("input 0 'x': f32[2, 3]"), std::string::npos) << s;
  EXPECT_NE(s.find("fused 'fused_reduce_max'"), std::string::npos) << s;
  EXPECT_NE(s.find("reduce_max.f32 r0"), std::string::npos) << s;
}


// A KV-cache write: parameter 0 is the cache (donated where the options say so), 2 the position.
constexpr const char* kCacheWrite = R"(%0 : f32[4, 8, 2] = parameter() {index = 0, name = "cache"}
%1 : f32[4, 1, 2] = parameter() {index = 1, name = "row"}
%2 : i32[] = parameter() {index = 2, name = "pos"}
%3 : f32[4, 8, 2] = update_slice(%0, %1, %2) {dims = [1]}
%4 : f32[4, 8, 2] = update_slice(%3, %1, %2) {dims = [1]}
return %4
)";

rt::Program built_with(const char* text, std::vector<int32_t> donated) {
  auto g = flat::parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  BuildProgramOptions options;
  options.donated_inputs = std::move(donated);
  auto p = build_program(*g, options);
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (!p.ok()) return rt::Program();
  Status st = rt::validate_program(*p);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << program_str(*p);
  return std::move(p.value());
}

TEST(BuildProgram, UpdatesOfADonatedInputAreWrittenInPlaceAndReturnedAsIt) {
  rt::Program p = built_with(kCacheWrite, {0});
  EXPECT_TRUE(p.inputs[0].donated);
  EXPECT_FALSE(p.inputs[1].donated);
  ASSERT_EQ(p.kernels.size(), 2u);  // the two row writes; no copy of the cache anywhere
  for (const rt::Kernel& k : p.kernels) {
    EXPECT_EQ(k.kind, rt::KernelKind::kUpdateSlice);
    EXPECT_EQ(k.update_slice.axis, 1);
    EXPECT_TRUE(rt::update_in_place(p, k));
  }
  const rt::BufferDesc& out = p.buffers[p.outputs[0]];
  EXPECT_EQ(out.donor, 0);  // the caller's cache is the output
  // The first write lands in the input itself (an alias), the second in the output that is it.
  EXPECT_EQ(p.buffers[root_of(p, p.kernels[0].outputs[0])].kind, rt::BufferDesc::Kind::kInput);
  EXPECT_EQ(p.kernels[1].outputs[0], p.outputs[0]);
  EXPECT_EQ(p.arena_bytes, 0);
  const std::string text = program_str(p);
  EXPECT_NE(text.find("input 0 'cache': f32[4, 8, 2] donated"), std::string::npos) << text;
  EXPECT_NE(text.find("in input 0's memory"), std::string::npos) << text;
}

TEST(BuildProgram, UpdatesOfInputsNotDonatedOrStillReadAreCopies) {
  rt::Program p = built_with(kCacheWrite, {});
  EXPECT_EQ(p.buffers[p.outputs[0]].donor, -1);
  EXPECT_FALSE(rt::update_in_place(p, p.kernels[0]));  // the caller's tensor is left as it was
  EXPECT_EQ(p.buffers[root_of(p, p.kernels[0].outputs[0])].kind, rt::BufferDesc::Kind::kTemp);
  EXPECT_FALSE(rt::update_in_place(p, p.kernels[1]));  // a temp cannot become the output: copied into it
  // A temp that nothing else reads is updated in place.
  rt::Program t = built_with(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[1, 8] = parameter() {index = 1}
%2 : i32[] = parameter() {index = 2}
%3 : f32[4, 8] = exp(%0)
%4 : f32[4, 8] = update_slice(%3, %1, %2) {dims = [0]}
%5 : f32[4, 8] = neg(%4)
return %5
)", {});
  ASSERT_EQ(t.kernels.size(), 3u);
  EXPECT_EQ(t.kernels[1].kind, rt::KernelKind::kUpdateSlice);
  EXPECT_TRUE(rt::update_in_place(t, t.kernels[1]));
  // Donated, but the old value is also returned: the update must not destroy it.
  rt::Program q = built_with(R"(%0 : f32[4, 8] = parameter() {index = 0}
%1 : f32[1, 8] = parameter() {index = 1}
%2 : i64[1] = parameter() {index = 2}
%3 : i64[] = reshape(%2)
%4 : f32[4, 8] = update_slice(%0, %1, %3) {dims = [0]}
return %4, %0
)", {0});
  const rt::Kernel* update = nullptr;
  for (const rt::Kernel& k : q.kernels)
    if (k.kind == rt::KernelKind::kUpdateSlice) update = &k;
  ASSERT_NE(update, nullptr);
  EXPECT_FALSE(rt::update_in_place(q, *update));
  EXPECT_EQ(q.buffers[q.outputs[0]].donor, -1);
}


TEST(BuildProgram, AnUpdatesRowsStayReadableWhileWhatItWroteIsRead) {
  // A cache write from a temporary (%3), then kernels writing temporaries (the transposes) before
  // the last reader of the cache (%8): the row keeps its bytes until that reader has run, so a
  // backend may write it as late as then (the CUDA backend folds a decode step's cache writes into
  // the attention that reads them). Without the rule the transposes would take its bytes, its
  // last reader being the write.
  rt::Program p = built_with(R"(%0 : f32[4, 8] = parameter() {index = 0, name = "cache"}
%1 : f32[1, 8] = parameter() {index = 1}
%2 : i32[] = parameter() {index = 2}
%3 : f32[1, 8] = exp(%1)
%4 : f32[4, 8] = update_slice(%0, %3, %2) {dims = [0]}
%5 : f32[8, 4] = transpose(%4) {dims = [1, 0]}
%6 : f32[8, 4] = neg(%5)
%7 : f32[4, 8] = transpose(%6) {dims = [1, 0]}
%8 : f32[4, 8] = add(%4, %7)
return %8, %4
)", {0});
  int32_t row = -1;
  std::vector<int32_t> later;
  for (const rt::Kernel& k : p.kernels) {
    if (k.kind == rt::KernelKind::kUpdateSlice) row = root_of(p, k.inputs[1]);
    if (k.kind == rt::KernelKind::kTranspose) later.push_back(root_of(p, k.outputs[0]));
  }
  ASSERT_GE(row, 0) << program_str(p);
  ASSERT_EQ(later.size(), 2u) << program_str(p);
  const rt::BufferDesc& x = p.buffers[row];
  ASSERT_EQ(x.kind, rt::BufferDesc::Kind::kTemp);
  for (int32_t b : later) {
    const rt::BufferDesc& y = p.buffers[b];
    EXPECT_TRUE(x.offset + x.max_bytes <= y.offset || y.offset + y.max_bytes <= x.offset) << program_str(p);
  }
}

}  // namespace
}  // namespace tripy::compiler

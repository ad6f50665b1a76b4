// The kernel kinds' one description (kernel_kinds.h, the field lists): every field of every
// kind survives the file format and differs in text, equality and keys when it differs in value.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/fields_text.h"
#include "runtime/program.h"
#include "runtime/program_json.h"
#include "perturb_fields.h"

namespace tripy::rt {
namespace {

using testing::perturb;

// The attributes of kernel `k`, as the struct type A its kind holds.
template <class A>
const A& attrs_of(const Kernel& k) {
  const A* out = nullptr;
  visit_kind_attrs(k, [&](const auto& a) {
    if constexpr (std::is_same_v<std::decay_t<decltype(a)>, A>) out = &a;
  });
  return *out;
}

std::string attrs_text(const Kernel& k) {
  return visit_kind_attrs(k, [](const auto& a) { return field_text(a); });
}

TEST(KernelKinds, EveryFieldOfEveryKindSurvivesTheFileFormat) {
  for (size_t i = 0; i < kNumKernelKinds; ++i) {
    Program p;
    Kernel k;
    k.kind = static_cast<KernelKind>(i);
    k.name = kernel_kind_name(k.kind);
    visit_kind_attrs(k, [](auto& a) { perturb(a); });
    p.kernels.push_back(k);
    Program back;
    ASSERT_TRUE(program_from_json(program_to_json(p), &back).ok()) << k.name;
    ASSERT_EQ(back.kernels.size(), 1u);
    EXPECT_EQ(back.kernels[0].kind, k.kind);
    const bool same = visit_kind_attrs(back.kernels[0], [&](const auto& a) {
      return fields_equal(a, attrs_of<std::decay_t<decltype(a)>>(k));
    });
    EXPECT_TRUE(same) << k.name << ": " << attrs_text(back.kernels[0]) << " vs " << attrs_text(k);
  }
}

TEST(KernelKinds, AChangedFieldChangesTheTextAndTheKey) {
  for (size_t i = 0; i < kNumKernelKinds; ++i) {
    Kernel plain, changed;
    plain.kind = changed.kind = static_cast<KernelKind>(i);
    visit_kind_attrs(changed, [](auto& a) { perturb(a); });
    const std::string kind = kernel_kind_name(plain.kind);
    std::string plain_key, changed_key;
    visit_kind_attrs(plain, [&](const auto& a) { append_field_key(plain_key, a); });
    visit_kind_attrs(changed, [&](const auto& a) { append_field_key(changed_key, a); });
    if (kind == "copy") {  // the one kind without attributes
      EXPECT_EQ(plain_key, changed_key);
      continue;
    }
    EXPECT_NE(plain_key, changed_key) << kind;
    EXPECT_NE(attrs_text(plain), attrs_text(changed)) << kind;
    EXPECT_EQ(attrs_text(plain), "{}") << kind << ": defaults print nothing";
  }
}

TEST(KernelKinds, NamesAreTheTablesAndUnknownOnesAreRefused) {
  EXPECT_STREQ(kernel_kind_name(KernelKind::kConvolution), "convolution");
  EXPECT_STREQ(kernel_kind_name(KernelKind::kPooling), "pooling");
  EXPECT_STREQ(kernel_kind_name(static_cast<KernelKind>(kNumKernelKinds)), "invalid");
  Program p;
  p.kernels.push_back(Kernel{});
  nlohmann::json j = program_to_json(p);
  j["kernels"][0]["kind"] = "conv";
  Program back;
  Status st = program_from_json(j, &back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("kind: unknown name 'conv'"), std::string::npos) << st.message();
}

// A kind's rule in the validator, for sample: logits and a key in, int32 out, its attributes in range.
TEST(KernelKinds, SampleKernelsFollowTheirRule) {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kInputDim, 0, 0}, {ShapeInstr::Op::kInputDim, 0, 1},
                     {ShapeInstr::Op::kInputDim, 1, 0}};
  p.inputs = {{"logits", DType::kFloat16, {1, 50}, {2, 50}, {4, 50}, {"", ""}}, {"key", DType::kInt64, {1}, {1}, {1}, {""}}};
  p.input_shapes = {{0, 1}, {2}};
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat16, {0, 1}},
               {BufferDesc::Kind::kInput, 1, DType::kInt64, {2}},
               {BufferDesc::Kind::kOutput, 0, DType::kInt32, {0}}};
  p.outputs = {2};
  p.output_names = {"tokens"};
  Kernel k;
  k.kind = KernelKind::kSample;
  k.name = "sample";
  k.inputs = {0, 1};
  k.outputs = {2};
  k.sample.temperature = 0.5;
  k.sample.top_k = 40;
  k.sample.top_p = 0.9;
  p.kernels = {k};
  ASSERT_TRUE(validate_program(p).ok()) << validate_program(p).message();
  auto refused = [&](void (*change)(Program&), const char* why) {
    Program q = p;
    change(q);
    const Status st = validate_program(q);
    EXPECT_FALSE(st.ok()) << why;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  refused([](Program& q) { q.kernels[0].sample.temperature = -1; }, "temperature");
  refused([](Program& q) { q.kernels[0].sample.temperature = std::nan(""); }, "temperature");
  refused([](Program& q) { q.kernels[0].sample.top_k = -1; }, "top_k");
  refused([](Program& q) { q.kernels[0].sample.top_p = 0; }, "top_p");
  refused([](Program& q) { q.kernels[0].sample.top_p = 1.5; }, "top_p");
  refused([](Program& q) { q.buffers[1].dtype = q.inputs[1].dtype = DType::kInt32; }, "key");
  refused([](Program& q) { q.buffers[2].dtype = DType::kInt64; }, "int32 output");
  refused([](Program& q) { q.buffers[0].dtype = q.inputs[0].dtype = DType::kInt32; }, "non-float");
  refused([](Program& q) { q.kernels[0].inputs = {0}; }, "needs logits, a key");
}

}  // namespace
}  // namespace tripy::rt

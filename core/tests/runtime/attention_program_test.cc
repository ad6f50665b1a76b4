// kAttention in hand-built Programs: the CPU kernel against a float64 reference (layouts, GQA,
// masks, causal with L != S, causal offsets), the JSON round trip of its attributes, and the
// load-time and run-time checks that keep a hostile file from making a backend read out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>

#include "runtime/executable_impl.h"
#include "runtime/program_json.h"
#include "test_programs.h"

namespace tripy {
namespace {

using rt::AttentionAttrs;
using rt::BufferDesc;
using rt::KernelKind;
using rt::MaskKind;
using rt::Program;
using rt::ShapeInstr;

// Sizes of one case; L and S are runtime inputs' dims (dynamic), the rest static.
struct Case {
  int64_t B = 2, Hq = 4, Hkv = 2, L = 5, S = 7, D = 8, Dv = 6;
  bool causal = false;
  MaskKind mask = MaskKind::kNone;
  std::array<int64_t, 4> mask_shape{1, 1, 1, 1};  // logical; 1s broadcast, else the full size
  AttentionAttrs::Perm q_perm{0, 1, 2, 3}, out_perm{0, 1, 2, 3};
  // kCausalOffset: the offset input (1, 1, 1, 1) and its value.
  DType offset_dtype = DType::kInt32;
  int64_t offset = 0;
};

// Key j is visible to query row i under the causal offset `c.offset`: j <= i + offset, the sum
// wrapping in the offset's dtype as a mask computing it would.
bool offset_visible(const Case& c, int64_t i, int64_t j) {
  if (c.offset_dtype == DType::kInt32)
    return j <= static_cast<int32_t>(static_cast<uint32_t>(i) + static_cast<uint32_t>(c.offset));
  return j <= static_cast<int64_t>(static_cast<uint64_t>(i) + static_cast<uint64_t>(c.offset));
}

std::vector<int64_t> permuted(const std::array<int64_t, 4>& logical, const AttentionAttrs::Perm& perm) {
  std::vector<int64_t> buf(4);
  for (int i = 0; i < 4; ++i) buf[static_cast<size_t>(perm[i])] = logical[i];
  return buf;
}

// Inputs q, k, v[, mask]; L and S slots come from inputs 0 and 1 (their dims are dynamic).
Program attention_program(const Case& c) {
  using Op = ShapeInstr::Op;
  Program p;
  auto konst = [&](int64_t v) {
    p.shape_program.push_back({Op::kConst, v, 0});
    return static_cast<rt::Slot>(p.shape_program.size() - 1);
  };
  const AttentionAttrs::Perm id{0, 1, 2, 3};
  const auto qb = permuted({c.B, c.Hq, c.L, c.D}, c.q_perm);
  const int ldim = c.q_perm[2];
  p.shape_program.push_back({Op::kInputDim, 0, ldim});  // slot 0: L
  p.shape_program.push_back({Op::kInputDim, 1, 2});     // slot 1: S
  auto slots_of = [&](const std::vector<int64_t>& dims, int dyn_dim, rt::Slot dyn) {
    std::vector<rt::Slot> s;
    for (size_t d = 0; d < dims.size(); ++d) s.push_back(static_cast<int>(d) == dyn_dim ? dyn : konst(dims[d]));
    return s;
  };
  auto input = [&](const char* name, DType t, const std::vector<int64_t>& dims, int dyn_dim, int64_t lo, int64_t hi) {
    rt::InputSpec in;
    in.name = name;
    in.dtype = t;
    for (size_t d = 0; d < dims.size(); ++d) {
      const bool dyn = static_cast<int>(d) == dyn_dim;
      in.dim_min.push_back(dyn ? lo : dims[d]);
      in.dim_opt.push_back(dims[d]);
      in.dim_max.push_back(dyn ? hi : dims[d]);
      in.dim_names.push_back("");
    }
    p.inputs.push_back(in);
  };
  input("q", DType::kFloat32, qb, ldim, 1, 512);
  input("k", DType::kFloat32, {c.B, c.Hkv, c.S, c.D}, 2, 0, 512);
  input("v", DType::kFloat32, {c.B, c.Hkv, c.S, c.Dv}, 2, 0, 512);
  const auto q_slots = slots_of(qb, ldim, 0), k_slots = slots_of({c.B, c.Hkv, c.S, c.D}, 2, 1),
             v_slots = slots_of({c.B, c.Hkv, c.S, c.Dv}, 2, 1);
  p.input_shapes = {q_slots, k_slots, v_slots};
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat32, q_slots},
               {BufferDesc::Kind::kInput, 1, DType::kFloat32, k_slots},
               {BufferDesc::Kind::kInput, 2, DType::kFloat32, v_slots}};
  rt::Kernel k;
  k.kind = KernelKind::kAttention;
  k.name = "attention";
  k.inputs = {0, 1, 2};
  k.attention.causal = c.causal;
  k.attention.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  k.attention.mask = c.mask;
  k.attention.perms[AttentionAttrs::kQ] = c.q_perm;
  k.attention.perms[AttentionAttrs::kOut] = c.out_perm;
  if (c.mask == MaskKind::kCausalOffset) {
    input("offset", c.offset_dtype, {1, 1, 1, 1}, -1, 1, 1);
    const std::vector<rt::Slot> ones = {konst(1), konst(1), konst(1), konst(1)};
    p.input_shapes.push_back(ones);
    p.buffers.push_back({BufferDesc::Kind::kInput, 3, c.offset_dtype, ones});
    k.inputs.push_back(3);
  } else if (c.mask != MaskKind::kNone) {
    const std::array<int64_t, 4> full{c.B, c.Hq, c.L, c.S};
    std::vector<rt::Slot> ms;
    std::vector<int64_t> dims;
    for (int d = 0; d < 4; ++d) {
      dims.push_back(c.mask_shape[d] == 1 ? 1 : full[d]);
      ms.push_back(c.mask_shape[d] == 1 ? konst(1) : d == 2 ? 0 : d == 3 ? 1 : konst(full[d]));
    }
    const int dyn = c.mask_shape[3] == 1 ? -1 : 3;
    input("mask", c.mask == MaskKind::kBool ? DType::kBool : DType::kFloat32, dims, dyn, 0, 512);
    if (c.mask_shape[2] != 1) {  // the mask's L dim is dynamic too
      p.inputs.back().dim_min[2] = 1;
      p.inputs.back().dim_max[2] = 512;
    }
    p.input_shapes.push_back(ms);
    p.buffers.push_back({BufferDesc::Kind::kInput, 3, p.inputs.back().dtype, ms});
    k.inputs.push_back(3);
  }
  const auto ob = permuted({c.B, c.Hq, c.L, c.Dv}, c.out_perm);
  p.buffers.push_back({BufferDesc::Kind::kOutput, 0, DType::kFloat32, slots_of(ob, c.out_perm[2], 0)});
  k.outputs = {static_cast<int32_t>(p.buffers.size() - 1)};
  p.outputs = {k.outputs[0]};
  p.output_names = {"out"};
  p.kernels = {k};
  (void)id;
  return p;
}

Tensor random_tensor(DType t, const std::vector<int64_t>& shape, std::mt19937& rng) {
  Tensor x = Tensor::empty_host(t, shape);
  std::normal_distribution<float> n;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::kBool) static_cast<uint8_t*>(x.data())[i] = (rng() % 4) != 0;
    else if (t == DType::kFloat32) static_cast<float*>(x.data())[i] = n(rng);
    else std::memset(x.data(), 0, static_cast<size_t>(x.nbytes()));
  }
  return x;
}

// Element (b, h, i, d) of a buffer stored with `perm`.
double at(const Tensor& t, const AttentionAttrs::Perm& perm, std::array<int64_t, 4> idx) {
  std::vector<int64_t> buf(4);
  for (int i = 0; i < 4; ++i) buf[static_cast<size_t>(perm[i])] = idx[i];
  int64_t off = 0;
  for (int d = 0; d < 4; ++d) off = off * t.shape()[static_cast<size_t>(d)] + buf[static_cast<size_t>(d)];
  if (t.dtype() == DType::kBool) return static_cast<const uint8_t*>(t.data())[off];
  return static_cast<const float*>(t.data())[off];
}

void expect_matches_reference(const Case& c, const std::vector<Tensor>& in, const Tensor& out) {
  const AttentionAttrs::Perm id{0, 1, 2, 3};
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        std::vector<double> s(static_cast<size_t>(c.S));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.S; ++j) {
          double x = 0;
          for (int64_t d = 0; d < c.D; ++d)
            x += at(in[0], c.q_perm, {b, h, i, d}) * at(in[1], id, {b, h / (c.Hq / c.Hkv), j, d});
          x *= scale;
          if (c.causal && j > i) x = -INFINITY;
          if (c.mask == MaskKind::kCausalOffset) {
            if (!offset_visible(c, i, j)) x = -INFINITY;
          } else if (c.mask != MaskKind::kNone) {
            std::array<int64_t, 4> mi{b, h, i, j};
            for (int d = 0; d < 4; ++d)
              if (c.mask_shape[d] == 1) mi[d] = 0;
            const double m = at(in[3], id, mi);
            x = c.mask == MaskKind::kBool ? (m != 0 ? x : -INFINITY) : x + m;
          }
          s[static_cast<size_t>(j)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        if (mx == -INFINITY) {  // no key visible: NaN, as a softmax over nothing
          for (int64_t d = 0; d < c.Dv; ++d) ASSERT_TRUE(std::isnan(at(out, c.out_perm, {b, h, i, d}))) << b << "," << h << "," << i;
          continue;
        }
        for (int64_t d = 0; d < c.Dv; ++d) {
          double want = 0;
          for (int64_t j = 0; j < c.S; ++j) want += s[static_cast<size_t>(j)] / sum * at(in[2], id, {b, h / (c.Hq / c.Hkv), j, d});
          const double got = at(out, c.out_perm, {b, h, i, d});
          ASSERT_NEAR(got, want, 1e-5 + 1e-5 * std::abs(want)) << "at " << b << "," << h << "," << i << "," << d;
        }
      }
}

void run_case(const Case& c) {
  Program p = attention_program(c);
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  std::mt19937 rng(7);
  std::vector<Tensor> in;
  for (const rt::InputSpec& spec : p.inputs) in.push_back(random_tensor(spec.dtype, spec.dim_opt, rng));
  if (c.mask == MaskKind::kCausalOffset) {
    const int32_t o32 = static_cast<int32_t>(c.offset);
    std::memcpy(in[3].data(), c.offset_dtype == DType::kInt32 ? static_cast<const void*>(&o32) : &c.offset,
                static_cast<size_t>(in[3].nbytes()));
  }
  auto out = exe.run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_matches_reference(c, in, (*out)[0]);
}

TEST(AttentionKernel, matches_float64_reference) { run_case(Case{}); }

TEST(AttentionKernel, causal_with_more_and_fewer_keys_than_queries) {
  for (int64_t s : {3, 5, 70, 130}) {
    Case c;
    c.causal = true;
    c.L = 37;
    c.S = s;
    run_case(c);
  }
}

TEST(AttentionKernel, grouped_query_heads_and_long_rows) {
  Case c;
  c.Hq = 6;
  c.Hkv = 1;
  c.L = 70;
  c.S = 150;  // several key blocks: the online softmax rescales
  run_case(c);
}

TEST(AttentionKernel, bool_and_additive_masks_broadcast) {
  for (MaskKind kind : {MaskKind::kBool, MaskKind::kAdditive})
    for (std::array<int64_t, 4> shape : {std::array<int64_t, 4>{1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 0, 0}}) {
      Case c;
      c.mask = kind;
      c.mask_shape = shape;
      run_case(c);
    }
}

TEST(AttentionKernel, reads_and_writes_through_layouts) {
  Case c;
  c.q_perm = {0, 2, 1, 3};    // q stored (B, L, H, D): a head split without a transpose
  c.out_perm = {0, 2, 1, 3};  // out stored (B, L, H, Dv): the merge back is free
  c.causal = true;
  run_case(c);
}

TEST(AttentionKernel, a_causal_offset_shows_each_row_the_keys_up_to_row_plus_offset) {
  // Offsets that hide every key from some rows (NaN there, as a fully masked row), a few, none,
  // S - L (the last row sees the whole cache) and past it; several query and key blocks.
  for (DType t : {DType::kInt32, DType::kInt64})
    for (auto [L, S] : {std::pair<int64_t, int64_t>{5, 70}, {1, 130}, {40, 150}})
      for (int64_t offset : {int64_t{-7}, int64_t{-2}, int64_t{0}, int64_t{3}, S - L, S + 5}) {
        Case c;
        c.mask = MaskKind::kCausalOffset;
        c.offset_dtype = t;
        c.offset = offset;
        c.L = L;
        c.S = S;
        c.Hq = 6;
        c.Hkv = 2;
        SCOPED_TRACE(std::string(dtype_name(t)) + " L " + std::to_string(L) + " S " + std::to_string(S) + " offset " +
                     std::to_string(offset));
        run_case(c);
      }
}

TEST(AttentionKernel, a_causal_offset_whose_sum_wraps_hides_every_key_as_the_mask_did) {
  // Rows 0..2 see every key; from row 3 on, row + offset passes the dtype's largest value and wraps
  // to a negative bound, as the iota mask it replaces computes it.
  for (DType t : {DType::kInt32, DType::kInt64}) {
    Case c;
    c.mask = MaskKind::kCausalOffset;
    c.offset_dtype = t;
    c.offset = (t == DType::kInt32 ? int64_t{std::numeric_limits<int32_t>::max()} : std::numeric_limits<int64_t>::max()) - 2;
    run_case(c);
  }
}

TEST(AttentionKernel, fully_masked_rows_are_nan_and_no_keys_give_zeros) {
  Case c;
  c.mask = MaskKind::kBool;
  c.mask_shape = {1, 1, 0, 0};
  Program p = attention_program(c);
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  std::mt19937 rng(1);
  std::vector<Tensor> in;
  for (const rt::InputSpec& spec : p.inputs) in.push_back(random_tensor(spec.dtype, spec.dim_opt, rng));
  std::memset(in[3].data(), 0, static_cast<size_t>(in[3].nbytes()));  // every key hidden
  auto out = exe.run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(std::isnan(static_cast<const float*>((*out)[0].data())[0]));

  Program empty = attention_program(Case{});
  Executable exe2 = make_executable(std::make_shared<Program>(empty), {}, Device{});
  in = {random_tensor(DType::kFloat32, {2, 4, 5, 8}, rng), random_tensor(DType::kFloat32, {2, 2, 0, 8}, rng),
        random_tensor(DType::kFloat32, {2, 2, 0, 6}, rng)};
  out = exe2.run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (int64_t i = 0; i < (*out)[0].numel(); ++i) EXPECT_EQ(static_cast<const float*>((*out)[0].data())[i], 0.0f);
}

TEST(AttentionProgram, attributes_round_trip_through_json) {
  Case c;
  c.causal = true;
  c.mask = MaskKind::kAdditive;
  c.q_perm = {0, 2, 1, 3};
  Program p = attention_program(c);
  Program back;
  ASSERT_TRUE(rt::program_from_json(rt::program_to_json(p), &back).ok());
  const AttentionAttrs& a = back.kernels[0].attention;
  EXPECT_EQ(back.kernels[0].kind, KernelKind::kAttention);
  EXPECT_TRUE(a.causal);
  EXPECT_EQ(a.mask, MaskKind::kAdditive);
  EXPECT_DOUBLE_EQ(a.scale, p.kernels[0].attention.scale);
  EXPECT_EQ(a.perms[AttentionAttrs::kQ], (AttentionAttrs::Perm{0, 2, 1, 3}));
  EXPECT_EQ(a.perms[AttentionAttrs::kK], (AttentionAttrs::Perm{0, 1, 2, 3}));
}

TEST(AttentionProgram, json_rejects_a_bad_layout) {
  Program p = attention_program(Case{});
  auto j = rt::program_to_json(p);
  // An entry past the field's type is the reader's error; one that is no permutation, the validator's.
  j["kernels"][0]["attrs"]["perms"] = {{0, 1, 2, 3}, {0, 1, 2, 300}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}};
  Program back;
  Status st = rt::program_from_json(j, &back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("attrs.perms[1][3] is out of range"), std::string::npos) << st.message();
  j["kernels"][0]["attrs"]["perms"][1][3] = 9;
  ASSERT_TRUE(rt::program_from_json(j, &back).ok());
  st = rt::validate_program(back);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a permutation of 4 dims"), std::string::npos) << st.message();
}

struct Corruption {
  const char* name;
  std::function<void(Program&)> mutate;
  const char* expected;
};
class AttentionValidateRejects : public ::testing::TestWithParam<Corruption> {};

TEST_P(AttentionValidateRejects, with_a_precise_message) {
  Case c;
  c.mask = MaskKind::kBool;
  c.mask_shape = {1, 1, 0, 0};
  Program p = attention_program(c);
  GetParam().mutate(p);
  Status st = rt::validate_program(p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(GetParam().expected), std::string::npos) << st.message();
}

const Corruption kCorruptions[] = {
    {"arity", [](Program& p) { p.kernels[0].inputs.pop_back(); }, "needs q, k, v, a mask and 1 output"},
    {"mask_kind", [](Program& p) { p.kernels[0].attention.mask = static_cast<MaskKind>(7); }, "invalid mask 7"},
    {"mask_dtype", [](Program& p) { p.kernels[0].attention.mask = MaskKind::kAdditive; }, "mask whose dtype"},
    {"dtypes", [](Program& p) { p.kernels[0].inputs[1] = 3; }, "q, k, v and out of different dtypes"},
    {"rank", [](Program& p) { p.buffers.back().shape.pop_back(); }, "output that is not 4-D"},
    {"perm", [](Program& p) { p.kernels[0].attention.perms[AttentionAttrs::kV] = {0, 1, 1, 3}; }, "not a permutation"},
    {"perm_range", [](Program& p) { p.kernels[0].attention.perms[AttentionAttrs::kOut] = {0, 1, 2, -1}; }, "not a permutation"},
    {"scale", [](Program& p) { p.kernels[0].attention.scale = std::numeric_limits<double>::quiet_NaN(); }, "scale that is not finite"},
    {"heads", [](Program& p) { p.kernels[0].attention.heads[AttentionAttrs::kK] = {-1, 2}; }, "head window"},
    {"offset_dtype", [](Program& p) { p.kernels[0].attention.mask = MaskKind::kCausalOffset; },
     "causal offset that is not int32 or int64"},
    {"offset_and_causal",
     [](Program& p) {
       p.kernels[0].attention.mask = MaskKind::kCausalOffset;
       p.kernels[0].attention.causal = true;
       p.buffers[3].dtype = p.inputs[3].dtype = DType::kInt64;
     },
     "both causal and a causal offset"},
};
INSTANTIATE_TEST_SUITE_P(Corruptions, AttentionValidateRejects, ::testing::ValuesIn(kCorruptions),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(AttentionProgram, run_checks_reject_inconsistent_sizes) {
  // A file whose k has another head size than q (D 8 vs 4): caught before any kernel reads.
  Program p = attention_program(Case{});
  p.buffers[1].shape[3] = p.buffers[2].shape[3];  // k's D becomes v's Dv
  p.inputs[1].dim_min[3] = p.inputs[1].dim_opt[3] = p.inputs[1].dim_max[3] = 6;
  p.input_shapes[1][3] = p.buffers[1].shape[3];
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  std::mt19937 rng(3);
  auto out = exe.run({random_tensor(DType::kFloat32, {2, 4, 5, 8}, rng), random_tensor(DType::kFloat32, {2, 2, 7, 6}, rng),
                      random_tensor(DType::kFloat32, {2, 2, 7, 6}, rng)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("attends q (2, 4, 5, 8) over k (2, 2, 7, 6)"), std::string::npos)
      << out.status().message();
}

TEST(AttentionProgram, a_causal_offset_round_trips_and_must_be_one_element) {
  Case c;
  c.mask = MaskKind::kCausalOffset;
  Program p = attention_program(c);
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  auto j = rt::program_to_json(p);
  EXPECT_EQ(j["kernels"][0]["attrs"]["mask"], "causal_offset");
  Program back;
  ASSERT_TRUE(rt::program_from_json(j, &back).ok());
  EXPECT_EQ(back.kernels[0].attention.mask, MaskKind::kCausalOffset);
  // An offset of seven elements: the run checks refuse it before the kernel reads one.
  p.inputs[3].dim_min[3] = p.inputs[3].dim_opt[3] = p.inputs[3].dim_max[3] = 7;
  p.input_shapes[3][3] = p.buffers[3].shape[3] = 1;  // slot 1: S (7), not 1
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  std::mt19937 rng(5);
  auto out = exe.run({random_tensor(DType::kFloat32, {2, 4, 5, 8}, rng), random_tensor(DType::kFloat32, {2, 2, 7, 8}, rng),
                      random_tensor(DType::kFloat32, {2, 2, 7, 6}, rng), random_tensor(DType::kInt32, {1, 1, 1, 7}, rng)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("with a causal offset (1, 1, 1, 7) instead of (1, 1, 1, 1)"), std::string::npos)
      << out.status().message();
}

TEST(AttentionProgram, a_head_window_past_its_buffer_is_refused_before_any_read) {
  // k and v have 2 heads: a file asking for heads [1, 3) of them must not read past the buffer.
  Program p = attention_program(Case{});
  p.kernels[0].attention.heads[AttentionAttrs::kK] = {1, 2};
  ASSERT_TRUE(rt::validate_program(p).ok()) << rt::validate_program(p).message();
  Executable exe = make_executable(std::make_shared<Program>(p), {}, Device{});
  std::mt19937 rng(4);
  auto out = exe.run({random_tensor(DType::kFloat32, {2, 4, 5, 8}, rng), random_tensor(DType::kFloat32, {2, 2, 7, 8}, rng),
                      random_tensor(DType::kFloat32, {2, 2, 7, 6}, rng)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("reads heads [1, 3) of an operand with 2"), std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace tripy

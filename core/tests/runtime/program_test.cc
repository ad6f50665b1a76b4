// The Program's shape evaluation and the validator that guards backends from corrupt files.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "runtime/program.h"
#include "runtime/program_json.h"
#include "test_programs.h"

namespace tripy::rt {
namespace {

using testing::affine_program;
using testing::f32;
using testing::rich_program;
using testing::rows_program;

std::vector<int64_t> eval(const std::vector<ShapeInstr>& instrs, const std::vector<Tensor>& inputs = {}) {
  Program p;
  p.shape_program = instrs;
  std::vector<int64_t> slots;
  p.eval_shapes(inputs, slots);
  return slots;
}

TEST(EvalShapes, arithmetic_follows_python_floor_semantics) {
  using Op = ShapeInstr::Op;
  auto s = eval({{Op::kConst, 7}, {Op::kConst, -2}, {Op::kFloorDiv, 0, 1}, {Op::kCeilDiv, 0, 1},
                 {Op::kMod, 0, 1}, {Op::kSub, 1, 0}, {Op::kMax, 0, 1}, {Op::kMin, 0, 1},
                 {Op::kMul, 0, 1}, {Op::kAdd, 0, 1}, {Op::kCeilDiv, 0, 0}});
  EXPECT_EQ(s, (std::vector<int64_t>{7, -2, -4, -3, -1, -9, 7, -2, -14, 5, 1}));
}

TEST(EvalShapes, division_by_zero_gives_zero) {
  using Op = ShapeInstr::Op;
  auto s = eval({{Op::kConst, 7}, {Op::kConst, 0}, {Op::kFloorDiv, 0, 1}, {Op::kCeilDiv, 0, 1}, {Op::kMod, 0, 1}});
  EXPECT_EQ(s, (std::vector<int64_t>{7, 0, 0, 0, 0}));
}

TEST(EvalShapes, overflow_saturates_instead_of_wrapping) {
  using Op = ShapeInstr::Op;
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  auto s = eval({{Op::kConst, big}, {Op::kConst, small}, {Op::kConst, -1}, {Op::kMul, 0, 0},
                 {Op::kAdd, 0, 0}, {Op::kFloorDiv, 1, 2}, {Op::kMod, 1, 2}, {Op::kSub, 1, 0}});
  EXPECT_EQ(s, (std::vector<int64_t>{big, small, -1, big, big, big, 0, small}));
}

TEST(EvalShapes, reads_input_dims_and_tolerates_bad_references) {
  using Op = ShapeInstr::Op;
  Tensor x = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  auto s = eval({{Op::kInputDim, 0, 1}, {Op::kInputDim, 0, 0}, {Op::kMul, 0, 1},
                 {Op::kInputDim, 1, 0}, {Op::kInputDim, 0, 5}, {Op::kAdd, 0, 9}},
                {x});
  EXPECT_EQ(s, (std::vector<int64_t>{3, 2, 6, 0, 0, 3}));
}

TEST(EvalShapes, reads_shape_values_and_tolerates_other_tensors) {
  using Op = ShapeInstr::Op;
  const int64_t one[1] = {5};
  const int32_t narrow = 5;
  auto s = eval({{Op::kInputValue, 0}, {Op::kInputValue, 1}, {Op::kInputValue, 2}, {Op::kInputValue, 3},
                 {Op::kInputValue, 9}, {Op::kMul, 0, 0}},
                {Tensor::host_int64(7), testing::host_tensor(DType::kInt64, {1}, one),
                 testing::host_tensor(DType::kInt32, {}, &narrow),
                 Tensor::borrow(nullptr, DType::kInt64, {}, Device{Device::Kind::kGpu, 0}, nullptr)});
  EXPECT_EQ(s, (std::vector<int64_t>{7, 0, 0, 0, 0, 49}));
}

TEST(EvalShapes, opt_inputs_hold_opt_sizes_and_values) {
  Program p = rows_program();
  std::vector<int64_t> slots;
  p.eval_shapes(p.opt_inputs(Device{Device::Kind::kGpu, 0}), slots);
  EXPECT_EQ(p.buffer_shape(1, slots), (std::vector<int64_t>{2, 2}));
  p.eval_shapes({f32({2}, {0, 0}), Tensor::host_int64(5)}, slots);
  EXPECT_EQ(p.buffer_shape(1, slots), (std::vector<int64_t>{5, 2}));
}

TEST(EvalShapes, sample_inputs_spread_each_range_and_are_the_opt_set_alone_when_fixed) {
  // n ranges over [0, 6] (opt 2): opt, min, max, one above min, the odd value nearest max.
  Program p = rows_program();
  std::vector<int64_t> rows, slots;
  for (const std::vector<Tensor>& inputs : p.sample_inputs(Device{Device::Kind::kGpu, 0})) {
    ASSERT_EQ(inputs.size(), 2u);
    EXPECT_EQ(inputs[0].shape(), (std::vector<int64_t>{2}));  // x's one size is fixed
    p.eval_shapes(inputs, slots);
    rows.push_back(p.buffer_shape(1, slots)[0]);
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{2, 0, 6, 1, 5}));
  p.inputs[1].value_min = p.inputs[1].value_max = 2;
  EXPECT_EQ(p.sample_inputs(Device{Device::Kind::kGpu, 0}).size(), 1u);
}

TEST(ProgramJson, shape_values_round_trip_and_tensors_need_no_kind) {
  const nlohmann::json j = program_to_json(rows_program());
  EXPECT_EQ(j["inputs"][1]["kind"], "shape_value");
  EXPECT_EQ(j["inputs"][1]["value_bounds"], nlohmann::json({0, 2, 6}));
  EXPECT_FALSE(j["inputs"][0].contains("kind"));
  EXPECT_EQ(j["shape_program"][1][0], "input_value");
  Program back;
  Status st = program_from_json(j, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.inputs[0].kind, InputSpec::Kind::kTensor);
  EXPECT_EQ(back.inputs[1].kind, InputSpec::Kind::kShapeValue);
  EXPECT_EQ(back.inputs[1].value_min, 0);
  EXPECT_EQ(back.inputs[1].value_opt, 2);
  EXPECT_EQ(back.inputs[1].value_max, 6);
  EXPECT_EQ(back.shape_program[1].op, ShapeInstr::Op::kInputValue);
  EXPECT_EQ(program_to_json(back), j);

  nlohmann::json bad = j;
  bad["inputs"][1]["kind"] = "scalar";
  st = program_from_json(bad, &back);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("program.inputs[1].kind: unknown name 'scalar'"), std::string::npos) << st.message();
  bad = j;
  bad["inputs"][1]["value_bounds"] = {0, 2};
  EXPECT_NE(program_from_json(bad, &back).message().find("value_bounds must be [min, opt, max]"), std::string::npos);
  bad = j;
  bad["inputs"][1].erase("value_bounds");
  EXPECT_NE(program_from_json(bad, &back).message().find("program.inputs[1].value_bounds is missing"), std::string::npos);
}

TEST(ProgramJson, donations_round_trip_and_are_absent_by_default) {
  Program p = rich_program();
  EXPECT_FALSE(program_to_json(p)["inputs"][0].contains("donated"));
  EXPECT_FALSE(program_to_json(p)["buffers"][5].contains("donor"));
  p.inputs[0].donated = true;
  p.buffers[5].donor = 0;
  const nlohmann::json j = program_to_json(p);
  EXPECT_EQ(j["inputs"][0]["donated"], true);
  EXPECT_EQ(j["buffers"][5]["donor"], 0);
  Program back;
  ASSERT_TRUE(program_from_json(j, &back).ok());
  EXPECT_TRUE(back.inputs[0].donated);
  EXPECT_FALSE(back.inputs[1].donated);
  EXPECT_EQ(back.buffers[5].donor, 0);
  EXPECT_EQ(back.buffers[6].donor, -1);
  nlohmann::json bad = j;
  bad["inputs"][0]["donated"] = 1;
  EXPECT_NE(program_from_json(bad, &back).message().find("donated is not true or false"), std::string::npos);
}

TEST(BufferShape, maps_slots_and_tolerates_bad_ids) {
  Program p = rich_program();
  std::vector<int64_t> slots;
  p.eval_shapes({f32({3, 4}, std::vector<float>(12)), f32({3}, {0, 0, 0})}, slots);
  EXPECT_EQ(p.buffer_shape(0, slots), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(p.buffer_shape(4, slots), (std::vector<int64_t>{12}));
  EXPECT_EQ(p.buffer_shape(11, slots), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(p.buffer_shape(-1, slots).empty());
  EXPECT_TRUE(p.buffer_shape(99, slots).empty());
}

TEST(EwOps, names_and_reductions) {
  EXPECT_STREQ(ew_op_name(EwOp::kLoad), "load");
  EXPECT_STREQ(ew_op_name(EwOp::kFloorDiv), "floordiv");
  EXPECT_STREQ(ew_op_name(EwOp::kReduceMin), "reduce_min");
  EXPECT_STREQ(ew_op_name(EwOp::kNumOps), "invalid");
  EXPECT_TRUE(is_reduction(EwOp::kReduceSum));
  EXPECT_FALSE(is_reduction(EwOp::kMax));
}

TEST(ValidateProgram, accepts_well_formed_programs) {
  EXPECT_TRUE(validate_program(affine_program()).ok()) << validate_program(affine_program()).message();
  EXPECT_TRUE(validate_program(rows_program()).ok()) << validate_program(rows_program()).message();
  Status st = validate_program(rich_program());
  EXPECT_TRUE(st.ok()) << st.message();
}

struct Corruption {
  const char* name;
  std::function<void(Program&)> mutate;
  const char* expected;  // a fragment of the message
};

class ValidateRejects : public ::testing::TestWithParam<Corruption> {};

TEST_P(ValidateRejects, with_data_loss_and_a_precise_message) {
  Program p = rich_program();
  GetParam().mutate(p);
  Status st = validate_program(p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(GetParam().expected), std::string::npos) << st.message();
}

using Op = ShapeInstr::Op;
using BK = BufferDesc::Kind;
const Corruption kCorruptions[] = {
    {"later_slot", [](Program& p) { p.shape_program[4].b = 6; }, "only earlier slots"},
    {"self_slot", [](Program& p) { p.shape_program[4].a = 4; }, "only earlier slots"},
    {"bad_input_dim", [](Program& p) { p.shape_program[0].b = 2; }, "dimension 2 of input 0"},
    {"bad_input", [](Program& p) { p.shape_program[0].a = 7; }, "of input 7"},
    {"bad_shape_opcode", [](Program& p) { p.shape_program[4].op = static_cast<Op>(77); }, "invalid opcode"},
    {"input_bounds", [](Program& p) { p.inputs[0].dim_min[0] = 9; }, "not 0 <= min <= opt <= max"},
    {"input_ranks", [](Program& p) { p.inputs[0].dim_max.pop_back(); }, "different ranks"},
    {"input_dtype", [](Program& p) { p.inputs[0].dtype = static_cast<DType>(kNumDTypes); }, "invalid dtype"},
    {"input_shapes_count", [](Program& p) { p.input_shapes.pop_back(); }, "input_shapes has 1 entries"},
    {"input_shapes_slot", [](Program& p) { p.input_shapes[0][1] = 100; }, "missing slot 100"},
    {"check_slot", [](Program& p) { p.checks[0].b = -1; }, "shape check 0 uses a missing slot"},
    {"check_source", [](Program& p) { p.checks[0].source = 2; }, "missing source 2"},
    {"buffer_slot", [](Program& p) { p.buffers[3].shape[0] = 9; }, "buffer 3 uses missing slot 9"},
    {"buffer_dtype", [](Program& p) { p.buffers[3].dtype = static_cast<DType>(200); }, "buffer 3 has an invalid dtype"},
    {"buffer_kind", [](Program& p) { p.buffers[3].kind = static_cast<BK>(9); }, "buffer 3 has an invalid kind"},
    {"buffer_input", [](Program& p) { p.buffers[0].index = 2; }, "missing input 2"},
    {"buffer_input_dtype", [](Program& p) { p.buffers[0].dtype = DType::kInt32; }, "dtype and rank of input 0"},
    {"buffer_constant", [](Program& p) { p.buffers[2].index = 2; }, "missing constant 2"},
    {"constant_size", [](Program& p) { p.shape_program[1].a = 5; }, "shape of constant 0"},
    {"constant_dtype", [](Program& p) { p.buffers[12].dtype = DType::kInt64; }, "dtype and shape of constant 1"},
    {"constant_shape", [](Program& p) { p.constants[0] = Tensor::borrow(nullptr, DType::kFloat32, {-1}, Device{}, nullptr); }, "constant 0 has an invalid shape"},
    {"temp_outside_arena", [](Program& p) { p.buffers[9].offset = 1024; }, "inside the 1024-byte arena"},
    {"temp_misaligned", [](Program& p) { p.buffers[9].offset = 770; }, "aligned range"},
    {"temp_overflow", [](Program& p) { p.buffers[9].max_bytes = std::numeric_limits<int64_t>::max(); }, "aligned range"},
    {"arena_negative", [](Program& p) { p.arena_bytes = -1; }, "arena size -1"},
    {"output_index", [](Program& p) { p.buffers[5].index = 1; }, "claims to be output 1"},
    {"alias_missing", [](Program& p) { p.buffers[4].index = 50; }, "aliases missing buffer 50"},
    {"alias_dtype", [](Program& p) { p.buffers[4].index = 12; }, "another dtype"},
    {"alias_cycle", [](Program& p) { p.buffers[3] = p.buffers[4]; p.buffers[3].index = 4; }, "alias cycle"},
    {"output_names", [](Program& p) { p.output_names.pop_back(); }, "5 outputs but 4 output names"},
    {"donor_not_donated", [](Program& p) { p.buffers[5].donor = 0; }, "which is not a donated tensor input"},
    {"donor_missing", [](Program& p) { p.buffers[5].donor = 7; }, "input 7's memory, which is not a donated"},
    {"donor_twice",
     [](Program& p) {
       p.inputs[0].donated = true;
       p.buffers[5].donor = p.buffers[7].donor = 0;
       p.buffers[5].shape = p.buffers[0].shape;
     },
     "buffer 7 lives in input 0's memory"},
    {"output_list_disagrees", [](Program& p) { p.outputs[0] = 3; }, "buffer 5 claims to be output 0"},
    {"output_not_output", [](Program& p) { p.buffers[5].kind = BK::kTemp; }, "output 0 is not an output buffer"},
    {"output_unwritten", [](Program& p) { p.kernels[1].outputs = {3}; }, "output 0 is never written"},
    {"kernel_kind", [](Program& p) { p.kernels[1].kind = static_cast<KernelKind>(42); }, "invalid kind"},
    {"kernel_buffer", [](Program& p) { p.kernels[1].inputs = {14}; }, "reads missing buffer 14"},
    {"kernel_writes_input", [](Program& p) { p.kernels[2].outputs = {0}; }, "which is an input or a constant"},
    {"kernel_source", [](Program& p) { p.kernels[0].source = 5; }, "missing source"},
    {"dot_arity", [](Program& p) { p.kernels[4].dot.has_bias = false; }, "needs 2 inputs"},
    {"dot_rank", [](Program& p) { p.kernels[4].inputs = {13, 3, 2}; }, "operand ranks 1 and 2"},
    {"dot_activation", [](Program& p) { p.kernels[4].dot.activation = static_cast<Activation>(3); }, "invalid activation"},
    // Only quantized operands may write a wider accumulator (int8 -> int32, float8 -> float32).
    {"dot_result_dtype", [](Program& p) { p.buffers[8].dtype = DType::kInt32; }, "writes int32 from float32 operands"},
    // A scale is float8's folded rescale: finite, and on float8 operands with no bias or activation.
    {"dot_scale_float32", [](Program& p) { p.kernels[4].dot.scale = 0.5; }, "scales the sum of float32 operands"},
    {"dot_scale_nan", [](Program& p) { p.kernels[4].dot.scale = std::nan(""); }, "has a scale out of range"},
    {"transpose_perm", [](Program& p) { p.kernels[2].transpose.perm = {0, 0}; }, "invalid permutation"},
    {"transpose_rank", [](Program& p) { p.kernels[2].transpose.perm = {0}; }, "wrong rank"},
    {"slice_slot", [](Program& p) { p.kernels[5].slice.steps[1] = 40; }, "missing slot"},
    {"slice_rank", [](Program& p) { p.kernels[5].slice.starts.pop_back(); }, "starts/steps of the wrong rank"},
    {"concat_axis", [](Program& p) { p.kernels[6].concatenate.axis = 2; }, "axis 2 out of range"},
    {"gather_indices", [](Program& p) { p.kernels[7].inputs = {10, 1}; }, "not int32 or int64"},
    {"gather_axis", [](Program& p) { p.kernels[7].gather.axis = -1; }, "axis or a result rank"},
    {"copy_dtype", [](Program& p) { p.kernels[1].inputs = {12}; }, "of one dtype"},
    {"fused_domain", [](Program& p) { p.kernels[0].fused.domain[1] = 99; }, "domain with a missing slot"},
    {"fused_reduce_from", [](Program& p) { p.kernels[0].fused.reduce_from = 3; }, "reduce_from out of range"},
    {"fused_axes_count", [](Program& p) { p.kernels[0].fused.input_axes.pop_back(); }, "different number of inputs"},
    {"fused_axes_rank", [](Program& p) { p.kernels[0].fused.input_axes[1] = {0, 1}; }, "input 1 with the wrong rank"},
    {"fused_axis", [](Program& p) { p.kernels[0].fused.input_axes[1] = {2}; }, "missing axis 2"},
    {"fused_later_register", [](Program& p) { p.kernels[0].fused.instrs[2].b = 2; }, "instruction 2 (mul)"},
    {"fused_load_input", [](Program& p) { p.kernels[0].fused.instrs[0].a = 3; }, "instruction 0 (load)"},
    {"fused_load_dtype", [](Program& p) { p.kernels[0].fused.instrs[0].dtype = DType::kFloat16; }, "instruction 0 (load)"},
    {"fused_binary_dtypes", [](Program& p) { p.kernels[0].fused.instrs[7].dtype = DType::kInt32; }, "instruction 8 (gt)"},
    {"fused_compare_result", [](Program& p) { p.kernels[0].fused.instrs[8].dtype = DType::kFloat32; }, "instruction 8 (gt)"},
    {"fused_select_cond", [](Program& p) { p.kernels[0].fused.instrs[9].a = 6; }, "instruction 9 (select)"},
    {"fused_unused_operand", [](Program& p) { p.kernels[0].fused.instrs[0].b = 9; }, "instruction 0 (load) sets operands it does not use"},
    {"fused_const_operand", [](Program& p) { p.kernels[0].fused.instrs[5].a = 0; }, "instruction 5 (const) sets operands"},
    {"fused_opcode", [](Program& p) { p.kernels[0].fused.instrs[3].op = EwOp::kNumOps; }, "instruction 3 has an invalid opcode"},
    {"fused_iota_axis", [](Program& p) { p.kernels[0].fused.instrs[7] = {EwOp::kIota, DType::kFloat32, 2}; }, "instruction 7 (iota)"},
    {"fused_output_reg", [](Program& p) { p.kernels[0].fused.output_regs = {10}; }, "stores missing register 10"},
    {"fused_output_count", [](Program& p) { p.kernels[0].fused.output_regs = {}; }, "one register per output"},
    {"fused_row_to_element", [](Program& p) { p.buffers[13].shape = {0, 1}; }, "of the wrong rank"},
    {"fused_output_dtype", [](Program& p) { p.kernels[0].fused.output_regs = {8}; }, "stores a bool register into a float32 buffer"},
};

INSTANTIATE_TEST_SUITE_P(Corruptions, ValidateRejects, ::testing::ValuesIn(kCorruptions),
                         [](const auto& info) { return std::string(info.param.name); });

// Shape values: read only by kInputValue, never by a buffer, always 0-d int64 with sane bounds.
class ValidateRejectsShapeValues : public ::testing::TestWithParam<Corruption> {};

TEST_P(ValidateRejectsShapeValues, with_data_loss_and_a_precise_message) {
  Program p = rows_program();
  GetParam().mutate(p);
  Status st = validate_program(p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(GetParam().expected), std::string::npos) << st.message();
}

const Corruption kShapeValueCorruptions[] = {
    {"value_of_tensor", [](Program& p) { p.shape_program[1].a = 0; }, "input 0, which is not a shape value"},
    {"value_of_missing", [](Program& p) { p.shape_program[1].a = 5; }, "input 5, which is not a shape value"},
    {"dim_of_value", [](Program& p) { p.shape_program[0] = {Op::kInputDim, 1, 0}; }, "dimension 0 of input 1"},
    {"buffer_reads_value", [](Program& p) { p.buffers[0].index = 1; }, "a shape value, which kernels cannot read"},
    {"value_bounds", [](Program& p) { p.inputs[1].value_opt = 9; }, "value bounds [0, 9, 6]"},
    {"negative_value", [](Program& p) { p.inputs[1].value_min = -1; }, "value bounds [-1, 2, 6]"},
    {"value_dtype", [](Program& p) { p.inputs[1].dtype = DType::kInt32; }, "must be a 0-d int64 tensor"},
    {"value_rank", [](Program& p) { p.inputs[1].dim_min = {1}; }, "must be a 0-d int64 tensor"},
    {"value_shape_slots", [](Program& p) { p.input_shapes[1] = {0}; }, "input 1 has rank 0 but 1 shape slots"},
    {"input_kind", [](Program& p) { p.inputs[1].kind = static_cast<InputSpec::Kind>(7); }, "invalid kind"},
};

INSTANTIATE_TEST_SUITE_P(Corruptions, ValidateRejectsShapeValues, ::testing::ValuesIn(kShapeValueCorruptions),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tripy::rt

// Hand-built Programs shared by the runtime tests: tiny runnable programs (one with a shape-value
// input) and one that uses every kernel kind and Program field (for validation and file-format
// round trips).
#pragma once

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "runtime/program.h"

namespace tripy::rt::testing {

inline Tensor host_tensor(DType dtype, std::vector<int64_t> shape, const void* bytes) {
  Tensor t = Tensor::empty_host(dtype, std::move(shape));
  if (t.nbytes() > 0) std::memcpy(t.data(), bytes, static_cast<size_t>(t.nbytes()));
  return t;
}

inline Tensor f32(std::vector<int64_t> shape, std::vector<float> values) {
  return host_tensor(DType::kFloat32, std::move(shape), values.data());
}

// out = x * 2 + 1 for x: float32 [n], n in [1, 4] (opt 2).
inline Program affine_program() {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kInputDim, 0, 0}};
  p.inputs = {{"x", DType::kFloat32, {1}, {2}, {4}, {""}}};
  p.input_shapes = {{0}};
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat32, {0}},
               {BufferDesc::Kind::kOutput, 0, DType::kFloat32, {0}}};
  p.outputs = {1};
  p.output_names = {"out"};
  Kernel k;
  k.kind = KernelKind::kFused;
  k.name = "fused_mul_add";
  k.inputs = {0};
  k.outputs = {1};
  k.fused.domain = {0};
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0}};
  k.fused.instrs = {{EwOp::kLoad, DType::kFloat32, 0},
                    {EwOp::kConst, DType::kFloat32, -1, -1, -1, 2.0},
                    {EwOp::kMul, DType::kFloat32, 0, 1},
                    {EwOp::kConst, DType::kFloat32, -1, -1, -1, 1.0},
                    {EwOp::kAdd, DType::kFloat32, 2, 3}};
  k.fused.output_regs = {4};
  k.source = 0;
  p.kernels = {k};
  p.sources = {{{"model.py", 3, "forward", 11, 20}, {"main.py", 7, "main", -1, -1}}};
  return p;
}

// out = x broadcast to [n, 2] for x: float32 [2] and n: a shape value (tp.DimensionInputInfo)
// in [0, 6] (opt 2), which only the shape program reads.
inline Program rows_program() {
  Program p;
  p.shape_program = {{ShapeInstr::Op::kInputDim, 0, 0}, {ShapeInstr::Op::kInputValue, 1, 0}};
  InputSpec n;
  n.name = "n";
  n.dtype = DType::kInt64;
  n.kind = InputSpec::Kind::kShapeValue;
  n.value_min = 0;
  n.value_opt = 2;
  n.value_max = 6;
  p.inputs = {{"x", DType::kFloat32, {2}, {2}, {2}, {""}}, n};
  p.input_shapes = {{0}, {}};
  p.buffers = {{BufferDesc::Kind::kInput, 0, DType::kFloat32, {0}},
               {BufferDesc::Kind::kOutput, 0, DType::kFloat32, {1, 0}}};
  p.outputs = {1};
  p.output_names = {"rows"};
  Kernel k;
  k.kind = KernelKind::kFused;
  k.name = "fused_broadcast";
  k.inputs = {0};
  k.outputs = {1};
  k.fused.domain = {1, 0};
  k.fused.reduce_from = 2;
  k.fused.input_axes = {{1}};
  k.fused.instrs = {{EwOp::kLoad, DType::kFloat32, 0}};
  k.fused.output_regs = {0};
  p.kernels = {k};
  return p;
}

// x: float32 [batch in [1, 8], 4], y: float32 [batch]. Every kernel kind, both checks, aliases,
// temps, constants and sources appear at least once.
inline Program rich_program() {
  using Op = ShapeInstr::Op;
  using B = BufferDesc::Kind;
  Program p;
  p.shape_program = {
      {Op::kInputDim, 0, 0},  // s0 batch
      {Op::kConst, 4, 0},     // s1
      {Op::kInputDim, 1, 0},  // s2 batch of y
      {Op::kConst, 1, 0},     // s3
      {Op::kMul, 0, 1},       // s4 batch * 4
      {Op::kConst, 0, 0},     // s5
      {Op::kAdd, 1, 1},       // s6 8
      {Op::kConst, 2, 0},     // s7
      {Op::kCeilDiv, 4, 7},   // s8
  };
  p.inputs = {{"x", DType::kFloat32, {1, 4}, {2, 4}, {8, 4}, {"batch", ""}},
              {"y", DType::kFloat32, {1}, {2}, {8}, {"batch"}}};
  p.input_shapes = {{0, 1}, {2}};
  p.checks = {{ShapeCheck::Kind::kEqual, 0, 2, "x and y must have the same batch size.", 0},
              {ShapeCheck::Kind::kBroadcast, 3, 0, "batch must broadcast.", -1}};
  const float c0[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  const int32_t c1[2] = {3, 0};
  p.constants = {host_tensor(DType::kFloat32, {4}, c0), host_tensor(DType::kInt32, {2}, c1)};
  p.buffers = {
      {B::kInput, 0, DType::kFloat32, {0, 1}},                // b0 x
      {B::kInput, 1, DType::kFloat32, {2}},                   // b1 y
      {B::kConstant, 0, DType::kFloat32, {1}},                // b2 c0
      {B::kTemp, 0, DType::kFloat32, {0, 1}, 0, 128},         // b3 t = x * c0 + y
      {B::kAlias, 3, DType::kFloat32, {4}},                   // b4 t flat
      {B::kOutput, 0, DType::kFloat32, {4}},                  // b5 out0
      {B::kTemp, 0, DType::kFloat32, {1, 0}, 256, 128},       // b6 t^T
      {B::kOutput, 1, DType::kFloat32, {1, 0}},               // b7 out1
      {B::kTemp, 0, DType::kFloat32, {1, 1}, 512, 64},        // b8 relu(t^T t + c0)
      {B::kTemp, 0, DType::kFloat32, {1, 1}, 768, 64},        // b9 slice of b8
      {B::kOutput, 2, DType::kFloat32, {6, 1}},               // b10 concat(b8, b9)
      {B::kOutput, 3, DType::kFloat32, {7, 1}},               // b11 gather(b10, c1)
      {B::kConstant, 1, DType::kInt32, {7}},                  // b12 c1
      {B::kOutput, 4, DType::kFloat32, {0}},                  // b13 row sums of t
  };
  p.outputs = {5, 7, 10, 11, 13};
  p.output_names = {"flat", "transposed", "joined", "picked", "sums"};
  p.arena_bytes = 1024;

  Kernel fused;
  fused.kind = KernelKind::kFused;
  fused.name = "fused_mul_add_max";
  fused.inputs = {0, 2, 1};
  fused.outputs = {3};
  fused.fused.domain = {0, 1};
  fused.fused.reduce_from = 2;
  fused.fused.input_axes = {{0, 1}, {1}, {0}};
  fused.fused.instrs = {{EwOp::kLoad, DType::kFloat32, 0},
                        {EwOp::kLoad, DType::kFloat32, 1},
                        {EwOp::kMul, DType::kFloat32, 0, 1},
                        {EwOp::kLoad, DType::kFloat32, 2},
                        {EwOp::kAdd, DType::kFloat32, 2, 3},
                        {EwOp::kConst, DType::kFloat32, -1, -1, -1, -std::numeric_limits<double>::infinity()},
                        {EwOp::kMax, DType::kFloat32, 4, 5},
                        {EwOp::kConst, DType::kFloat32, -1, -1, -1, 0.1},
                        {EwOp::kGt, DType::kBool, 6, 7},
                        {EwOp::kSelect, DType::kFloat32, 8, 6, 7}};
  fused.fused.output_regs = {9};
  fused.source = 0;

  auto simple = [](KernelKind kind, const char* name, std::vector<int32_t> in, std::vector<int32_t> out) {
    Kernel k;
    k.kind = kind;
    k.name = name;
    k.inputs = std::move(in);
    k.outputs = std::move(out);
    return k;
  };
  Kernel flat = simple(KernelKind::kCopy, "copy_flat", {4}, {5});
  Kernel transpose = simple(KernelKind::kTranspose, "transpose", {3}, {6});
  transpose.transpose.perm = {1, 0};
  Kernel out1 = simple(KernelKind::kCopy, "copy_t", {6}, {7});
  Kernel dot = simple(KernelKind::kDot, "dot_bias_relu", {6, 3, 2}, {8});
  dot.dot = {false, false, true, Activation::kRelu};
  dot.source = 1;
  Kernel slice = simple(KernelKind::kSlice, "slice", {8}, {9});
  slice.slice.starts = {5, 5};
  slice.slice.steps = {3, 3};
  Kernel concat = simple(KernelKind::kConcatenate, "concat", {8, 9}, {10});
  concat.concatenate.axis = 0;
  Kernel gather = simple(KernelKind::kGather, "gather", {10, 12}, {11});
  gather.gather.axis = 0;
  Kernel sums = simple(KernelKind::kFused, "fused_reduce_sum", {3}, {13});
  sums.fused.domain = {0, 1};
  sums.fused.reduce_from = 1;
  sums.fused.input_axes = {{0, 1}};
  sums.fused.instrs = {{EwOp::kLoad, DType::kFloat32, 0}, {EwOp::kReduceSum, DType::kFloat32, 0}};
  sums.fused.output_regs = {1};
  p.kernels = {fused, flat, transpose, out1, dot, slice, concat, gather, sums};
  p.sources = {{{"model.py", 12, "forward", 8, 20}},
               {{"model.py", 14, "forward", -1, -1}, {"main.py", 2, "<module>", 0, 5}}};
  return p;
}

}  // namespace tripy::rt::testing

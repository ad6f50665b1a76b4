// Hand-built programs for the CUDA backend tests: every EwOp over each compute type, broadcasting,
// row reductions (softmax, layernorm), dots and layout kernels. The GPU test runs each on both
// backends and compares; the codegen test compiles every generated kernel with NVRTC (no GPU).
#pragma once

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/half.h"
#include "cpu_test_util.h"
#include "../runtime/test_programs.h"

namespace tripy::cuda_testing {

using namespace tripy::rt;
using cpu::testing::ins;
using cpu::testing::ProgramBuilder;

struct GpuCase {
  std::string name;
  Program program;
  std::vector<int64_t> slots;
  std::vector<Tensor> inputs;  // host
};

// Deterministic values of any dtype: floats in [-3, 3), ints in [-20, 20), bools.
inline Tensor random_tensor(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::empty_host(dtype, std::move(shape));
  uint32_t s = seed * 2654435761u + 12345u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f;
  };
  for (int64_t i = 0; i < t.numel(); ++i) {
    float f = -3.0f + 6.0f * next();
    int64_t v = static_cast<int64_t>(next() * 40.0f) - 20;
    switch (dtype) {
      case DType::kFloat32: static_cast<float*>(t.data())[i] = f; break;
      case DType::kFloat16: static_cast<uint16_t*>(t.data())[i] = cpu::float_to_half(f); break;
      case DType::kBFloat16: static_cast<uint16_t*>(t.data())[i] = cpu::float_to_bfloat16(f); break;
      case DType::kFloat8E4M3: static_cast<uint8_t*>(t.data())[i] = cpu::float_to_float8(f); break;
      case DType::kInt4: static_cast<int8_t*>(t.data())[i] = cpu::wrap_int4(v); break;
      case DType::kInt8: static_cast<int8_t*>(t.data())[i] = static_cast<int8_t>(v); break;
      case DType::kInt32: static_cast<int32_t*>(t.data())[i] = static_cast<int32_t>(v); break;
      case DType::kInt64: static_cast<int64_t*>(t.data())[i] = v * 1000003; break;
      case DType::kBool: static_cast<uint8_t*>(t.data())[i] = next() < 0.5f; break;
    }
  }
  return t;
}

inline GpuCase finish(std::string name, ProgramBuilder& b, uint32_t seed = 7) {
  GpuCase c;
  c.name = std::move(name);
  c.program = b.program();
  c.slots = b.slots();
  for (const BufferDesc& d : c.program.buffers)
    if (d.kind == BufferDesc::Kind::kInput) {
      std::vector<int64_t> shape;
      for (Slot s : d.shape) shape.push_back(c.slots[s]);
      if (static_cast<size_t>(d.index) >= c.inputs.size()) c.inputs.resize(d.index + 1);
      c.inputs[d.index] = random_tensor(d.dtype, shape, seed + d.index * 101);
      InputSpec spec;
      spec.name = "in" + std::to_string(d.index);
      spec.dtype = d.dtype;
      spec.dim_min = spec.dim_opt = spec.dim_max = shape;
      spec.dim_names.assign(shape.size(), "");
      if (c.program.inputs.size() <= static_cast<size_t>(d.index)) c.program.inputs.resize(d.index + 1);
      c.program.inputs[d.index] = spec;
    }
  return c;
}

// out = op(loads...) over `shape`, each operand of dtype `in`.
inline GpuCase elementwise(EwOp op, DType in, DType out, int arity, std::vector<int64_t> shape = {7, 33}) {
  ProgramBuilder b;
  std::vector<int32_t> ids;
  for (int i = 0; i < arity; ++i) ids.push_back(b.input(op == EwOp::kSelect && i == 0 ? DType::kBool : in, shape));
  int32_t o = b.output(out, shape);
  Kernel& k = b.kernel(KernelKind::kFused, std::string("fused_") + ew_op_name(op), ids, {o});
  k.fused.domain = b.dims(shape);
  k.fused.reduce_from = static_cast<int32_t>(shape.size());
  std::vector<int32_t> axes;
  for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int32_t>(d));
  for (int i = 0; i < arity; ++i) {
    k.fused.input_axes.push_back(axes);
    k.fused.instrs.push_back(ins(EwOp::kLoad, op == EwOp::kSelect && i == 0 ? DType::kBool : in, i));
  }
  k.fused.instrs.push_back(ins(op, out, 0, arity > 1 ? 1 : -1, arity > 2 ? 2 : -1));
  k.fused.output_regs = {arity};
  return finish(std::string(ew_op_name(op)) + "_" + std::string(dtype_name(in)), b);
}

// One fused kernel over `domain` with the given inputs (dtype, shape, axes) and instructions.
struct FusedSpec {
  std::string name;
  std::vector<int64_t> domain;
  int32_t reduce_from;
  std::vector<std::tuple<DType, std::vector<int64_t>, std::vector<int32_t>>> inputs;
  std::vector<Instr> instrs;
  std::vector<std::pair<int32_t, std::vector<int64_t>>> outputs;  // register, shape
};

inline GpuCase fused(const FusedSpec& s) {
  ProgramBuilder b;
  std::vector<int32_t> ids, outs;
  for (const auto& [dt, shape, axes] : s.inputs) ids.push_back(b.input(dt, shape));
  for (const auto& [reg, shape] : s.outputs) outs.push_back(b.output(s.instrs[reg].dtype, shape));
  Kernel& k = b.kernel(KernelKind::kFused, s.name, ids, outs);
  k.fused.domain = b.dims(s.domain);
  k.fused.reduce_from = s.reduce_from;
  for (const auto& in : s.inputs) k.fused.input_axes.push_back(std::get<2>(in));
  k.fused.instrs = s.instrs;
  for (const auto& o : s.outputs) k.fused.output_regs.push_back(o.first);
  return finish(s.name, b);
}

inline GpuCase softmax(DType dt, int64_t rows, int64_t len) {
  const DType F = dt;
  return fused({"softmax_" + std::string(dtype_name(dt)) + "_" + std::to_string(rows) + "x" + std::to_string(len),
                {rows, len},
                1,
                {{dt, {rows, len}, {0, 1}}},
                {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceMax, F, 0), ins(EwOp::kSub, F, 0, 1),
                 ins(EwOp::kExp, F, 2), ins(EwOp::kReduceSum, F, 3), ins(EwOp::kDiv, F, 3, 4)},
                {{5, {rows, len}}}});
}

// (x - mean) * rsqrt(var + eps) * gamma + beta, with var from a second pass.
inline GpuCase layernorm(int64_t rows, int64_t len) {
  const DType F = DType::kFloat32;
  return fused({"layernorm_" + std::to_string(rows) + "x" + std::to_string(len),
                {rows, len},
                1,
                {{F, {rows, len}, {0, 1}}, {F, {len}, {1}}, {F, {len}, {1}}},
                {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceSum, F, 0),
                 ins(EwOp::kConst, F, -1, -1, -1, 1.0 / static_cast<double>(len)), ins(EwOp::kMul, F, 1, 2),
                 ins(EwOp::kSub, F, 0, 3), ins(EwOp::kMul, F, 4, 4), ins(EwOp::kReduceSum, F, 5),
                 ins(EwOp::kMul, F, 6, 2), ins(EwOp::kConst, F, -1, -1, -1, 1e-5), ins(EwOp::kAdd, F, 7, 8),
                 ins(EwOp::kRsqrt, F, 9), ins(EwOp::kMul, F, 4, 10), ins(EwOp::kLoad, F, 1),
                 ins(EwOp::kMul, F, 11, 12), ins(EwOp::kLoad, F, 2), ins(EwOp::kAdd, F, 13, 14)},
                {{15, {rows, len}}, {3, {rows}}}});
}

struct DotSpec {
  std::vector<int64_t> lhs, rhs, out;
  DotAttrs attrs;
  DType dtype = DType::kFloat32;
};

inline GpuCase dot(const std::string& name, const DotSpec& s) {
  ProgramBuilder b;
  std::vector<int32_t> ids{b.input(s.dtype, s.lhs), b.input(s.dtype, s.rhs)};
  if (s.attrs.has_bias) ids.push_back(b.input(s.dtype, {s.out.back()}));
  int32_t o = b.output(s.dtype, s.out);
  Kernel& k = b.kernel(KernelKind::kDot, name, ids, {o});
  k.dot = s.attrs;
  GpuCase c = finish(name, b);
  // Operands of a unit scale keep float16 sums well inside its range.
  for (Tensor& t : c.inputs) {
    if (t.dtype() != DType::kFloat32) continue;
    for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] /= 3.0f;
  }
  return c;
}

// A convolution kernel: x, w[, bias][, residual] -> out (shapes must satisfy the attributes).
struct ConvSpec {
  std::vector<int64_t> x, w, out;
  ConvolutionAttrs attrs;
  DType dtype = DType::kFloat32;
};

inline ConvolutionAttrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> pad_before, std::vector<int64_t> pad_after,
                            std::vector<int64_t> dilation, int64_t groups, bool transposed = false,
                            std::vector<int64_t> output_padding = {}) {
  ConvolutionAttrs a;
  a.output_padding = output_padding.empty() ? std::vector<int64_t>(stride.size(), 0) : output_padding;
  a.stride = std::move(stride);
  a.pad_before = std::move(pad_before);
  a.pad_after = std::move(pad_after);
  a.dilation = std::move(dilation);
  a.groups = groups;
  a.transposed = transposed;
  return a;
}

inline GpuCase conv(const std::string& name, const ConvSpec& s) {
  ProgramBuilder b;
  std::vector<int32_t> ids{b.input(s.dtype, s.x), b.input(s.dtype, s.w)};
  if (s.attrs.has_bias) ids.push_back(b.input(s.dtype, {to_channels_first(s.attrs.layout, s.out)[1]}));
  if (s.attrs.has_residual) ids.push_back(b.input(s.dtype, s.out));
  int32_t o = b.output(s.dtype, s.out);
  b.kernel(KernelKind::kConvolution, name, ids, {o}).convolution = s.attrs;
  GpuCase c = finish(name, b);
  for (Tensor& t : c.inputs) {  // unit-scale operands keep narrow sums well inside their range
    if (t.dtype() != DType::kFloat32) continue;
    for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] /= 3.0f;
  }
  return c;
}

// A channels-first tensor (d0, d1, rest...) stored channels-last, (d0, rest..., d1); tensors of
// rank < 3 (a bias) are returned as they are.
inline Tensor to_channels_last(const Tensor& t) {
  const std::vector<int64_t>& s = t.shape();
  if (s.size() < 3) return t;
  Tensor out = Tensor::empty_host(t.dtype(), from_channels_first(Layout::kChannelsLast, s));
  const int64_t d0 = s[0], d1 = s[1], rest = t.numel() / std::max<int64_t>(d0 * d1, 1), es = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t a = 0; a < d0; ++a)
    for (int64_t b = 0; b < d1; ++b)
      for (int64_t r = 0; r < rest; ++r)
        std::memcpy(dst + ((a * rest + r) * d1 + b) * es, src + ((a * d1 + b) * rest + r) * es, static_cast<size_t>(es));
  return out;
}

inline std::vector<std::pair<std::string, ConvSpec>> conv_specs();

inline std::vector<GpuCase> conv_cases() {
  std::vector<GpuCase> cs;
  for (const auto& [name, spec] : conv_specs()) cs.push_back(conv(name, spec));
  return cs;
}

// conv_cases() channels-last (name + "_channels_last"), each on its channels-first case's
// inputs stored channels-last, so its output is that case's output stored channels-last.
inline std::vector<GpuCase> channels_last_conv_cases() {
  std::vector<GpuCase> cs;
  for (const auto& [name, spec] : conv_specs()) {
    const GpuCase first = conv(name, spec);
    ConvSpec last = spec;
    last.attrs.layout = Layout::kChannelsLast;
    for (auto* v : {&last.x, &last.w, &last.out}) *v = from_channels_first(Layout::kChannelsLast, *v);
    GpuCase c = conv(name + "_channels_last", last);
    for (size_t i = 0; i < c.inputs.size(); ++i) c.inputs[i] = to_channels_last(first.inputs[i]);
    cs.push_back(std::move(c));
  }
  return cs;
}

inline std::vector<std::pair<std::string, ConvSpec>> conv_specs() {
  const DType F = DType::kFloat32, H = DType::kFloat16, BF = DType::kBFloat16;
  std::vector<std::pair<std::string, ConvSpec>> cs;
  ConvolutionAttrs plain = conv_attrs({1, 1}, {1, 1}, {1, 1}, {1, 1}, 1);
  cs.push_back({"conv_f32", ConvSpec{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 9, 9}, plain}});
  cs.push_back({"conv_f16", ConvSpec{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 9, 9}, plain, H}});
  cs.push_back({"conv_bf16", ConvSpec{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 9, 9}, plain, BF}});
  ConvolutionAttrs block = conv_attrs({2, 2}, {1, 1}, {1, 1}, {1, 1}, 1);
  block.has_bias = block.has_residual = true;
  block.activation = Activation::kRelu;
  cs.push_back({"conv_bias_add_relu", ConvSpec{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 5, 5}, block}});
  cs.push_back({"conv_bias_add_relu_f16", ConvSpec{{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 16, 5, 5}, block, H}});
  ConvolutionAttrs gelu = conv_attrs({1, 1}, {0, 0}, {0, 0}, {2, 2}, 4);
  gelu.has_bias = true;
  gelu.activation = Activation::kGelu;
  cs.push_back({"conv_dilated_groups_gelu", ConvSpec{{1, 8, 9, 9}, {8, 2, 3, 3}, {1, 8, 5, 5}, gelu}});
  cs.push_back({"conv_depthwise", ConvSpec{{2, 6, 7, 7}, {6, 1, 3, 3}, {2, 6, 4, 4}, conv_attrs({2, 2}, {1, 1}, {1, 1}, {1, 1}, 6)}});
  cs.push_back({"conv_asymmetric_pad", ConvSpec{{1, 3, 6, 6}, {4, 3, 3, 2}, {1, 4, 5, 6}, conv_attrs({1, 1}, {1, 0}, {0, 1}, {1, 1}, 1)}});
  cs.push_back({"conv_1d", ConvSpec{{2, 3, 11}, {5, 3, 3}, {2, 5, 6}, conv_attrs({2}, {1}, {1}, {1}, 1)}});
  cs.push_back({"conv_3d", ConvSpec{{1, 2, 4, 5, 6}, {3, 2, 2, 3, 3}, {1, 3, 3, 5, 6}, conv_attrs({1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1)}});
  ConvolutionAttrs up = conv_attrs({2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, true, {1, 1});
  up.has_bias = true;
  cs.push_back({"conv_transposed", ConvSpec{{2, 4, 5, 5}, {4, 3, 3, 3}, {2, 6, 10, 10}, up}});
  cs.push_back({"conv_transposed_f16", ConvSpec{{2, 4, 5, 5}, {4, 3, 3, 3}, {2, 6, 10, 10}, up, H}});
  // A bottleneck's last convolution: channels-last, the CUDA backend may run it as one GEMM.
  ConvolutionAttrs pointwise = conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}, 1);
  pointwise.has_bias = pointwise.has_residual = true;
  pointwise.activation = Activation::kRelu;
  cs.push_back({"conv_1x1_bias_add_relu_f16", ConvSpec{{2, 16, 6, 6}, {32, 16, 1, 1}, {2, 32, 6, 6}, pointwise, H}});
  return cs;
}

// A pooling kernel x -> out.
inline GpuCase pool(const std::string& name, DType t, std::vector<int64_t> x, std::vector<int64_t> out, PoolingAttrs a) {
  ProgramBuilder b;
  const int32_t in = b.input(t, x), o = b.output(t, out);
  b.kernel(KernelKind::kPooling, name, {in}, {o}).pooling = a;
  return finish(name, b);
}

inline PoolingAttrs pool_attrs(PoolingAttrs::Kind kind, std::vector<int64_t> window, std::vector<int64_t> stride,
                            std::vector<int64_t> pad_before, std::vector<int64_t> pad_after, bool count_include_pad = true) {
  PoolingAttrs a;
  a.kind = kind;
  a.window = std::move(window);
  a.stride = std::move(stride);
  a.pad_before = std::move(pad_before);
  a.pad_after = std::move(pad_after);
  a.count_include_pad = count_include_pad;
  return a;
}

// Pooling in `layout`; channels-last cases run on the channels-first cases' inputs stored
// channels-last (same names with "_channels_last").
inline std::vector<GpuCase> pool_cases(Layout layout = Layout::kChannelsFirst) {
  using K = PoolingAttrs::Kind;
  struct Spec {
    std::string name;
    DType t;
    std::vector<int64_t> x, out;
    PoolingAttrs a;
  };
  const std::vector<Spec> specs = {
      {"maxpool_f32", DType::kFloat32, {2, 3, 9, 9}, {2, 3, 5, 5}, pool_attrs(K::kMax, {3, 3}, {2, 2}, {1, 1}, {1, 1})},
      {"avgpool_f16_exclude_pad", DType::kFloat16, {1, 4, 7, 6}, {1, 4, 4, 4},
       pool_attrs(K::kAvg, {2, 2}, {2, 2}, {1, 1}, {1, 1}, false)},
      {"maxpool_i32_1d", DType::kInt32, {2, 5, 10}, {2, 5, 4}, pool_attrs(K::kMax, {3}, {2}, {0}, {0})},
      {"avgpool_3d", DType::kFloat32, {1, 2, 4, 4, 4}, {1, 2, 2, 2, 2}, pool_attrs(K::kAvg, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0})},
      // Channels a multiple of 16 bytes: the CUDA module's vector path when channels-last.
      {"maxpool_f16_wide", DType::kFloat16, {2, 16, 9, 9}, {2, 16, 5, 5}, pool_attrs(K::kMax, {3, 3}, {2, 2}, {1, 1}, {1, 1})},
      {"avgpool_f32_wide", DType::kFloat32, {1, 8, 7, 7}, {1, 8, 4, 4}, pool_attrs(K::kAvg, {2, 2}, {2, 2}, {1, 1}, {1, 1}, false)},
  };
  std::vector<GpuCase> cs;
  for (const Spec& s : specs) {
    GpuCase first = pool(s.name, s.t, s.x, s.out, s.a);
    if (layout == Layout::kChannelsFirst) {
      cs.push_back(std::move(first));
      continue;
    }
    PoolingAttrs a = s.a;
    a.layout = layout;
    GpuCase c = pool(s.name + "_channels_last", s.t, from_channels_first(layout, s.x), from_channels_first(layout, s.out), a);
    c.inputs = {to_channels_last(first.inputs[0])};
    cs.push_back(std::move(c));
  }
  return cs;
}

// A decoder's residual add and RMSNorm over bfloat16 rows: h = x + y, h * rsqrt(mean(h^2) + eps)
// * weight, the weight a constant of the program (a row kernel may load it before its wait).
inline GpuCase residual_rmsnorm(int64_t rows, int64_t len) {
  const DType B = DType::kBFloat16, F = DType::kFloat32;
  ProgramBuilder b;
  const int32_t x = b.input(B, {rows, len}), y = b.input(B, {rows, len});
  const int32_t w = b.constant(random_tensor(B, {len}, 11));
  const int32_t h = b.output(B, {rows, len}), n = b.output(B, {rows, len});
  Kernel& k = b.kernel(KernelKind::kFused, "residual_rmsnorm", {x, y, w}, {h, n});
  k.fused.domain = b.dims({rows, len});
  k.fused.reduce_from = 1;
  k.fused.input_axes = {{0, 1}, {0, 1}, {1}};
  k.fused.instrs = {ins(EwOp::kLoad, B, 0), ins(EwOp::kLoad, B, 1), ins(EwOp::kAdd, B, 0, 1),
                    ins(EwOp::kConvert, F, 2), ins(EwOp::kMul, F, 3, 3), ins(EwOp::kReduceSum, F, 4),
                    ins(EwOp::kConst, F, -1, -1, -1, 1.0 / static_cast<double>(len)), ins(EwOp::kMul, F, 5, 6),
                    ins(EwOp::kConst, F, -1, -1, -1, 1e-5), ins(EwOp::kAdd, F, 7, 8), ins(EwOp::kRsqrt, F, 9),
                    ins(EwOp::kMul, F, 3, 10), ins(EwOp::kLoad, B, 2), ins(EwOp::kConvert, F, 12),
                    ins(EwOp::kMul, F, 11, 13), ins(EwOp::kConvert, B, 14)};
  k.fused.output_regs = {2, 15};
  GpuCase c = finish("residual_rmsnorm_" + std::to_string(rows) + "x" + std::to_string(len), b);
  // Sizes the code generator can read (a compiled program's): it plans the fixed launch.
  for (int64_t v : c.slots) c.program.shape_program.push_back({ShapeInstr::Op::kConst, v, 0});
  return c;
}

// `phases` reductions in a chain over each row (each subtracts the mean of the previous result):
// one barrier each, more than a kernel's shared memory would hold with slots of their own.
inline GpuCase reduction_chain(int phases, int64_t rows, int64_t len) {
  const DType F = DType::kFloat32;
  std::vector<Instr> instrs = {ins(EwOp::kLoad, F, 0),
                               ins(EwOp::kConst, F, -1, -1, -1, 1.0 / static_cast<double>(len))};
  int32_t v = 0, mean = -1;
  for (int i = 0; i < phases; ++i) {
    const int32_t at = static_cast<int32_t>(instrs.size());
    instrs.push_back(ins(EwOp::kReduceSum, F, v));
    instrs.push_back(ins(EwOp::kMul, F, at, 1));
    instrs.push_back(ins(EwOp::kSub, F, v, at + 1));
    mean = at + 1;
    v = at + 2;
  }
  return fused({"reduction_chain_" + std::to_string(phases), {rows, len}, 1, {{F, {rows, len}, {0, 1}}}, instrs,
                {{v, {rows, len}}, {mean, {rows}}}});
}

inline std::vector<GpuCase> all_cases() {
  const DType F = DType::kFloat32, H = DType::kFloat16, BF = DType::kBFloat16, I32 = DType::kInt32,
              I64 = DType::kInt64, I8 = DType::kInt8, B = DType::kBool;
  std::vector<GpuCase> cs;
  for (DType t : {F, H, BF})
    for (EwOp op : {EwOp::kNeg, EwOp::kAbs, EwOp::kExp, EwOp::kLog, EwOp::kSqrt, EwOp::kRsqrt, EwOp::kTanh,
                    EwOp::kSigmoid, EwOp::kErf, EwOp::kSin, EwOp::kCos, EwOp::kFloor, EwOp::kCeil, EwOp::kRound,
                    EwOp::kSign})
      cs.push_back(elementwise(op, t, t, 1));
  for (DType t : {I32, I64, I8})
    for (EwOp op : {EwOp::kNeg, EwOp::kAbs, EwOp::kSign, EwOp::kNot, EwOp::kFloor, EwOp::kCeil, EwOp::kRound})
      cs.push_back(elementwise(op, t, t, 1));
  for (DType t : {F, H})
    for (EwOp op : {EwOp::kAdd, EwOp::kSub, EwOp::kMul, EwOp::kDiv, EwOp::kPow, EwOp::kMax, EwOp::kMin,
                    EwOp::kRem, EwOp::kFloorDiv})
      cs.push_back(elementwise(op, t, t, 2));
  for (DType t : {I32, I64})
    for (EwOp op : {EwOp::kAdd, EwOp::kSub, EwOp::kMul, EwOp::kPow, EwOp::kMax, EwOp::kMin, EwOp::kRem,
                    EwOp::kFloorDiv, EwOp::kAnd, EwOp::kOr, EwOp::kXor})
      cs.push_back(elementwise(op, t, t, 2));
  for (EwOp op : {EwOp::kAdd, EwOp::kMul, EwOp::kMax, EwOp::kMin, EwOp::kAnd, EwOp::kOr, EwOp::kXor})
    cs.push_back(elementwise(op, B, B, 2));
  cs.push_back(elementwise(EwOp::kNot, B, B, 1));
  for (DType t : {F, I32, I64, B})
    for (EwOp op : {EwOp::kEq, EwOp::kNe, EwOp::kLt, EwOp::kLe, EwOp::kGt, EwOp::kGe})
      cs.push_back(elementwise(op, t, B, 2));
  for (DType t : {F, I32, H}) cs.push_back(elementwise(EwOp::kSelect, t, t, 3));
  for (auto [from, to] : std::vector<std::pair<DType, DType>>{
           {F, I32}, {I32, F}, {F, H}, {H, F}, {F, BF}, {F, B}, {B, I32}, {I64, I8}, {I32, I64},
           {F, DType::kFloat8E4M3}, {DType::kFloat8E4M3, F}, {I32, DType::kInt4}})
    cs.push_back(elementwise(EwOp::kConvert, from, to, 1));
  // Constants, iota, broadcasting, the vectorised path.
  cs.push_back(fused({"iota_const", {5, 6}, 2, {{F, {6}, {1}}},
                      {ins(EwOp::kIota, F, 1), ins(EwOp::kConst, F, -1, -1, -1, 2.5), ins(EwOp::kMul, F, 0, 1),
                       ins(EwOp::kLoad, F, 0), ins(EwOp::kAdd, F, 2, 3), ins(EwOp::kIota, I64, 0)},
                      {{4, {5, 6}}, {5, {5, 6}}}}));
  cs.push_back(fused({"broadcast_3d", {3, 4, 5}, 3, {{F, {3, 1, 5}, {0, 1, 2}}, {F, {4, 1}, {1, 2}}},
                      {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kAdd, F, 0, 1)},
                      {{2, {3, 4, 5}}}}));
  cs.push_back(fused({"vector_f16_scalar", {1003}, 1, {{H, {1003}, {0}}, {H, {1}, {0}}, {F, {1003}, {0}}},
                      {ins(EwOp::kLoad, H, 0), ins(EwOp::kLoad, H, 1), ins(EwOp::kMul, H, 0, 1),
                       ins(EwOp::kLoad, F, 2), ins(EwOp::kConvert, F, 2), ins(EwOp::kAdd, F, 3, 4),
                       ins(EwOp::kConvert, H, 5)},
                      {{6, {1003}}, {5, {1003}}}}));
  cs.push_back(fused({"large_f16_gelu", {257, 4096}, 2, {{H, {257, 4096}, {0, 1}}, {H, {4096}, {1}}},
                      {ins(EwOp::kLoad, H, 0), ins(EwOp::kLoad, H, 1), ins(EwOp::kAdd, H, 0, 1),
                       ins(EwOp::kConst, H, -1, -1, -1, 0.7071067811865476), ins(EwOp::kMul, H, 2, 3),
                       ins(EwOp::kErf, H, 4), ins(EwOp::kConst, H, -1, -1, -1, 1.0), ins(EwOp::kAdd, H, 5, 6),
                       ins(EwOp::kMul, H, 2, 7), ins(EwOp::kConst, H, -1, -1, -1, 0.5), ins(EwOp::kMul, H, 8, 9)},
                      {{10, {257, 4096}}}}));
  // The vector path over several axes (broadcasts keep them from merging): a row per outer index,
  // a row shared by the outer indices and a value per row (inner stride 0); 12 wide is no whole
  // number of 16-byte loads of float16, so the second case takes the scalar loop.
  for (int64_t inner : {16, 12})
    cs.push_back(fused({"vector_rows_f16_" + std::to_string(inner), {5, 3, inner}, 3,
                        {{H, {5, 1, inner}, {0, 1, 2}}, {H, {3, inner}, {1, 2}}, {H, {5, 3, 1}, {0, 1, 2}}},
                        {ins(EwOp::kLoad, H, 0), ins(EwOp::kLoad, H, 1), ins(EwOp::kLoad, H, 2),
                         ins(EwOp::kMul, H, 0, 1), ins(EwOp::kAdd, H, 3, 2)},
                        {{4, {5, 3, inner}}}}));
  // Reductions.
  for (EwOp op : {EwOp::kReduceSum, EwOp::kReduceProd, EwOp::kReduceMax, EwOp::kReduceMin}) {
    std::string n = std::string("reduce_") + ew_op_name(op);
    cs.push_back(fused({n + "_short", {5, 9}, 1, {{F, {5, 9}, {0, 1}}}, {ins(EwOp::kLoad, F, 0), ins(op, F, 0)},
                        {{1, {5}}}}));
    cs.push_back(fused({n + "_i32", {5, 9}, 1, {{I32, {5, 9}, {0, 1}}}, {ins(EwOp::kLoad, I32, 0), ins(op, I32, 0)},
                        {{1, {5}}}}));
  }
  cs.push_back(fused({"reduce_sum_long", {3, 5000}, 1, {{F, {3, 5000}, {0, 1}}},
                      {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceSum, F, 0)}, {{1, {3}}}}));
  cs.push_back(fused({"reduce_all", {4, 6}, 0, {{F, {4, 6}, {0, 1}}},
                      {ins(EwOp::kLoad, F, 0), ins(EwOp::kReduceMax, F, 0)}, {{1, {}}}}));
  cs.push_back(fused({"reduce_bool_max", {6, 10}, 1, {{B, {6, 10}, {0, 1}}},
                      {ins(EwOp::kLoad, B, 0), ins(EwOp::kReduceMax, B, 0)}, {{1, {6}}}}));
  cs.push_back(fused({"reduce_two_axes_broadcast", {3, 4, 5}, 1, {{F, {3, 4, 5}, {0, 1, 2}}, {F, {5}, {2}}},
                      {ins(EwOp::kLoad, F, 0), ins(EwOp::kLoad, F, 1), ins(EwOp::kMul, F, 0, 1),
                       ins(EwOp::kReduceSum, F, 2), ins(EwOp::kSub, F, 2, 3)},
                      {{4, {3, 4, 5}}, {3, {3}}}}));
  cs.push_back(fused({"reduce_iota", {4, 7}, 1, {}, {ins(EwOp::kIota, I32, 1), ins(EwOp::kIota, I32, 0),
                                                     ins(EwOp::kMul, I32, 0, 1), ins(EwOp::kReduceSum, I32, 2)},
                      {{3, {4}}}}));
  cs.push_back(softmax(F, 6, 7));
  cs.push_back(softmax(F, 33, 3000));
  cs.push_back(softmax(H, 16, 256));
  cs.push_back(layernorm(8, 1024));
  cs.push_back(layernorm(4, 4096));
  for (int64_t rows : {1, 8, 4096}) cs.push_back(residual_rmsnorm(rows, 4096));
  cs.push_back(reduction_chain(40, 5, 300));
  // Dots.
  DotAttrs none;
  cs.push_back(dot("dot_f32", {{33, 17}, {17, 29}, {33, 29}, none}));
  cs.push_back(dot("dot_trans_lhs", {{17, 33}, {17, 29}, {33, 29}, {true, false, false, Activation::kNone}}));
  cs.push_back(dot("dot_trans_rhs", {{33, 17}, {29, 17}, {33, 29}, {false, true, false, Activation::kNone}}));
  cs.push_back(dot("dot_trans_both", {{17, 33}, {29, 17}, {33, 29}, {true, true, false, Activation::kNone}}));
  cs.push_back(dot("dot_batch_fold", {{3, 5, 7}, {7, 4}, {3, 5, 4}, none}));
  cs.push_back(dot("dot_batched", {{3, 5, 7}, {3, 7, 4}, {3, 5, 4}, none}));
  cs.push_back(dot("dot_batch_lhs_shared", {{5, 7}, {3, 7, 4}, {3, 5, 4}, none}));
  cs.push_back(dot("dot_batch_broadcast", {{2, 1, 5, 7}, {1, 3, 7, 4}, {2, 3, 5, 4}, none}));
  cs.push_back(dot("dot_bias", {{9, 16}, {16, 24}, {9, 24}, {false, false, true, Activation::kNone}}));
  cs.push_back(dot("dot_bias_relu", {{9, 16}, {16, 24}, {9, 24}, {false, false, true, Activation::kRelu}}));
  cs.push_back(dot("dot_relu", {{9, 16}, {16, 24}, {9, 24}, {false, false, false, Activation::kRelu}}));
  cs.push_back(dot("dot_bias_gelu", {{9, 16}, {16, 24}, {9, 24}, {false, false, true, Activation::kGelu}}));
  cs.push_back(dot("dot_f16_bias_gelu", {{64, 128}, {128, 96}, {64, 96}, {false, false, true, Activation::kGelu}, H}));
  cs.push_back(dot("dot_bf16", {{64, 128}, {128, 96}, {64, 96}, none, BF}));
  for (GpuCase& c : conv_cases()) cs.push_back(std::move(c));
  for (GpuCase& c : channels_last_conv_cases()) cs.push_back(std::move(c));
  for (Layout l : {Layout::kChannelsFirst, Layout::kChannelsLast})
    for (GpuCase& c : pool_cases(l)) cs.push_back(std::move(c));
  // Layout kernels.
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {2, 3, 4}), o = b.output(F, {4, 2, 3});
    b.kernel(KernelKind::kTranspose, "transpose", {x}, {o}).transpose.perm = {2, 0, 1};
    cs.push_back(finish("transpose_3d", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(I64, {64, 48}), o = b.output(I64, {48, 64});
    b.kernel(KernelKind::kTranspose, "transpose", {x}, {o}).transpose.perm = {1, 0};
    cs.push_back(finish("transpose_i64", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {10, 12}), o = b.output(F, {4, 4});
    Kernel& k = b.kernel(KernelKind::kSlice, "slice", {x}, {o});
    k.slice.starts = {b.slot(1), b.slot(2)};
    k.slice.steps = {b.slot(2), b.slot(3)};
    cs.push_back(finish("slice_steps", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(H, {10, 12}), o = b.output(H, {5, 12});
    Kernel& k = b.kernel(KernelKind::kSlice, "slice", {x}, {o});
    k.slice.starts = {b.slot(9), b.slot(0)};
    k.slice.steps = {b.slot(-2), b.slot(1)};
    cs.push_back(finish("slice_reversed", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {10, 12}), o = b.output(F, {3, 12});
    Kernel& k = b.kernel(KernelKind::kSlice, "slice", {x}, {o});
    k.slice.starts = {b.slot(2), b.slot(0)};
    k.slice.steps = {b.slot(1), b.slot(1)};
    cs.push_back(finish("slice_contiguous_rows", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {2, 3}), y = b.input(F, {4, 3}), z = b.input(F, {1, 3}), o = b.output(F, {7, 3});
    b.kernel(KernelKind::kConcatenate, "concat", {x, y, z}, {o}).concatenate.axis = 0;
    cs.push_back(finish("concat_axis0", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {2, 3}), y = b.input(F, {2, 5}), o = b.output(F, {2, 8});
    b.kernel(KernelKind::kConcatenate, "concat", {x, y}, {o}).concatenate.axis = 1;
    cs.push_back(finish("concat_axis1", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(F, {5, 4}), o = b.output(F, {3, 4});
    std::vector<int32_t> idx{4, -1, 0};
    int32_t i = b.constant(cpu::testing::make_tensor(I32, {3}, idx));
    b.kernel(KernelKind::kGather, "gather", {x, i}, {o}).gather.axis = 0;
    cs.push_back(finish("gather_i32_negative", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(H, {3, 6, 2}), o = b.output(H, {3, 2, 2, 2});
    std::vector<int64_t> idx{5, 0, 2, 3};
    int32_t i = b.constant(cpu::testing::make_tensor(I64, {2, 2}, idx));
    b.kernel(KernelKind::kGather, "gather", {x, i}, {o}).gather.axis = 1;
    cs.push_back(finish("gather_i64_axis1", b));
  }
  {
    ProgramBuilder b;
    int32_t x = b.input(I32, {7, 3}), o = b.output(I32, {21});
    b.kernel(KernelKind::kCopy, "copy", {b.alias(x, {21})}, {o});
    cs.push_back(finish("copy_alias", b));
  }
  {
    GpuCase c;
    c.name = "rich_program";
    c.program = testing::rich_program();
    c.inputs = {random_tensor(F, {3, 4}, 1), random_tensor(F, {3}, 2)};
    c.program.eval_shapes(c.inputs, c.slots);
    cs.push_back(std::move(c));
  }
  return cs;
}

}  // namespace tripy::cuda_testing

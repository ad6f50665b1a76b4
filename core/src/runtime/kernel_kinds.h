// The kernel kinds of a Program, each described once: its attribute struct (its fields listed
// with TRIPY_FIELDS, fields.h) and its row in TRIPY_KERNEL_KINDS at the end of this file. From
// these come the enum, the names, the Kernel's members, the file format's reader and writer, the
// dumps, equality and keys, and the tables that the rules (kernel_rules.cc) and each backend fill
// (each static_asserts that it has a row per kind, in this order). A new kind adds its struct here
// and its row at the end of the list.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ew_ops.h"
#include "runtime/fields.h"
#include "tripy/dtype.h"

namespace tripy::rt {

// Index into the slot vector that the shape program fills (program.h).
using Slot = int32_t;

// The instruction set of fused kernels (EwOp, ComputeKind, the op table) lives in ew_ops.h.

// One SSA instruction; its result is register number = its index in FusedProgram::instrs.
//   kLoad: a = fused input index        kConst: imm        kIota: a = domain axis
//   unary: a   binary/compare: a, b     kSelect: a ? b : c  kConvert: a (to `dtype`)
//   kReduce*: a, reduced over domain axes [reduce_from, rank); the result is per row.
// `dtype` is the result type; operands of binary ops share a dtype; compares give kBool.
struct Instr {
  EwOp op = EwOp::kConst;
  DType dtype = DType::kFloat32;
  int32_t a = -1, b = -1, c = -1;
  double imm = 0;
  TRIPY_FIELDS(op, dtype, a, b, c, imm)
};

// A fused elementwise/row-reduction group. It iterates over `domain`; row-level registers (the
// reductions and what depends only on them) are per index of domain[0, reduce_from), and may be
// used by element-level instructions (broadcast back along the reduced axes).
struct FusedProgram {
  std::vector<Slot> domain;
  int32_t reduce_from = 0;  // == domain.size() when there is no reduction
  // For each kernel input, for each of its dims: the domain axis it runs along. A dim whose
  // run-time size is 1 while the domain's is not is broadcast (stride 0).
  std::vector<std::vector<int32_t>> input_axes;
  // Empty, or per kernel input: a slice the kernel reads in place (views, not copies). The input
  // is the sliced buffer; its elements [starts, starts + sizes) per dim (steps of 1) run along
  // input_axes, with the buffer's own strides. An input with empty starts is read whole.
  struct Window {
    std::vector<Slot> starts, sizes;
    TRIPY_FIELDS(starts, sizes)
  };
  std::vector<Window> input_windows;
  std::vector<Instr> instrs;
  // For each kernel output: the register stored. Element-level outputs have the domain's shape,
  // row-level outputs the shape domain[0, reduce_from) (as the output buffer's shape says).
  std::vector<int32_t> output_regs;
  TRIPY_FIELDS(domain, reduce_from, input_axes, input_windows, instrs, output_regs)
};

// Appended only (the file format stores the names). Dots take none, relu and gelu; convolutions all.
enum class Activation : uint8_t { kNone = 0, kRelu = 1, kGelu = 2 /* erf form */, kSilu = 3 /* x * sigmoid(x) */ };
inline constexpr const char* kActivationNames[] = {"none", "relu", "gelu", "silu"};
constexpr EnumNames enum_names(Activation) { return enum_names_of(kActivationNames); }

// out[b..., m, n] = act(sum_k lhs[b..., m, k] * rhs[b..., k, n] + bias[n]); leading batch dims
// broadcast numpy-style; transposes swap the last two dims of that operand. Operands share a dtype;
// the result has it too, or is the operands' accumulator (dot_accumulator_dtype) for quantized
// operands: int8 x int8 sums exactly in int32, float8 x float8 in float32 (the low-precision GEMM
// that flat::quantized_dot makes of dequantize -> dot).
// `scale` (float8 operands only, with no bias or activation): out = scale * sum, computed in
// float32 and rounded once to the result's dtype, which may then also be float16 or bfloat16: the
// quantized dot's rescale by its dequantize scales, folded into the GEMM (fusion's plan_dot).
struct DotAttrs {
  bool transpose_lhs = false, transpose_rhs = false;
  bool has_bias = false;  // bias is Kernel::inputs[2], shape [N]
  Activation activation = Activation::kNone;
  double scale = 1.0;
  TRIPY_FIELDS(transpose_lhs, transpose_rhs, has_bias, activation, scale)
};

// The result dtype of a dot of `operand`s that accumulates wider than its operands: int32 for int8,
// float32 for float8; `operand` itself for every other dtype. A dot's result has its operands'
// dtype or this one (the one rule the FlatIR verifier and the program validator share).
inline DType dot_accumulator_dtype(DType operand) {
  return operand == DType::kInt8 ? DType::kInt32 : operand == DType::kFloat8E4M3 ? DType::kFloat32 : operand;
}

// Whether a dot kernel of `operand`s may write `out`: their dtype or accumulator's, and for float8
// operands also float16 and bfloat16 (the rescale folded, DotAttrs::scale).
inline bool dot_kernel_writes(DType operand, DType out) {
  return out == operand || out == dot_accumulator_dtype(operand) ||
         (operand == DType::kFloat8E4M3 && (out == DType::kFloat16 || out == DType::kBFloat16));
}

// Fused scaled dot-product attention over rank-4 operands, read through per-operand layouts:
//   out[b, h, l, :] = sum_s softmax_s(scale * q[b, h, l, :] . k[b, h / (Hq / Hkv), s, :] + m) v[b, h / (Hq / Hkv), s, :]
// with q (B, Hq, L, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv), out (B, Hq, L, Dv) logically, and
// Hkv dividing Hq (grouped-query attention). m is 0, or -inf where a bool mask is false, or an
// additive mask's value; each mask dim is 1 (broadcast) or the logical size; causal also hides
// keys s > l (top-left aligned, as torch's is_causal). A row with every key hidden is NaN, as a
// softmax over no values is.
// kCausalOffset (a KV-cache step: match_attention finds it in `iota_s <= iota_l + pos` masks):
// input 3 is an offset o, an int32 or int64 tensor of shape (1, 1, 1, 1) read when the kernel
// runs, and key s is visible to query l iff s <= l + o, the sum taken in o's dtype as the mask it
// replaces computed it (past the dtype's largest value it wraps to negative: no key visible).
// Kernels visit only keys [0, causal_offset_keys(...)); it excludes `causal`.
enum class MaskKind : uint8_t { kNone, kBool, kAdditive, kCausalOffset };
inline constexpr const char* kMaskKindNames[] = {"none", "bool", "additive", "causal_offset"};
constexpr EnumNames enum_names(MaskKind) { return enum_names_of(kMaskKindNames); }
// The keys query row `row` sees under kCausalOffset: min(S, max(0, row + offset + 1)), and 0 where
// row + offset passes `offset_max` (the largest value of the offset's dtype: the sum wrapped).
inline int64_t causal_offset_keys(int64_t offset, int64_t offset_max, int64_t row, int64_t S) {
  if (offset > 0 && row > offset_max - offset) return 0;
  const int64_t last = row + offset;  // no overflow: row >= 0, and row <= offset_max - offset
  return last < 0 ? 0 : last >= S ? S : last + 1;
}
struct AttentionAttrs {
  bool causal = false;
  double scale = 1.0;
  MaskKind mask = MaskKind::kNone;  // kNone: 3 inputs; else the mask (kCausalOffset: the offset) is input 3
  // Views instead of copies: logical dim i of operand x (q, k, v, mask, out) is dim perms[x][i]
  // of its buffer, so a transposed head split is read (or written) in place.
  enum Operand { kQ, kK, kV, kMask, kOut, kNumOperands };
  using Perm = std::array<int8_t, 4>;
  std::array<Perm, kNumOperands> perms = {Perm{0, 1, 2, 3}, Perm{0, 1, 2, 3}, Perm{0, 1, 2, 3},
                                          Perm{0, 1, 2, 3}, Perm{0, 1, 2, 3}};
  // And a window of heads: logical head h of operand x is buffer index heads[x].start + h along
  // the buffer dim perms[x][1], for h < heads[x].count (count 0: the whole dim). q, k and v then
  // read one fused qkv projection in place, as heads [0, H), [H, 2H) and [2H, 3H) of it.
  struct HeadWindow {
    int64_t start = 0, count = 0;
    bool operator==(const HeadWindow& o) const { return start == o.start && count == o.count; }
    bool operator!=(const HeadWindow& o) const { return !(*this == o); }
    TRIPY_FIELDS(start, count)
  };
  std::array<HeadWindow, kNumOperands> heads{};
  bool has_layouts() const {
    for (const Perm& p : perms)
      if (p != Perm{0, 1, 2, 3}) return true;
    for (const HeadWindow& w : heads)
      if (w != HeadWindow{}) return true;
    return false;
  }
  TRIPY_FIELDS(causal, scale, mask, perms, heads)
};

// Logical sizes (B, H, L, D) of attention operand `x` and its element strides along them, for a
// dense row-major buffer of `shape` (rank 4, as validate_program ensures).
struct AttentionOperand {
  std::array<int64_t, 4> size{}, stride{};
  int64_t offset = 0;  // elements from the buffer's start to logical (0, 0, 0, 0)
};
AttentionOperand attention_operand(const AttentionAttrs& a, int x, const std::vector<int64_t>& shape);
// Why buffers of these shapes (q, k, v, mask when there is one, out) do not fit the rule above
// (head windows included),
// or "" when they do: then every index a kernel forms stays inside its buffer.
std::string attention_shape_error(const AttentionAttrs& a, const std::vector<std::vector<int64_t>>& shapes);


// Where the channels of a convolution's or pooling's operands sit. Channels-first: activations
// (N, C, spatial...), weights (w0, w1, k...); channels-last: activations (N, spatial..., C) and
// weights (w0, k..., w1), the order cuDNN's tensor-core kernels read (NHWC, KRSC). The rules below
// are stated channels-first; a channels-last operand is the same tensor stored permuted.
enum class Layout : uint8_t { kChannelsFirst = 0, kChannelsLast = 1 };
inline constexpr const char* kLayoutNames[] = {"channels_first", "channels_last"};
constexpr EnumNames enum_names(Layout) { return enum_names_of(kLayoutNames); }
// The channels-first order of a dims list stored in `layout` (its last entry moves to index 1),
// and back. Shapes of rank < 3 are returned unchanged.
template <class T>
std::vector<T> to_channels_first(Layout layout, std::vector<T> v) {
  if (layout == Layout::kChannelsLast && v.size() >= 3) std::rotate(v.begin() + 1, v.end() - 1, v.end());
  return v;
}
template <class T>
std::vector<T> from_channels_first(Layout layout, std::vector<T> v) {
  if (layout == Layout::kChannelsLast && v.size() >= 3) std::rotate(v.begin() + 1, v.begin() + 2, v.end());
  return v;
}

// A convolution over (N, C, spatial...) with 1 to 3 spatial dims; every list has one entry per
// spatial dim. Forward: weight (O, C / groups, k...), out = floor((n + before + after - span) /
// stride) + 1 with span = dilation * (k - 1) + 1. Transposed (the gradient of the forward one with
// respect to its input): weight (C, O / groups, k...), out = (n - 1) * stride - before - after +
// span + output_padding. The same struct is the Trace op's, the FlatIR op's and the kernel's
// attribute; the epilogue fields are set by fusion only.
struct ConvolutionAttrs {
  std::vector<int64_t> stride, pad_before, pad_after, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
  // Epilogue: out = act(conv + bias[channel] + residual); Kernel::inputs are x, w, then the
  // bias (O values, as [O] or [O, 1, 1]) and the residual (the output's shape) when present.
  bool has_bias = false, has_residual = false;
  Activation activation = Activation::kNone;
  Layout layout = Layout::kChannelsFirst;  // of x, w, out and the residual alike
  size_t spatial() const { return stride.size(); }
  TRIPY_FIELDS(stride, pad_before, pad_after, dilation, output_padding, groups, transposed, has_bias, has_residual,
               activation, layout)
};
// Output size of spatial dim `d` for an input size `n` and kernel size `k` (may be < 1: invalid).
int64_t conv_output_size(const ConvolutionAttrs& a, size_t d, int64_t n, int64_t k);
inline constexpr size_t kMaxConvSpatialDims = 3;
// Strides, dilations, paddings, groups (and pooling windows) are at most this, so that the size
// rules' sums and products of them stay far inside int64.
inline constexpr int64_t kMaxConvAttr = int64_t{1} << 30;
// Why `c` breaks the rule above for `spatial_dims` spatial dims (list lengths, ranges, output
// padding below the stride or dilation of a transposed one, none otherwise), or "" when it does
// not: the kernel rules, the FlatIR verifier and the Trace op ask it.
std::string conv_attrs_error(const ConvolutionAttrs& c, size_t spatial_dims);

// A call of a registered plugin (tp.plugin): its inputs -> one output, whose shape and dtype the
// Program's buffers give. `name` is the registry key ("namespace::name/version"); `fields` the
// call's plugin fields as JSON text. The device code travels with the program: `cuda_source`
// (a __global__ function `cuda_entry` taking one PluginArgs, see plugin_registry.h), compiled by
// the CUDA backend's build and saved in its artifacts, so a saved GPU executable runs without the
// plugin being registered. The CPU implementation is looked up by `name` when a program loads.
struct PluginAttrs {
  std::string name, fields = "{}", cuda_source, cuda_entry;
  int32_t block = 256;  // CUDA threads per block; the grid covers the output's elements
  TRIPY_FIELDS(name, fields, cuda_source, cuda_entry, block)
  // Text forms (FlatIR, program dumps) leave the device code out: it is long, and a parsed call
  // finds it in the registry by name.
  static constexpr std::string_view kTextOmits[] = {"cuda_source", "cuda_entry"};
};
inline constexpr size_t kMaxPluginInputs = 8, kMaxPluginRank = 8;

// Pooling over (N, C, spatial...) with 1 to 3 spatial dims, one entry per spatial dim in each list:
// out = floor((n + before + after - window) / stride) + 1. Max ignores padded elements (a window
// of padding alone gives the dtype's lowest value); average divides by the window's size, or with
// count_include_pad = false by its count of unpadded elements.
inline constexpr const char* kPoolingKindNames[] = {"max", "avg"};
struct PoolingAttrs {
  enum class Kind : uint8_t { kMax, kAvg };
  friend constexpr EnumNames enum_names(Kind) { return enum_names_of(kPoolingKindNames); }
  Kind kind = Kind::kMax;
  std::vector<int64_t> window, stride, pad_before, pad_after;
  bool count_include_pad = true;
  Layout layout = Layout::kChannelsFirst;  // of the input and the output
  size_t spatial() const { return window.size(); }
  TRIPY_FIELDS(kind, window, stride, pad_before, pad_after, count_include_pad, layout)
};
// Output size of spatial dim `d` for an input size `n` (< 1 when the window does not fit).
int64_t pool_output_size(const PoolingAttrs& a, size_t d, int64_t n);
// Why `a` breaks the rule above for `spatial_dims` spatial dims (list lengths; windows, strides
// and paddings within kMaxConvAttr), or "": the kernel rules, the FlatIR verifier and the Trace
// op ask it.
std::string pool_attrs_error(const PoolingAttrs& a, size_t spatial_dims);

// out dim i = in dim perm[i].
struct TransposeAttrs {
  std::vector<int64_t> perm;
  TRIPY_FIELDS(perm)
};
// Per input dim, in slots; the output's shape is its buffer's.
struct SliceAttrs {
  std::vector<Slot> starts, steps;
  TRIPY_FIELDS(starts, steps)
};
// The inputs joined along `axis`.
struct ConcatenateAttrs {
  int64_t axis = 0;
  TRIPY_FIELDS(axis)
};
// out = take(inputs[0], inputs[1], axis): indices of any int dtype; one out of range is an error
// of the run.
struct GatherAttrs {
  int64_t axis = 0;
  TRIPY_FIELDS(axis)
};
// A copy of its input into a dense output of the same shape.
struct CopyAttrs {
  TRIPY_NO_FIELDS()
};
// Inputs operand, update, start (an int32/int64 device scalar of 1 element); out = operand with
// out[.., start + i, ..] = update[.., i, ..] along `axis`. When out and operand are one buffer (a
// donated input, or an alias of it) only the update's rows are written; a start with start +
// update rows outside the axis is an error of the run, and nothing is written. A row (the dims
// past the axis) is written from `row_offset` elements into the update's row of the same index,
// which may be longer (a window of a projection: flat's fold_update_windows); the dims before
// the axis match the operand's.
struct UpdateSliceAttrs {
  int64_t axis = 0;
  int64_t row_offset = 0;
  TRIPY_FIELDS(axis, row_offset)
};
// Why an update of shape `up` does not fit an operand of shape `in` by the rule above (ranks equal
// and the axis in range: the kind's static rule), or "" when it does: the kernel rules and both
// backends' update kernels ask it.
std::string update_slice_shape_error(const UpdateSliceAttrs& u, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& up);
// Token sampling (tp.sample): inputs logits (float32/16, bfloat16; rows = the leading dims, V =
// the last) and key (int64, shape (1,), read at run time); out = one int32 index per row.
// temperature 0 is greedy (the argmax, NaN rules as tp.argmax); otherwise z = logit / temperature
// (float32), w = exp(z - max z) in units of 2**-40 (rounded down, summed exactly), top-k keeps
// logits >= the k-th largest (0 or >= V: all), top-p the smallest set of z >= tau holding
// ceil(top_p * kept weight) (1: all), and the draw splits the kept weight at u in [0, 1) from
// splitmix64 of (key, row). Both backends compute exactly this, bit for bit (backend/cpu/sample.cc).
struct SampleAttrs {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  TRIPY_FIELDS(temperature, top_k, top_p)
};
// The largest last dim a sample kernel takes (its weights sum exactly in 64 bits).
inline constexpr int64_t kMaxSampleVocab = int64_t{1} << 23;

// A weight-only quantized matrix product (flat::weight_only_dot makes it of dot(x, dequantize(q))):
//   out[r, n] = sum_k x[r, k] * (q[n, k] - zero[n, k / group_size]) * scale[n, k / group_size]
// over x [..., K] (its leading dims are the rows r), with float32 sums. Inputs x, w, scale and, with
// has_zero, zero; x, scale, zero and out share a float dtype (float32, float16, bfloat16); out is
// [..., N]. w is int8 [N, K] (bits 8), float8 e4m3 [N, K] (bits 8: q the float8 value) or, with
// bits 4, int8 [N, ceil(K / 2)] holding two values a byte: k even in the low nibble, k odd in the
// high one, each nibble u read as q = u - 8 in [-8, 7].
// scale and zero are [N, ceil(K / group_size)] (one group spanning K: a per-channel scale); zero is
// 0 without has_zero. The weight is read packed and dequantized in registers. With `gated`, x is
// [..., 2K] and the product's x is SiLU(x[..., :K]) * x[..., K:] (a SwiGLU's gate and up halves),
// rounded to x's dtype as a kernel of its own would store it.
// With `norm` (not with `gated`), the product's x is RMSNorm's of x's rows with the weight gamma
// [K] (x's dtype or float32, the input after zero): each row times 1 / sqrt(mean(x^2) + norm_eps), computed
// with no overflow or underflow, and times gamma, in float32, not rounded. With `residual`, a last
// input R of out's shape and dtype is added: out = round(round(product) + R), as an add after the
// product would compute it. With `gate_output` (N even; not with `residual`), out is [..., N / 2]:
// SiLU(y[..., :N / 2]) * y[..., N / 2:] of the product y, each of y's values rounded to out's dtype
// first and the result once, as the product and a kernel after it would store them (a SwiGLU's
// gate_up product writing its down projection's x).
struct WeightOnlyDotAttrs {
  int64_t bits = 8;
  int64_t group_size = 1;
  bool has_zero = false;
  bool gated = false;
  bool norm = false;
  double norm_eps = 0.0;
  bool residual = false;
  bool gate_output = false;
  TRIPY_FIELDS(bits, group_size, has_zero, gated, norm, norm_eps, residual, gate_output)
};
// The inputs of a weight-only product: x, w, scale, then zero (has_zero), gamma (norm) and R
// (residual), in that order.
inline size_t weight_only_inputs(const WeightOnlyDotAttrs& a) { return 3 + a.has_zero + a.norm + a.residual; }
inline size_t weight_only_gamma_input(const WeightOnlyDotAttrs& a) { return 3 + a.has_zero; }
inline size_t weight_only_residual_input(const WeightOnlyDotAttrs& a) { return 3 + a.has_zero + a.norm; }
// A weight-only product as a pass would leave it, normalizing or gating its x or adding its
// residual (the backend's PassRules::weight_only_fold decides): x's dtype, the most rows x may
// have, K, the group, the weight's format (4, 8, or 9 for float8 e4m3 values), and the folds it
// would then have (the one asked and those it has: rt::WeightOnlyDotAttrs norm, gated, residual,
// gate_output).
struct WeightOnlyFold {
  DType dtype = DType::kFloat32;
  int64_t rows = 0, K = 0, group = 0;
  int bits = 8;
  bool norm = false, gated = false, residual = false, gate_output = false;
};
// The packed bytes per weight row of K values.
inline int64_t weight_only_row_bytes(int64_t bits, int64_t K) { return bits == 4 ? (K + 1) / 2 : K; }
// K of a weight-only product whose x's last dim is `x_last`.
inline int64_t weight_only_k(const WeightOnlyDotAttrs& a, int64_t x_last) { return a.gated ? x_last / 2 : x_last; }
// The last dim of a weight-only product's output, of N weight rows.
inline int64_t weight_only_out_n(const WeightOnlyDotAttrs& a, int64_t N) { return a.gate_output ? N / 2 : N; }

// A collective over the ranks of a sharded program (tp.compile with a tp.DeviceMesh), each rank
// running its own program on its own thread or process. kAllReduce: out = the elementwise sum of
// every rank's input (same shape; float16/bfloat16 summed in float32, rank 0's term first, so
// every rank holds the same bits); kAllGather: out = the ranks' inputs joined along `axis` in rank
// order (dim `axis` of out is world_size times the input's); kReduceScatter: out = rank r's share
// of the sum, the r-th of world_size equal parts along `axis`. `world_size` is the mesh's size the
// program was compiled for: a rank whose communicator has another size refuses to run.
inline constexpr const char* kCollectiveOpNames[] = {"all_reduce", "all_gather", "reduce_scatter"};
struct CollectiveAttrs {
  enum class Op : uint8_t { kAllReduce, kAllGather, kReduceScatter };  // file order: append only
  friend constexpr EnumNames enum_names(Op) { return enum_names_of(kCollectiveOpNames); }
  Op op = Op::kAllReduce;
  int64_t axis = 0;  // kAllGather, kReduceScatter
  int64_t world_size = 1;
  TRIPY_FIELDS(op, axis, world_size)
};
inline constexpr int64_t kMaxWorldSize = 1024;

// One row per kind, in file-format order (append only):
//   X(Enum, "name", Attrs, member)
// the enum value (KernelKind::kEnum), the one name that FlatIR text, program dumps, the file
// format and profiles use, the attribute struct above and the Kernel member that holds it.
#define TRIPY_KERNEL_KINDS(X)                                              \
  X(Fused, "fused", FusedProgram, fused)                                   \
  X(Dot, "dot", DotAttrs, dot)                                             \
  X(Transpose, "transpose", TransposeAttrs, transpose)                     \
  X(Slice, "slice", SliceAttrs, slice)                                     \
  X(Concatenate, "concatenate", ConcatenateAttrs, concatenate)             \
  X(Gather, "gather", GatherAttrs, gather)                                 \
  X(Copy, "copy", CopyAttrs, copy)                                         \
  X(Attention, "attention", AttentionAttrs, attention)                     \
  X(Convolution, "convolution", ConvolutionAttrs, convolution)             \
  X(UpdateSlice, "update_slice", UpdateSliceAttrs, update_slice)           \
  X(Plugin, "plugin", PluginAttrs, plugin)                                 \
  X(Pooling, "pooling", PoolingAttrs, pooling)                             \
  X(Sample, "sample", SampleAttrs, sample)                                 \
  X(WeightOnlyDot, "weight_only_dot", WeightOnlyDotAttrs, weight_only_dot) \
  X(Collective, "collective", CollectiveAttrs, collective)

enum class KernelKind : uint8_t {
#define TRIPY_KERNEL_KIND_ENUM_(Enum, name, Attrs, member) k##Enum,
  TRIPY_KERNEL_KINDS(TRIPY_KERNEL_KIND_ENUM_)
#undef TRIPY_KERNEL_KIND_ENUM_
};
inline constexpr const char* kKernelKindNames[] = {
#define TRIPY_KERNEL_KIND_NAME_(Enum, name, Attrs, member) name,
    TRIPY_KERNEL_KINDS(TRIPY_KERNEL_KIND_NAME_)
#undef TRIPY_KERNEL_KIND_NAME_
};
inline constexpr size_t kNumKernelKinds = sizeof(kKernelKindNames) / sizeof(kKernelKindNames[0]);
constexpr EnumNames enum_names(KernelKind) { return enum_names_of(kKernelKindNames); }
// Whether `rows`, a backend's table of a row per kind, has one row for each kernel kind in the
// kinds' order (row i's `kind` is kind i, so a kind indexes its row): for a static_assert beside it.
template <class Row, size_t N>
constexpr bool one_row_per_kind(const Row (&rows)[N]) {
  if (N != kNumKernelKinds) return false;
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(rows[i].kind) != i) return false;
  return true;
}
// "fused", "dot", ... ("invalid" past the end).
const char* kernel_kind_name(KernelKind kind);

}  // namespace tripy::rt

// The Program's own behaviour: kernel kind names and the shape program's
// evaluation. Validation of untrusted programs lives in program_validate.cc.
#include <algorithm>
#include <array>
#include <limits>

#include "runtime/program.h"

#include "runtime/shape_arith.h"

namespace tripy::rt {
namespace {

// Sizes never legitimately approach these; hostile programs must not overflow (UB) on the way.
int64_t saturate(__int128 v) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  return v > kMax ? kMax : v < kMin ? kMin : static_cast<int64_t>(v);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return saturate(-static_cast<__int128>(a));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ceil_div(int64_t a, int64_t b) {
  // ceil(a / b) == -floor(-a / b)
  return b == 0 ? 0 : saturate(-static_cast<__int128>(floor_div(saturate(-static_cast<__int128>(a)), b)));
}

// Python's %, consistent with floor division (the sign follows the divisor).
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;  // INT64_MIN % -1 traps
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

bool update_in_place(const Program& p, const Kernel& k) {
  const BufferDesc& in = p.buffers[p.alias_root(k.inputs[0])];
  const BufferDesc& out = p.buffers[p.alias_root(k.outputs[0])];
  if (&in == &out) return true;
  return out.kind == BufferDesc::Kind::kOutput && out.donor >= 0 && in.kind == BufferDesc::Kind::kInput &&
         in.index == out.donor;
}

const char* kernel_kind_name(KernelKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kNumKernelKinds ? kKernelKindNames[i] : "invalid";
}

ComputeKind compute_kind(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kFloat16: case DType::kBFloat16: case DType::kFloat8E4M3:
      return ComputeKind::kF32;
    case DType::kInt64: return ComputeKind::kI64;
    case DType::kBool: return ComputeKind::kBool;
    case DType::kInt4: case DType::kInt8: case DType::kInt32: return ComputeKind::kI32;
  }
  return ComputeKind::kF32;
}

std::vector<int32_t> element_closure(const FusedProgram& f, const std::vector<uint8_t>& row_level,
                                     const std::vector<int32_t>& roots, int32_t leaf) {
  std::vector<uint8_t> need(f.instrs.size(), 0);
  std::vector<int32_t> stack;
  for (int32_t r : roots)
    if (!row_level[r]) stack.push_back(r);
  while (!stack.empty()) {
    int32_t r = stack.back();
    stack.pop_back();
    if (need[r]) continue;
    need[r] = 1;
    if (r == leaf) continue;
    const Instr& in = f.instrs[r];
    const int ops = ew_num_operands(in.op);
    for (int j = 0; j < ops; ++j) {
      int32_t o = j == 0 ? in.a : j == 1 ? in.b : in.c;
      if (!row_level[o]) stack.push_back(o);
    }
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i < static_cast<int32_t>(need.size()); ++i)
    if (need[i]) out.push_back(i);
  return out;
}

int64_t apply_shape_op(ShapeInstr::Op op, int64_t a, int64_t b) {
  using Op = ShapeInstr::Op;
  switch (op) {
    case Op::kAdd: return saturate(static_cast<__int128>(a) + b);
    case Op::kSub: return saturate(static_cast<__int128>(a) - b);
    case Op::kMul: return saturate(static_cast<__int128>(a) * b);
    case Op::kFloorDiv: return floor_div(a, b);
    case Op::kCeilDiv: return ceil_div(a, b);
    case Op::kMod: return floor_mod(a, b);
    case Op::kMax: return a > b ? a : b;
    case Op::kMin: return a < b ? a : b;
    case Op::kConst:
    case Op::kInputDim:
    case Op::kInputValue: break;
  }
  return 0;
}

bool is_shape_value(const Tensor& t) {
  return t.dtype() == DType::kInt64 && t.shape().empty() && t.data() != nullptr &&
         t.device().kind == Device::Kind::kCpu;
}

int64_t shape_value_of(const Tensor& t) { return is_shape_value(t) ? *static_cast<const int64_t*>(t.data()) : 0; }

void Program::eval_shapes(const std::vector<Tensor>& inputs, std::vector<int64_t>& slots) const {
  slots.assign(shape_program.size(), 0);
  // Out-of-range references give 0 instead of reading out of bounds: validate_program rejects
  // them in files, and this keeps a hand-built program from crashing the process.
  auto slot = [&](int64_t i, size_t before) -> int64_t {
    return i >= 0 && static_cast<size_t>(i) < before ? slots[static_cast<size_t>(i)] : 0;
  };
  for (size_t i = 0; i < shape_program.size(); ++i) {
    const ShapeInstr& in = shape_program[i];
    switch (in.op) {
      case ShapeInstr::Op::kConst: slots[i] = in.a; break;
      case ShapeInstr::Op::kInputDim: {
        const bool ok = in.a >= 0 && static_cast<size_t>(in.a) < inputs.size() && in.b >= 0 &&
                        static_cast<size_t>(in.b) < inputs[static_cast<size_t>(in.a)].shape().size();
        slots[i] = ok ? inputs[static_cast<size_t>(in.a)].shape()[static_cast<size_t>(in.b)] : 0;
        break;
      }
      case ShapeInstr::Op::kInputValue: {
        const bool ok = in.a >= 0 && static_cast<size_t>(in.a) < inputs.size();
        slots[i] = ok ? shape_value_of(inputs[static_cast<size_t>(in.a)]) : 0;
        break;
      }
      default: slots[i] = apply_shape_op(in.op, slot(in.a, i), slot(in.b, i)); break;
    }
  }
}

int32_t Program::alias_root(int32_t buffer) const {
  for (size_t steps = 0; buffers[buffer].kind == BufferDesc::Kind::kAlias && steps <= buffers.size(); ++steps)
    buffer = buffers[buffer].index;
  return buffer;
}

bool Program::sizes_fixed() const {
  for (const InputSpec& in : inputs)
    if (in.kind == InputSpec::Kind::kShapeValue ? in.value_min != in.value_max : in.dim_min != in.dim_max) return false;
  return true;
}

std::vector<Tensor> Program::opt_inputs(Device device) const {
  std::vector<Tensor> out;
  for (const InputSpec& in : inputs) {
    out.push_back(in.kind == InputSpec::Kind::kShapeValue ? Tensor::host_int64(in.value_opt)
                                                          : Tensor::borrow(nullptr, in.dtype, in.dim_opt, device, nullptr));
  }
  return out;
}

std::vector<std::vector<Tensor>> Program::sample_inputs(Device device) const {
  std::vector<std::vector<Tensor>> out{opt_inputs(device)};
  if (sizes_fixed()) return out;
  // Each sample picks one value from a range [lo, hi] (opt is the first sample).
  using Pick = int64_t (*)(int64_t lo, int64_t hi);
  const Pick picks[] = {
      [](int64_t lo, int64_t) { return lo; },
      [](int64_t, int64_t hi) { return hi; },
      [](int64_t lo, int64_t hi) { return std::min(lo + 1, hi); },
      [](int64_t lo, int64_t hi) { return hi % 2 != 0 || hi == lo ? hi : hi - 1; },
  };
  for (Pick pick : picks) {
    std::vector<Tensor> set;
    for (const InputSpec& in : inputs) {
      if (in.kind == InputSpec::Kind::kShapeValue) {
        set.push_back(Tensor::host_int64(pick(in.value_min, in.value_max)));
        continue;
      }
      std::vector<int64_t> dims(in.dim_min.size());
      for (size_t d = 0; d < dims.size(); ++d) dims[d] = pick(in.dim_min[d], in.dim_max[d]);
      set.push_back(Tensor::borrow(nullptr, in.dtype, dims, device, nullptr));
    }
    out.push_back(std::move(set));
  }
  return out;
}

std::vector<int64_t> Program::buffer_shape(int32_t buffer, const std::vector<int64_t>& slots) const {
  std::vector<int64_t> shape;
  if (buffer < 0 || static_cast<size_t>(buffer) >= buffers.size()) return shape;
  const BufferDesc& desc = buffers[static_cast<size_t>(buffer)];
  shape.reserve(desc.shape.size());
  for (Slot s : desc.shape)
    shape.push_back(s >= 0 && static_cast<size_t>(s) < slots.size() ? slots[static_cast<size_t>(s)] : 0);
  return shape;
}

FusedInputView fused_input_view(const Program& p, const Kernel& k, size_t i, const std::vector<int64_t>& slots) {
  FusedInputView v;
  v.sizes = p.buffer_shape(k.inputs[i], slots);
  v.strides = dense_strides(v.sizes);
  if (i >= k.fused.input_windows.size() || k.fused.input_windows[i].starts.empty()) return v;
  const FusedProgram::Window& w = k.fused.input_windows[i];
  auto at = [&](Slot s) { return s >= 0 && static_cast<size_t>(s) < slots.size() ? slots[static_cast<size_t>(s)] : 0; };
  for (size_t d = 0; d < v.sizes.size() && d < w.starts.size() && d < w.sizes.size(); ++d) {
    v.offset += at(w.starts[d]) * v.strides[d];
    v.sizes[d] = at(w.sizes[d]);
  }
  return v;
}

bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, int64_t* bytes) {
  __int128 n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return false;
    n *= d;
    if (n > kMaxBytes) return false;
  }
  *bytes = static_cast<int64_t>(n);
  return true;
}

AttentionOperand attention_operand(const AttentionAttrs& a, int x, const std::vector<int64_t>& shape) {
  AttentionOperand out;
  std::array<int64_t, 4> dense{};
  int64_t step = 1;
  for (int d = 3; d >= 0; --d) {
    dense[d] = step;
    step *= shape[static_cast<size_t>(d)];
  }
  for (int i = 0; i < 4; ++i) {
    const int b = a.perms[static_cast<size_t>(x)][static_cast<size_t>(i)];
    out.size[i] = shape[static_cast<size_t>(b)];
    out.stride[i] = dense[b];
  }
  const AttentionAttrs::HeadWindow& w = a.heads[static_cast<size_t>(x)];
  if (w.count > 0) {
    out.size[1] = w.count;
    out.offset = w.start * out.stride[1];
  }
  return out;
}

std::string update_slice_shape_error(const UpdateSliceAttrs& u, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& up) {
  const size_t axis = static_cast<size_t>(u.axis);
  bool fits = up[axis] <= in[axis];
  for (size_t d = 0; d < axis; ++d) fits = fits && up[d] == in[d];
  // Past the axis: a row of the operand's, `row_offset` elements into the update's row.
  auto past_axis = [&](const std::vector<int64_t>& s) {
    return numel_of({s.begin() + static_cast<long>(axis) + 1, s.end()});
  };
  const int64_t row = past_axis(in), up_row = past_axis(up);
  if (fits && u.row_offset >= 0 && u.row_offset <= up_row - row) return "";
  return "writes an update of shape " + dims_str(up) +
         (u.row_offset ? " from row offset " + std::to_string(u.row_offset) : "") + " into " + dims_str(in);
}

std::string attention_shape_error(const AttentionAttrs& a, const std::vector<std::vector<int64_t>>& shapes) {
  const bool masked = a.mask != MaskKind::kNone;
  if (shapes.size() != (masked ? 5u : 4u)) return "has the wrong number of operands";
  for (const auto& s : shapes)
    if (s.size() != 4) return "has an operand that is not 4-D";
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int x = i + 1 == shapes.size() ? AttentionAttrs::kOut : static_cast<int>(i);
    const AttentionAttrs::HeadWindow& w = a.heads[static_cast<size_t>(x)];
    const int64_t dim = shapes[i][static_cast<size_t>(a.perms[static_cast<size_t>(x)][1])];
    if (w.count > 0 && (w.start < 0 || w.start > dim || w.count > dim - w.start))
      return "reads heads [" + std::to_string(w.start) + ", " + std::to_string(w.start + w.count) +
             ") of an operand with " + std::to_string(dim);
  }
  auto dims = [](const AttentionOperand& o) {
    std::string t = "(";
    for (int i = 0; i < 4; ++i) t += (i ? ", " : "") + std::to_string(o.size[i]);
    return t + ")";
  };
  const AttentionOperand q = attention_operand(a, AttentionAttrs::kQ, shapes[0]);
  const AttentionOperand k = attention_operand(a, AttentionAttrs::kK, shapes[1]);
  const AttentionOperand v = attention_operand(a, AttentionAttrs::kV, shapes[2]);
  const AttentionOperand o = attention_operand(a, AttentionAttrs::kOut, shapes.back());
  const std::string what = "attends q " + dims(q) + " over k " + dims(k) + " and v " + dims(v) + " into " + dims(o);
  const int64_t B = q.size[0], Hq = q.size[1], L = q.size[2], D = q.size[3];
  const int64_t Hkv = k.size[1], S = k.size[2], Dv = v.size[3];
  const bool heads_ok = Hkv > 0 ? Hq % Hkv == 0 : Hq == 0;
  if (k.size[0] != B || k.size[3] != D || v.size[0] != B || v.size[1] != Hkv || v.size[2] != S || !heads_ok ||
      o.size != std::array<int64_t, 4>{B, Hq, L, Dv})
    return what;
  if (a.mask == MaskKind::kCausalOffset) {
    for (int64_t d : shapes[3])
      if (d != 1)
        return what + " with a causal offset " + dims(attention_operand(a, AttentionAttrs::kMask, shapes[3])) +
               " instead of (1, 1, 1, 1)";
  } else if (masked) {
    const AttentionOperand m = attention_operand(a, AttentionAttrs::kMask, shapes[3]);
    const std::array<int64_t, 4> full{B, Hq, L, S};
    for (int i = 0; i < 4; ++i)
      if (m.size[i] != 1 && m.size[i] != full[i]) return what + " with a mask " + dims(m);
  }
  return "";
}

}  // namespace tripy::rt

namespace tripy::rt {

int64_t conv_output_size(const ConvolutionAttrs& a, size_t d, int64_t n, int64_t k) {
  // In 128 bits: a loaded file's attributes are checked for range, not for products.
  const __int128 span = static_cast<__int128>(a.dilation[d]) * (k - 1) + 1;
  __int128 out;
  if (a.transposed) {
    out = static_cast<__int128>(n - 1) * a.stride[d] - a.pad_before[d] - a.pad_after[d] + span + a.output_padding[d];
  } else {
    const __int128 room = static_cast<__int128>(n) + a.pad_before[d] + a.pad_after[d] - span;
    out = room < 0 ? 0 : room / a.stride[d] + 1;
  }
  return saturate(out);
}


}  // namespace tripy::rt

namespace tripy::rt {

std::string conv_attrs_error(const ConvolutionAttrs& c, size_t spatial_dims) {
  const size_t nd = spatial_dims;
  if (c.stride.size() != nd || c.pad_before.size() != nd || c.pad_after.size() != nd || c.dilation.size() != nd ||
      c.output_padding.size() != nd)
    return "needs stride, padding, dilation and output padding for each of its " + std::to_string(nd) +
           " spatial dims";
  if (c.groups < 1 || c.groups > kMaxConvAttr) return "has groups out of range";
  auto in_range = [](int64_t v, int64_t lo) { return v >= lo && v <= kMaxConvAttr; };
  for (size_t d = 0; d < nd; ++d) {
    const bool ok = in_range(c.stride[d], 1) && in_range(c.dilation[d], 1) && in_range(c.pad_before[d], 0) &&
                    in_range(c.pad_after[d], 0) && c.output_padding[d] >= 0 &&
                    (c.transposed ? c.output_padding[d] < std::max(c.stride[d], c.dilation[d]) : c.output_padding[d] == 0);
    if (!ok) return "has stride, padding, dilation or output padding out of range in spatial dim " + std::to_string(d);
  }
  return "";
}

std::string pool_attrs_error(const PoolingAttrs& a, size_t spatial_dims) {
  const size_t nd = spatial_dims;
  if (a.window.size() != nd || a.stride.size() != nd || a.pad_before.size() != nd || a.pad_after.size() != nd)
    return "needs window, stride and padding for each of its " + std::to_string(nd) + " spatial dims";
  auto in_range = [](int64_t v, int64_t lo) { return v >= lo && v <= kMaxConvAttr; };
  for (size_t d = 0; d < nd; ++d)
    if (!in_range(a.window[d], 1) || !in_range(a.stride[d], 1) || !in_range(a.pad_before[d], 0) ||
        !in_range(a.pad_after[d], 0))
      return "has window, stride or padding out of range in spatial dim " + std::to_string(d);
  return "";
}

int64_t pool_output_size(const PoolingAttrs& a, size_t d, int64_t n) {
  // In 128 bits: a loaded file's attributes are checked for range, not for sums.
  const __int128 room = static_cast<__int128>(n) + a.pad_before[d] + a.pad_after[d] - a.window[d];
  return room < 0 ? 0 : saturate(room / a.stride[d] + 1);
}


}  // namespace tripy::rt

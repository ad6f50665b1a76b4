// The Program: what the compiler hands to a backend. Backend-neutral, serialisable, and free of
// compiler types: an ordered list of kernels over planned buffers, plus a shape program that
// computes every dynamic size ("slot") from the actual input shapes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ew_ops.h"
#include "runtime/fields.h"
#include "runtime/kernel_kinds.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::rt {

// slots[i] = op(...): kConst -> a; kInputDim -> input a, dim b; kInputValue -> the value of
// input a (a shape value); others -> slots[a] op slots[b]. Instructions only reference earlier
// slots. The order is part of the file format: append only.
struct ShapeInstr {
  enum class Op : uint8_t { kConst, kInputDim, kAdd, kSub, kMul, kFloorDiv, kCeilDiv, kMod, kMax, kMin, kInputValue };
  Op op = Op::kConst;
  int64_t a = 0, b = 0;
};

// A runtime input. kTensor: a tensor on the executable's device, read by kernels. kShapeValue: a
// size given at run time (tp.DimensionInputInfo) as a 0-d int64 host tensor; only the shape
// program reads it (kInputValue), so it never leaves the host and no buffer refers to it.
// A donated tensor input (tp.InputInfo(donate=True)) lends its memory to the program: an output
// whose BufferDesc::donor names it is written in place there and returned as that same memory.
struct InputSpec {
  enum class Kind : uint8_t { kTensor, kShapeValue };
  std::string name;  // the Python parameter name
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dim_min, dim_opt, dim_max;  // per dim; static dims have min == max
  std::vector<std::string> dim_names;              // NamedDimension name, or "" per dim
  Kind kind = Kind::kTensor;
  int64_t value_min = 0, value_opt = 0, value_max = 0;  // kShapeValue: the value's range
  bool donated = false;                                 // kTensor: its memory may be updated in place
};

// Whether `t` has the form of a shape value (a 0-d int64 tensor in host memory), and its value
// (0 when it does not).
bool is_shape_value(const Tensor& t);
int64_t shape_value_of(const Tensor& t);

// A run-time condition the compiler could not prove: the two slots must be equal (kEqual), or
// equal or one of them 1 (kBroadcast). `message` is the user-facing explanation.
struct ShapeCheck {
  enum class Kind : uint8_t { kEqual, kBroadcast };
  Kind kind = Kind::kEqual;
  Slot a = 0, b = 0;
  std::string message;
  int32_t source = -1;  // index into Program::sources
};

struct BufferDesc {
  enum class Kind : uint8_t {
    kInput,     // index = runtime input number
    kConstant,  // index = Program::constants entry
    kTemp,      // lives in the arena at `offset`
    kOutput,    // index = output number; allocated per call and handed to the caller
    kAlias,     // same bytes as buffer `index`, another shape (reshape/squeeze are free)
  };
  Kind kind = Kind::kTemp;
  int32_t index = 0;
  DType dtype = DType::kFloat32;
  std::vector<Slot> shape;
  int64_t offset = 0;     // kTemp only; 256-byte aligned
  int64_t max_bytes = 0;  // upper bound over the input ranges
  // kOutput only: the donated input whose memory this output is (-1: a fresh allocation). The
  // runtime returns that input's tensor as the output, so kernels that update it in place
  // (kUpdateSlice) change the caller's tensor and nothing is copied.
  int32_t donor = -1;
};

// A kernel kind and its attributes: they live in the member the kind's row names (dot for kDot);
// the others stay default. FlatIR's kernel ops carry one (a kind that no FlatIR op of its own
// describes), and every Kernel is one.
struct KernelAttrs {
  KernelKind kind = KernelKind::kFused;
#define TRIPY_KERNEL_KIND_MEMBER_(Enum, name, Attrs, member) Attrs member;
  TRIPY_KERNEL_KINDS(TRIPY_KERNEL_KIND_MEMBER_)
#undef TRIPY_KERNEL_KIND_MEMBER_
};

// One kernel of a Program: a kind with its attributes, over buffers.
struct Kernel : KernelAttrs {
  std::string name;  // e.g. "fused_mul_erf_add", for logs and generated code
  std::vector<int32_t> inputs, outputs;  // buffer ids
  int32_t source = -1;  // index into Program::sources
};

// Calls fn(attrs) with the attribute struct of `k`'s kind (a Kernel or KernelAttrs; mutable when
// `k` is).
template <class K, class Fn>
decltype(auto) visit_kind_attrs(K& k, Fn&& fn) {
  switch (k.kind) {
#define TRIPY_KERNEL_KIND_CASE_(Enum, name, Attrs, member) \
  case KernelKind::k##Enum:                               \
    return fn(k.member);
    TRIPY_KERNEL_KINDS(TRIPY_KERNEL_KIND_CASE_)
#undef TRIPY_KERNEL_KIND_CASE_
  }
  return fn(k.copy);  // unreachable for a validated kind
}

struct Program {
  std::vector<ShapeInstr> shape_program;
  std::vector<InputSpec> inputs;
  std::vector<std::vector<Slot>> input_shapes;  // slot of each input dim
  std::vector<ShapeCheck> checks;
  std::vector<BufferDesc> buffers;
  std::vector<int32_t> outputs;  // buffer ids, each of kind kOutput
  std::vector<std::string> output_names;
  std::vector<Kernel> kernels;
  std::vector<Tensor> constants;  // host tensors
  int64_t arena_bytes = 0;
  std::vector<SourceInfo> sources;

  // Fills `slots` from the actual input shapes and shape values (the inputs must match `inputs`
  // in rank; shape values are 0-d int64 host tensors).
  void eval_shapes(const std::vector<Tensor>& inputs, std::vector<int64_t>& slots) const;
  // Stand-ins for the inputs at their `opt` sizes, for tuning: tensors without data on `device`,
  // shape values holding their opt value.
  std::vector<Tensor> opt_inputs(Device device) const;
  // Stand-ins (as opt_inputs) at sizes spread over the ranges, for judging which code a run may
  // take: every size at its opt, its min, its max, one above its min, and at the odd value nearest
  // its max. A stride or offset that is a dynamic size times a constant is a multiple of a power
  // of two at every size only if it is at an odd one, and a size times a constant plus another
  // constant only if it is at two neighbouring sizes. One set where the sizes are fixed.
  std::vector<std::vector<Tensor>> sample_inputs(Device device) const;
  // Whether every input's sizes and shape values are fixed, so every run has the same shapes
  // (those of opt_inputs).
  bool sizes_fixed() const;
  // The buffer whose bytes `buffer` is: itself, or the end of its chain of aliases (at most
  // buffers.size() links are followed; validate_program rejects cycles).
  int32_t alias_root(int32_t buffer) const;
  // Whether `buffer`'s bytes are one of the program's constants, which no kernel writes (a kernel
  // may read them before waiting for the previous one).
  bool is_constant(int32_t buffer) const { return buffers[alias_root(buffer)].kind == BufferDesc::Kind::kConstant; }
  std::vector<int64_t> buffer_shape(int32_t buffer, const std::vector<int64_t>& slots) const;
};

// Where fused kernel `k` reads its input `i`: the extent along the domain (the window's sizes, or
// the buffer's shape), the element offset of its first element and the buffer's dense strides.
struct FusedInputView {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};
FusedInputView fused_input_view(const Program& p, const Kernel& k, size_t i, const std::vector<int64_t>& slots);

// The element-level registers that `roots` need, transitively but not through row-level registers
// (`row_level[r]` != 0), in instruction order: what one pass over a row must compute. A `leaf`
// register is included but not what it needs (a backend that already holds its value).
std::vector<int32_t> element_closure(const FusedProgram& f, const std::vector<uint8_t>& row_level,
                                     const std::vector<int32_t>& roots, int32_t leaf = -1);

// Whether kUpdateSlice kernel `k` writes into its operand's memory: its output is the operand's
// buffer (through aliases), or the output that lives in the donated input the operand is. Otherwise
// the kernel first copies the operand into its output.
bool update_in_place(const Program& p, const Kernel& k);

// Checks the program's internal consistency (indices in range, kinds coherent); a loaded file
// that passes this cannot make a backend read out of bounds.
Status validate_program(const Program& program);

// Whether the programs can be the optimization profiles of one executable: the same inputs in
// order (name, kind, dtype, rank, donation) and the same output names; names the first difference
// (kInvalidArgument).
Status check_profiles_agree(const std::vector<const Program*>& programs);

}  // namespace tripy::rt

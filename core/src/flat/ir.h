// FlatIR: the small, closed set of primitives that Trace ops lower to and that passes rewrite.
// A Graph is SSA in topological order; every op carries an Origin that says which user line it
// came from and, for ops that lowering inserted, why.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dim.h"
#include "runtime/program.h"
#include "tripy/dtype.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::flat {

using ValueId = int32_t;
using rt::EwOp;

// The op kinds (op_kinds.def: what each is, its name and the attributes it carries).
enum class OpKind : uint8_t {
#define TRIPY_FLAT_OP(Enum, name, attrs) k##Enum,
#include "flat/op_kinds.def"
};
const char* op_kind_name(OpKind kind);

// The Op members an op kind carries (op_kinds.def), from which its text form and CSE key follow.
enum OpAttr : uint16_t {
  kNoAttrs = 0,
  kDims = 1,               // dims, always written
  kDimsIfAny = 2,          // dims, written when not empty
  kSliceBounds = 4,        // starts, limits, steps
  kAttentionAttrs = 8,     // attention
  kConvolutionAttrs = 16,  // convolution
  kPoolingAttrs = 32,      // pooling
  kPluginAttrs = 64,       // plugin
  kParameterAttrs = 128,   // index, shape_symbol (and the graph's input name)
  kKernelAttrs = 256,      // kernel: a kernel kind and its attributes
};
using OpAttrs = uint16_t;
inline constexpr OpAttrs kConstantValue = kNoAttrs;  // constant: its tensor, spelled by the printer
OpAttrs op_attrs(OpKind kind);

// Why an op exists: the Trace op (and user line) it was lowered from, and for ops that lowering
// inserted beyond the obvious, the reason.
struct Origin {
  SourceRef where;                       // the Trace op's call site
  std::string trace_op;                  // "'+'", "softmax", "Linear"
  std::string reason;                    // "broadcast the right operand of '+' to (3, 4)"
  std::vector<SourceRef> input_sources;  // where each input of the Trace op was created
  std::vector<std::string> input_descs;  // "t1: [shape=(3, 3), dtype=float32]"
};
using OriginRef = std::shared_ptr<const Origin>;

struct Value {
  DType dtype = DType::kFloat32;
  Shape shape;
  int32_t def = -1;  // index of the defining op
};

struct Op {
  OpKind kind = OpKind::kElementwise;
  EwOp fn = EwOp::kAdd;  // kElementwise and kReduce
  std::vector<ValueId> operands;
  ValueId result = -1;
  std::vector<int64_t> dims;
  std::vector<Dim> starts, limits, steps;  // kSlice
  rt::ConvolutionAttrs convolution;  // kConvolution (its epilogue fields stay unset)
  rt::PoolingAttrs pooling;          // kPooling
  Tensor constant;                         // kConstant
  int32_t index = 0;                       // kParameter
  // kParameter of a shape value (tp.DimensionInputInfo): an i64[] host scalar whose value at run
  // time is this symbol. Only the shape program reads it: the graph uses the symbol, never the
  // value (verify checks that it has no uses).
  int32_t shape_symbol = -1;
  // kAttention: operands q, k, v[, mask], each of logical rank 4 (B, H, L|S, D) read through
  // `attention.perms` (operand dim perms[x][i] is logical dim i); the result likewise.
  rt::AttentionAttrs attention;
  rt::PluginAttrs plugin;  // kPlugin
  // kKernel: a kernel kind that no FlatIR op of its own describes, with its attributes; it becomes
  // one kernel of that kind (rt::KernelAttrs; kernel_kinds.h). Opaque to every pass.
  rt::KernelAttrs kernel;
  OriginRef origin;
};

// Whether `op` transposes the last two dims and keeps the others in place: the transpose that a
// dot reads as a flag of its operand (x @ W.T of a Linear), not as a copy.
bool swaps_last_two_dims(const Op& op);

// A run-time condition lowering could not prove (dynamic dims): becomes an rt::ShapeCheck.
struct ShapeAssertion {
  rt::ShapeCheck::Kind kind = rt::ShapeCheck::Kind::kEqual;
  Dim a, b;
  std::string message;
  OriginRef origin;
};

struct Graph {
  SymbolTable symbols;
  std::vector<ShapeAssertion> assertions;
  std::vector<Value> values;
  std::vector<Op> ops;  // topological order
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<std::string> input_names;  // parallel to inputs (Python parameter names)

  // Appends `op` with a fresh result value and returns that value's id.
  ValueId add(Op op, DType dtype, Shape shape);
  const Value& value(ValueId v) const { return values[v]; }
  const Op& def(ValueId v) const { return ops[values[v].def]; }
  // Number of uses of each value (outputs count as uses).
  std::vector<int32_t> use_counts() const;
  std::string str() const;
};

// The most rows a matrix product's lhs `x` [..., K] may have: its leading dims' largest sizes
// multiplied (a dim whose largest size is 0 counted as 1).
int64_t most_rows(const Graph& g, ValueId x);

// The value of `v` where it is a host constant of one element, or a broadcast of one (a splat);
// nullopt otherwise.
std::optional<double> splat_value(const Graph& g, ValueId v);

// The result shape of a convolution of `input` by a weight of static shape `weight`: the one
// formula that the Trace op, the verifier and (in integers, rt::conv_output_size) the runtime use.
Shape conv_result_shape(const Shape& input, const Shape& weight, const rt::ConvolutionAttrs& a);

// The result shape of pooling `input` (N, C, spatial...): the Trace op's and the verifier's rule.
Shape pool_result_shape(const Shape& input, const rt::PoolingAttrs& a);

// Text form, one op a line:
//   %3 : f32[s0, 8] = add(%1, %2)
//   %4 : f32[s0] = reduce_sum(%3) {dims = [1]}
// parse_graph() reads what str() writes (constants of up to 64 elements are printed in full).
StatusOr<Graph> parse_graph(std::string_view text);
// Checks types, shapes and operand order of every op; passes run it in debug builds.
Status verify(const Graph& graph);

}  // namespace tripy::flat

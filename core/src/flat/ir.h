// FlatIR: the small, closed set of primitives that Trace ops lower to and that passes rewrite.
// A Graph is SSA in topological order; every op carries an Origin that says which user line it
// came from and, for ops that lowering inserted, why.
#pragma once

#include <cstdint>
#include <memory>
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

enum class OpKind : uint8_t {
  kParameter,    // runtime input number `index` (a shape value when `shape_symbol` >= 0)
  kConstant,     // `constant` (host tensor; rank 0 for scalars, broadcast explicitly)
  kIota,         // index along dims[0] of the result shape
  kElementwise,  // `fn` in unary/binary/compare/select/convert; operands share the result shape
  kBroadcast,    // operand dim i -> result dim dims[i] (size equal, or 1 to broadcast)
  kReshape,      // same elements, row-major, result shape
  kTranspose,    // result dim i = operand dim dims[i]
  kSlice,        // starts/limits/steps per operand dim
  kConcatenate,  // along dims[0]
  kReduce,       // `fn` in kReduce*, over dims (sorted); reduced dims are removed
  kDot,          // [b..., M, K] x [b..., K, N] -> [b..., M, N], batch dims broadcast
  kGather,       // take(operand0, operand1 (int32 indices), axis dims[0])
  kAttention,    // softmax(scale * q k^T + mask) v over q, k, v[, mask] (rt::AttentionAttrs)
  kConvolution,  // (input, weight) per `conv` (rt::ConvolutionAttrs says the layouts and sizes)
  kUpdateSlice,  // operand0 with operand1 written at operand2 (an int scalar read at run time) along dims[0]
  kPlugin,       // a registered plugin's call (rt::PluginAttrs); opaque to every pass
  kPooling,      // max or average over windows of (N, C, spatial...) per `pool` (rt::PoolingAttrs)
};
const char* op_kind_name(OpKind kind);

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
  OriginRef origin;
};

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

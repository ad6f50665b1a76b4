// How a Trace op is defined: one OpDef per op, holding its dtype rule (data), its shape/check
// rule and its lowering to FlatIR, side by side. Op files register OpDefs in the registry.
#pragma once

#include <string>
#include <vector>

#include "flat/ir.h"
#include "trace/node.h"

namespace tripy::trace {

// Which dtypes an input accepts (a bit per DType) — data, so it also documents and tests itself.
using rt::EwOp;
using DTypeSet = uint32_t;
constexpr DTypeSet dtype_bit(DType t) { return 1u << static_cast<int>(t); }
inline constexpr DTypeSet kFloats = dtype_bit(DType::kFloat32) | dtype_bit(DType::kFloat16) |
                                    dtype_bit(DType::kBFloat16);
inline constexpr DTypeSet kInts = dtype_bit(DType::kInt32) | dtype_bit(DType::kInt64) |
                                  dtype_bit(DType::kInt8);
inline constexpr DTypeSet kBool = dtype_bit(DType::kBool);
inline constexpr DTypeSet kNumbers = kFloats | kInts;
inline constexpr DTypeSet kAny = kNumbers | kBool;
// Storage-only types (int4, float8) take part in casts alone.
inline constexpr DTypeSet kAll = kAny | dtype_bit(DType::kInt4) | dtype_bit(DType::kFloat8E4M3);
std::string dtype_set_str(DTypeSet set);
// "(2, 3)", "(2,)": a list of ints as Python prints a tuple (attribute values in errors).
std::string tuple_str(const std::vector<int64_t>& v);

// Context for the shape/dtype rule of one call. The rule fills node.dtype and node.shape.
struct InferCtx {
  Node& node;
  const std::vector<NodeRef>& in() const { return node.inputs; }
  const Shape& shape(int i) const { return node.inputs[i]->shape; }
  Status error(std::string message) const { return invalid_argument(std::move(message), node.source); }
};

// Context for lowering one node: the FlatIR values of its inputs and helpers that emit ops
// carrying this node's origin. Ops emitted with a reason are "inserted" and say why in errors.
class LowerCtx {
 public:
  LowerCtx(flat::Graph& graph, const Node& node, std::vector<flat::ValueId> inputs);
  const Node& node() const { return node_; }
  flat::ValueId in(int i) const { return inputs_[i]; }
  const flat::Value& value(flat::ValueId v) const { return graph_.value(v); }
  flat::Graph& graph() { return graph_; }

  flat::ValueId emit(flat::Op op, DType dtype, Shape shape, const std::string& reason = "");
  flat::ValueId ew(EwOp fn, std::vector<flat::ValueId> operands, DType dtype);  // result shape of operand 0
  flat::ValueId scalar(double v, DType dtype);  // rank-0 constant
  flat::ValueId scalar_int(int64_t v, DType dtype);  // rank-0 integer constant, exact for int64
  flat::ValueId splat(double v, DType dtype, Shape shape);
  // The literal of a full or constant pad (fill_int for integer dtypes, fill otherwise) over `shape`.
  flat::ValueId splat_fill(DType dtype, Shape shape);
  // Broadcasts `v` (numpy rules: align trailing dims) to `shape`; no-op when already there.
  flat::ValueId broadcast_to(flat::ValueId v, Shape shape, const std::string& reason);
  flat::ValueId reduce(EwOp fn, flat::ValueId v, std::vector<int64_t> dims);
  flat::ValueId reshape(flat::ValueId v, Shape shape, const std::string& reason = "");
  // `parts` joined along `axis` (one part: itself).
  flat::ValueId concat(std::vector<flat::ValueId> parts, int64_t axis);
  // An int32 scalar holding the size `d` (a tp.DimensionSize's value as data).
  flat::ValueId size_value(const Dim& d);
  // Sizes that must be equal when the compiler cannot prove it: checked at run time, where a
  // failure shows `message` and this node's line.
  void check_equal(const Dim& a, const Dim& b, const std::string& message);
  // Asserts at run time that `a` and `b` broadcast (equal, or one of them 1).
  void check_broadcast(const Dim& a, const Dim& b, const std::string& message);

 private:
  flat::OriginRef origin(const std::string& reason);
  // A run-time check of `kind` between a and b, unless they are the same size already.
  void assert_dims(rt::ShapeCheck::Kind kind, const Dim& a, const Dim& b, const std::string& message);
  flat::Graph& graph_;
  const Node& node_;
  std::vector<flat::ValueId> inputs_;
  flat::OriginRef base_origin_;
};

// The attribute bits: one per field of trace::Attrs (TRIPY_TRACE_ATTRS, node.h), and `device`,
// which the binding reads to place the op's result rather than storing it.
using AttrSet = uint32_t;
enum class AttrIndex {
#define TRIPY_ATTR_INDEX(type, n, init) n,
  TRIPY_TRACE_ATTRS(TRIPY_ATTR_INDEX)
#undef TRIPY_ATTR_INDEX
  device,
  kCount
};
inline constexpr int kAttrCount = static_cast<int>(AttrIndex::kCount);
static_assert(kAttrCount <= 32, "an AttrSet has 32 bits");
namespace attr {
#define TRIPY_ATTR_BIT(type, n, init) inline constexpr AttrSet n = 1u << static_cast<int>(AttrIndex::n);
TRIPY_TRACE_ATTRS(TRIPY_ATTR_BIT)
#undef TRIPY_ATTR_BIT
inline constexpr AttrSet device = 1u << static_cast<int>(AttrIndex::device);
}  // namespace attr
// The bit of the attribute called `name`; 0 when there is none.
AttrSet attr_named(const std::string& name);
// "dims, keepdim": the names in `set`, in declaration order.
std::string attr_set_str(AttrSet set);

struct OpDef {
  std::string name;     // API name: "add", "softmax"
  std::string display;  // how messages name it: "'+'", "softmax"
  int min_inputs = 1, max_inputs = 1;
  std::vector<DTypeSet> input_dtypes;  // per input (the last entry repeats); empty: any
  bool same_dtype = true;              // all inputs share one dtype
  Status (*infer)(InferCtx&) = nullptr;
  StatusOr<flat::ValueId> (*lower)(LowerCtx&) = nullptr;
  AttrSet attrs = 0;     // the attributes it reads
  AttrSet required = 0;  // those of them it cannot do without
  // A view of its inputs' data (unpack_int4: packed int4 bytes read as int4): tp.compile keeps the
  // op over the data it reads rather than freezing its (larger) result as a constant.
  bool view_of_data = false;
};

const OpDef* find_op(const std::string& name);
std::vector<const OpDef*> all_ops();
// Builds a node: checks arity and dtypes from the OpDef's data, then runs its rule. `symbols`:
// the table of symbolic sizes among the attributes (a creation op's tp.DimensionSize entries),
// which inputs' tables otherwise give.
StatusOr<NodeRef> make_node(const std::string& op, std::vector<NodeRef> inputs, Attrs attrs,
                            SourceRef source, std::shared_ptr<SymbolTable> symbols = nullptr);
// The same for an op already looked up (find_op), as the frontend's hot path does.
StatusOr<NodeRef> make_node(const OpDef& def, std::vector<NodeRef> inputs, Attrs attrs, SourceRef source,
                            std::shared_ptr<SymbolTable> symbols = nullptr);
// The same with every attribute at its default (an op given none, as every binary operator is):
// no Attrs built and moved into the node.
StatusOr<NodeRef> make_node(const OpDef& def, std::vector<NodeRef> inputs, SourceRef source);
// Where attributes arrive by name (the Python binding): `given` must hold only attributes `op`
// reads and every one it requires. A failure is the frontend's bug, reported at the user's line.
Status check_attrs(const std::string& op, AttrSet given, SourceRef source);
Status check_attrs(const OpDef& def, AttrSet given, SourceRef source);

// Registration: register_<name>_ops() of each file of ops, src/trace/ops_<name>.cc (the build
// lists them in the generated trace/op_files.def).
void register_op(OpDef def);
#define TRIPY_OP_FILE(name) void register_##name##_ops();
#include "trace/op_files.def"

// Shared rule: numpy broadcasting of `a` and `b`; on failure the error explains the broadcast
// Tripy would have inserted. Dynamic dims that can't be compared are asserted at run time.
StatusOr<Shape> broadcast_shapes(const InferCtx& ctx, const Shape& a, const Shape& b);
// Reduction helpers the composites share (ops_reduce.cc): `v`, reduced over `dims`, broadcast
// back over them to `full`; and the mean over `dims` (the count computed in the graph when dynamic).
flat::ValueId unreduce(LowerCtx& c, flat::ValueId v, const Shape& full, const std::vector<int64_t>& dims);
flat::ValueId mean_of(LowerCtx& c, flat::ValueId x, const std::vector<int64_t>& dims);
// The literal a full or a constant pad writes (attrs.fill_int for integer dtypes, attrs.fill
// otherwise): an integer outside `dtype`'s range is an error naming `what`, never a wrapped value.
Status check_fill(const InferCtx& ctx, DType dtype, const std::string& what);
// Normalises a possibly negative dim for `rank`; errors name the op.
StatusOr<int64_t> normalize_dim(const InferCtx& ctx, int64_t dim, int64_t rank);

}  // namespace tripy::trace

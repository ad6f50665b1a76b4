// The op registry and the rules every op shares: arity and dtype checks from OpDef data,
// numpy broadcasting with explanatory errors, and the LowerCtx emit helpers.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

std::map<std::string, OpDef>& registry() {
  static std::map<std::string, OpDef> ops;
  return ops;
}

void ensure_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
#define TRIPY_OP_FILE(name) register_##name##_ops();
#include "trace/op_files.def"
  });
}

}  // namespace

void register_op(OpDef def) {
  std::string name = def.name;
  registry()[name] = std::move(def);
}

const OpDef* find_op(const std::string& name) {
  ensure_registered();
  // Every op call of the frontend looks its op up: hashed, rather than a walk down the ordered map.
  static const std::unordered_map<std::string, const OpDef*> index = [] {
    std::unordered_map<std::string, const OpDef*> by_name;
    for (auto& [op, def] : registry()) by_name.emplace(op, &def);
    return by_name;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

std::vector<const OpDef*> all_ops() {
  ensure_registered();
  std::vector<const OpDef*> out;
  for (auto& [name, def] : registry()) out.push_back(&def);
  return out;
}

AttrSet attr_named(const std::string& name) {
#define TRIPY_ATTR_MATCH(type, n, init) \
  if (name == #n) return attr::n;
  TRIPY_TRACE_ATTRS(TRIPY_ATTR_MATCH)
#undef TRIPY_ATTR_MATCH
  return name == "device" ? attr::device : 0;
}

std::string attr_set_str(AttrSet set) {
  std::string out;
#define TRIPY_ATTR_NAME(type, n, init) \
  if (set & attr::n) out += (out.empty() ? "" : ", ") + std::string(#n);
  TRIPY_TRACE_ATTRS(TRIPY_ATTR_NAME)
#undef TRIPY_ATTR_NAME
  if (set & attr::device) out += (out.empty() ? "" : ", ") + std::string("device");
  return out;
}

Status check_attrs(const std::string& op, AttrSet given, SourceRef source) {
  const OpDef* def = find_op(op);
  if (!def) return internal_error("unknown Trace op '" + op + "'", source);
  return check_attrs(*def, given, std::move(source));
}

Status check_attrs(const OpDef& def, AttrSet given, SourceRef source) {
  if (AttrSet extra = given & ~def.attrs)
    return internal_error(def.display + " takes " + (def.attrs ? "the attributes " + attr_set_str(def.attrs) : "no attributes") +
                              ", not " + attr_set_str(extra),
                          source);
  if (AttrSet missing = def.required & ~given)
    return internal_error(def.display + " needs the attributes " + attr_set_str(missing), source);
  return ok_status();
}

std::string tuple_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string dtype_set_str(DTypeSet set) {
  std::string out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (!(set & (1u << i))) continue;
    if (!out.empty()) out += ", ";
    out += dtype_name(static_cast<DType>(i));
  }
  return out;
}

StatusOr<NodeRef> make_node(const std::string& op, std::vector<NodeRef> inputs, Attrs attrs,
                            SourceRef source, std::shared_ptr<SymbolTable> symbols) {
  const OpDef* def = find_op(op);
  if (!def) return internal_error("unknown Trace op '" + op + "'", source);
  return make_node(*def, std::move(inputs), std::move(attrs), std::move(source), std::move(symbols));
}

namespace {

// make_node's checks and rule, on a node holding its op, inputs, attributes and source.
StatusOr<NodeRef> infer_node(NodeRef node) {
  const OpDef* def = node->def;
  node->id = next_node_id();
  InferCtx ctx{*node};
  int n = static_cast<int>(node->inputs.size());
  if (n < def->min_inputs || n > def->max_inputs)
    return ctx.error(def->display + " expects " + std::to_string(def->min_inputs) +
                     (def->max_inputs != def->min_inputs ? " or more" : "") + " input(s), got " +
                     std::to_string(n) + ".");
  for (int i = 0; i < n; ++i) {
    const Node& in = *node->inputs[i];
    if (!def->input_dtypes.empty()) {
      DTypeSet allowed = def->input_dtypes[std::min<size_t>(i, def->input_dtypes.size() - 1)];
      if (!(allowed & dtype_bit(in.dtype))) {
        Status st = ctx.error("Unsupported data type for " + def->display + ": input " +
                              std::to_string(i) + " has dtype " + std::string(dtype_name(in.dtype)) +
                              ", but it must be one of: " + dtype_set_str(allowed) + ".");
        st.note("Input " + std::to_string(i) + " (" + in.describe() + ") was created here:", in.source);
        return st;
      }
    }
    if (def->same_dtype && i > 0 && in.dtype != node->inputs[0]->dtype) {
      Status st = ctx.error("Mismatched data types for " + def->display + ": " +
                            std::string(dtype_name(node->inputs[0]->dtype)) + " and " +
                            std::string(dtype_name(in.dtype)) +
                            ". Tripy does not promote types implicitly; use tp.cast to convert one of them.");
      for (int j : {0, i}) st.note("Input " + std::to_string(j) + " (" + node->inputs[j]->describe() + "):",
                                   node->inputs[j]->source);
      return st;
    }
    if (in.device != node->inputs[0]->device)
      return ctx.error("Inputs of " + def->display + " are on different devices: " +
                       node->inputs[0]->device.str() + " and " + in.device.str() +
                       ". Use tp.copy to move one of them.");
    if (in.symbols) node->symbols = in.symbols;
  }
  // Creation ops (no inputs) get their device from the frontend, which passes it as an attribute.
  if (n > 0) node->device = node->inputs[0]->device;
  TRIPY_RETURN_IF_ERROR(def->infer(ctx));
  // Sizes the symbols' bounds decide are folded now, so the shapes users see are the simple ones.
  if (node->symbols) {
    node->shape = simplified(node->shape, *node->symbols);
    if (node->dim_value) node->dim_value = node->dim_value->simplified(*node->symbols);
  }
  // A static shape whose element count overflows int64 can never be materialised.
  int64_t count = 1;
  for (const Dim& d : node->shape) {
    if (d.is_static() && __builtin_mul_overflow(count, d.static_value(), &count))
      return ctx.error("The result of " + def->display + " would have shape " + shape_str(node->shape) +
                       ": more elements than fit in 64 bits.");
  }
  return node;
}

}  // namespace

StatusOr<NodeRef> make_node(const OpDef& op, std::vector<NodeRef> inputs, Attrs attrs, SourceRef source,
                            std::shared_ptr<SymbolTable> symbols) {
  auto node = std::make_shared<Node>();
  node->def = &op;
  node->attrs = std::move(attrs);
  node->inputs = std::move(inputs);
  node->source = std::move(source);
  node->symbols = std::move(symbols);
  return infer_node(std::move(node));
}

StatusOr<NodeRef> make_node(const OpDef& op, std::vector<NodeRef> inputs, SourceRef source) {
  auto node = std::make_shared<Node>();
  node->def = &op;
  node->inputs = std::move(inputs);
  node->source = std::move(source);
  return infer_node(std::move(node));
}

StatusOr<int64_t> normalize_dim(const InferCtx& ctx, int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r)
    return ctx.error("Dimension " + std::to_string(dim) + " is out of range for " +
                     ctx.node.def->display + " on a tensor of rank " + std::to_string(rank) +
                     " (expected a value in [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "]).");
  return dim < 0 ? dim + r : dim;
}

StatusOr<Shape> broadcast_shapes(const InferCtx& ctx, const Shape& a, const Shape& b) {
  // Equal shapes, the usual case (every eager `a + b`): the left one, made and compared once.
  if (a.size() == b.size() &&
      std::equal(a.begin(), a.end(), b.begin(), [](const Dim& x, const Dim& y) { return x.same_as(y); }))
    return a;
  static const Dim kOne(1);
  size_t rank = std::max(a.size(), b.size());
  Shape out;
  out.reserve(rank);
  const SymbolTable* table = ctx.node.symbols.get();
  for (size_t i = 0; i < rank; ++i) {
    // Align trailing dims; missing leading dims act as 1.
    const Dim& da = i + a.size() >= rank ? a[i + a.size() - rank] : kOne;
    const Dim& db = i + b.size() >= rank ? b[i + b.size() - rank] : kOne;
    if (da.same_as(db) || (db.is_static() && db.static_value() == 1)) {
      out.push_back(da);
    } else if (da.is_static() && da.static_value() == 1) {
      out.push_back(db);
    } else if (da.is_static() && db.is_static()) {
      bool right_smaller = db.static_value() < da.static_value();
      int which = right_smaller ? 1 : 0;
      const Node& small = *ctx.node.inputs[which];
      const Shape& target = right_smaller ? a : b;
      Status st = ctx.error("Incompatible shapes for " + ctx.node.def->display + ": " +
                            shape_str(a, table) + " and " + shape_str(b, table) + " cannot be broadcast: dimension " +
                            std::to_string(i) + " has sizes " + std::to_string(da.static_value()) + " and " +
                            std::to_string(db.static_value()) + ".");
      st.note("Tripy would have inserted an operation to broadcast the " +
              std::string(right_smaller ? "right" : "left") + " operand of " + ctx.node.def->display +
              ", which was:\n    " + small.describe() + "\nto a shape of: " + shape_str(target, table) +
              " in order to be compatible with the other input(s), but its dimension " + std::to_string(i) +
              " is neither 1 nor " + std::to_string((right_smaller ? da : db).static_value()) + ".");
      for (size_t j = 0; j < ctx.node.inputs.size() && j < 2; ++j)
        st.note("Input " + std::to_string(j) + ":", ctx.node.inputs[j]->source);
      return st;
    } else {
      // At least one is dynamic: the result is the larger; lowering asserts compatibility.
      out.push_back(Dim::make(DimOp::kMax, da, db));
    }
  }
  return out;
}

// --- LowerCtx ---------------------------------------------------------------------------------

LowerCtx::LowerCtx(flat::Graph& graph, const Node& node, std::vector<flat::ValueId> inputs)
    : graph_(graph), node_(node), inputs_(std::move(inputs)) {
  auto o = std::make_shared<flat::Origin>();
  o->where = node.source;
  o->trace_op = node.def ? node.def->display : "input";
  for (const auto& in : node.inputs) {
    o->input_sources.push_back(in->source);
    o->input_descs.push_back(in->describe());
  }
  base_origin_ = std::move(o);
}

flat::OriginRef LowerCtx::origin(const std::string& reason) {
  if (reason.empty()) return base_origin_;
  auto o = std::make_shared<flat::Origin>(*base_origin_);
  o->reason = reason;
  return o;
}

flat::ValueId LowerCtx::emit(flat::Op op, DType dtype, Shape shape, const std::string& reason) {
  op.origin = origin(reason);
  return graph_.add(std::move(op), dtype, std::move(shape));
}

flat::ValueId LowerCtx::ew(EwOp fn, std::vector<flat::ValueId> operands, DType dtype) {
  flat::Op op;
  op.kind = flat::OpKind::kElementwise;
  op.fn = fn;
  Shape shape = graph_.value(operands[0]).shape;
  op.operands = std::move(operands);
  return emit(std::move(op), dtype, std::move(shape));
}

flat::ValueId LowerCtx::scalar(double v, DType dtype) {
  flat::Op op;
  op.kind = flat::OpKind::kConstant;
  op.constant = Tensor::empty_host(dtype, {});
  void* p = op.constant.data();
  switch (dtype) {
    case DType::kFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case DType::kInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::kInt64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::kInt8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::kBool: *static_cast<uint8_t*>(p) = v != 0; break;
    default: {
      // Other floats: make a float32 scalar and convert in the graph (exact for the literal).
      *static_cast<float*>(p) = static_cast<float>(v);
      op.constant = Tensor::empty_host(DType::kFloat32, {});
      *static_cast<float*>(op.constant.data()) = static_cast<float>(v);
      flat::ValueId f = emit(std::move(op), DType::kFloat32, {});
      return ew(EwOp::kConvert, {f}, dtype);
    }
  }
  return emit(std::move(op), dtype, {});
}

flat::ValueId LowerCtx::scalar_int(int64_t v, DType dtype) {
  // int8, int32 and int64 constants hold the value itself (the rule checked that it fits); int4
  // is made as int32 and converted in the graph.
  const DType held = dtype == DType::kInt8 || dtype == DType::kInt64 ? dtype : DType::kInt32;
  flat::Op op;
  op.kind = flat::OpKind::kConstant;
  op.constant = Tensor::empty_host(held, {});
  void* p = op.constant.data();
  if (held == DType::kInt8) *static_cast<int8_t*>(p) = static_cast<int8_t>(v);
  else if (held == DType::kInt64) *static_cast<int64_t*>(p) = v;
  else *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
  flat::ValueId c = emit(std::move(op), held, {});
  return held == dtype ? c : ew(EwOp::kConvert, {c}, dtype);
}

flat::ValueId LowerCtx::splat(double v, DType dtype, Shape shape) {
  return broadcast_to(scalar(v, dtype), std::move(shape), "");
}

flat::ValueId LowerCtx::splat_fill(DType dtype, Shape shape) {
  const Attrs& a = node_.attrs;
  if (!is_integer(dtype)) return splat(a.fill, dtype, std::move(shape));
  return broadcast_to(scalar_int(a.fill_int, dtype), std::move(shape), "");
}

namespace {
// The values an integer dtype holds, as numpy states them in its overflow errors.
std::pair<int64_t, int64_t> int_range(DType dtype) {
  switch (dtype) {
    case DType::kInt4: return {-8, 7};
    case DType::kInt8: return {INT8_MIN, INT8_MAX};
    case DType::kInt32: return {INT32_MIN, INT32_MAX};
    default: return {INT64_MIN, INT64_MAX};
  }
}
}  // namespace

Status check_fill(const InferCtx& ctx, DType dtype, const std::string& what) {
  const Attrs& a = ctx.node.attrs;
  if (!is_integer(dtype)) {
    if (a.fill_int != 0)
      return ctx.error(what + ": a " + std::string(dtype_name(dtype)) + " value comes as `fill`, not `fill_int`.");
    return ok_status();
  }
  // Doubles cannot hold every int64, so integer literals come exact, in fill_int.
  if (a.fill != 0)
    return ctx.error(what + ": an integer value comes as `fill_int`, exact, not as the double `fill`.");
  const auto [lo, hi] = int_range(dtype);
  if (a.fill_int < lo || a.fill_int > hi)
    return ctx.error("The integer " + std::to_string(a.fill_int) + " is out of range for " +
                     std::string(dtype_name(dtype)) + " (" + std::to_string(lo) + " to " + std::to_string(hi) +
                     ")" + (what == "full" ? "" : " in " + what) + ".");
  return ok_status();
}

flat::ValueId LowerCtx::broadcast_to(flat::ValueId v, Shape shape, const std::string& reason) {
  // Copies: emitting ops grows graph_.values, which would invalidate references into it.
  const Shape from = graph_.value(v).shape;
  if (same_shape(from, shape)) return v;
  flat::Op op;
  op.kind = flat::OpKind::kBroadcast;
  op.operands = {v};
  size_t offset = shape.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    op.dims.push_back(static_cast<int64_t>(offset + i));
    const Dim& f = from[i];
    const Dim& t = shape[offset + i];
    if (!f.same_as(t) && !(f.is_static() && f.static_value() == 1)) {
      flat::ShapeAssertion a;
      a.kind = rt::ShapeCheck::Kind::kBroadcast;
      a.a = f;
      a.b = t;
      a.message = "Incompatible sizes at run time for " + base_origin_->trace_op + ": dimension " +
                  std::to_string(offset + i) + " must be broadcastable (equal, or 1).";
      a.origin = origin(reason);
      graph_.assertions.push_back(std::move(a));
    }
  }
  DType dt = graph_.value(v).dtype;
  return emit(std::move(op), dt, std::move(shape), reason);
}

flat::ValueId LowerCtx::reduce(EwOp fn, flat::ValueId v, std::vector<int64_t> dims) {
  // Reducing over no dims (all dims of a rank-0 tensor) leaves each element alone; backends
  // need at least one reduced dim, so no op is emitted.
  if (dims.empty()) return v;
  const flat::Value val = graph_.value(v);
  Shape out;
  for (size_t i = 0; i < val.shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end()) out.push_back(val.shape[i]);
  flat::Op op;
  op.kind = flat::OpKind::kReduce;
  op.fn = fn;
  op.operands = {v};
  op.dims = std::move(dims);
  DType dt = val.dtype;
  return emit(std::move(op), dt, std::move(out));
}

flat::ValueId LowerCtx::reshape(flat::ValueId v, Shape shape, const std::string& reason) {
  if (same_shape(graph_.value(v).shape, shape)) return v;
  flat::Op op;
  op.kind = flat::OpKind::kReshape;
  op.operands = {v};
  DType dt = graph_.value(v).dtype;
  return emit(std::move(op), dt, std::move(shape), reason);
}

flat::ValueId LowerCtx::concat(std::vector<flat::ValueId> parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  Shape out = graph_.value(parts[0]).shape;
  Dim total = 0;
  for (flat::ValueId p : parts) total = total + graph_.value(p).shape[axis];
  out[axis] = total;
  flat::Op op;
  op.kind = flat::OpKind::kConcatenate;
  op.operands = std::move(parts);
  op.dims = {axis};
  const DType dt = graph_.value(op.operands[0]).dtype;
  return emit(std::move(op), dt, std::move(out));
}

void LowerCtx::check_equal(const Dim& a, const Dim& b, const std::string& message) {
  assert_dims(rt::ShapeCheck::Kind::kEqual, a, b, message);
}

void LowerCtx::check_broadcast(const Dim& a, const Dim& b, const std::string& message) {
  assert_dims(rt::ShapeCheck::Kind::kBroadcast, a, b, message);
}

void LowerCtx::assert_dims(rt::ShapeCheck::Kind kind, const Dim& a, const Dim& b, const std::string& message) {
  if (a.same_as(b)) return;
  flat::ShapeAssertion assertion;
  assertion.kind = kind;
  assertion.a = a;
  assertion.b = b;
  assertion.message = message;
  assertion.origin = origin("");
  graph_.assertions.push_back(std::move(assertion));
}

flat::ValueId LowerCtx::size_value(const Dim& d) {
  if (d.is_static()) return scalar(static_cast<double>(d.static_value()), DType::kInt32);
  // FlatIR has no op that reads the shape program: a sum of ones along `d` computes the size
  // from the run-time shapes, and folds away wherever only the size (not the data) is used.
  return reduce(EwOp::kReduceSum, splat(1, DType::kInt32, {d}), {0});
}

}  // namespace tripy::trace

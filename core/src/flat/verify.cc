// The FlatIR verifier: checks every op's operand count, dtypes and shapes against its kind's
// rule, and that the graph is in topological order. Lowering bugs surface here, near their cause.
#include <algorithm>

#include "flat/ir.h"
#include "flat/ir_text.h"

namespace tripy::flat {
namespace {

// Dims that may differ only where the verifier cannot decide (symbolic): equal when provably so,
// or when either is dynamic (lowering added a run-time assertion for it).
bool may_equal(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.static_value() == b.static_value();
  return true;
}

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g) {}

  Status run() {
    for (size_t i = 0; i < g_.ops.size(); ++i) TRIPY_RETURN_IF_ERROR(check_op(static_cast<int32_t>(i)));
    if (g_.input_names.size() != g_.inputs.size()) return fail(nullptr, "input_names and inputs differ in length");
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      ValueId v = g_.inputs[i];
      if (!valid(v) || g_.def(v).kind != OpKind::kParameter || g_.def(v).index != static_cast<int32_t>(i)) {
        return fail(nullptr, "input " + std::to_string(i) + " is not the parameter with that index");
      }
    }
    for (ValueId v : g_.outputs) {
      if (!valid(v)) return fail(nullptr, "output %" + std::to_string(v) + " is not defined");
      if (is_shape_value(v)) return fail(nullptr, "output %" + std::to_string(v) + " is a shape value's parameter");
    }
    return ok_status();
  }

 private:
  bool valid(ValueId v) const {
    return v >= 0 && static_cast<size_t>(v) < g_.values.size() && g_.values[v].def >= 0 &&
           static_cast<size_t>(g_.values[v].def) < g_.ops.size();
  }

  // A shape value's parameter lives on the host for the shape program: no op may read it.
  bool is_shape_value(ValueId v) const {
    return g_.def(v).kind == OpKind::kParameter && g_.def(v).shape_symbol >= 0;
  }

  Status fail(const Op* op, const std::string& what) const {
    std::string where = op ? "%" + std::to_string(op->result) + " = " + op_text_name(*op) + ": " : "";
    return internal_error("invalid FlatIR: " + where + what, op && op->origin ? op->origin->where : nullptr);
  }

  Status expect_operands(const Op& op, size_t n) const {
    if (op.operands.size() != n) {
      return fail(&op, "expected " + std::to_string(n) + " operands, got " + std::to_string(op.operands.size()));
    }
    return ok_status();
  }

  Status expect_shape(const Op& op, const Shape& want, const Shape& got, const char* what) const {
    bool ok = want.size() == got.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = may_equal(want[i], got[i]);
    if (!ok) {
      return fail(&op, std::string(what) + " has shape " + shape_str(got, &g_.symbols) + ", expected " +
                           shape_str(want, &g_.symbols));
    }
    return ok_status();
  }

  Status check_op(int32_t index) {
    const Op& op = g_.ops[index];
    if (op.result < 0 || static_cast<size_t>(op.result) >= g_.values.size() || g_.values[op.result].def != index) {
      return fail(&op, "result value does not point back at its op");
    }
    for (ValueId v : op.operands) {
      if (!valid(v) || g_.values[v].def >= index) return fail(&op, "operand %" + std::to_string(v) + " is not defined before use");
      if (is_shape_value(v))
        return fail(&op, "operand %" + std::to_string(v) + " is a shape value's parameter, which ops cannot read");
    }
    const Value& r = g_.values[op.result];
    auto operand = [&](size_t i) -> const Value& { return g_.values[op.operands[i]]; };
    const int64_t rank = static_cast<int64_t>(r.shape.size());
    switch (op.kind) {
      case OpKind::kParameter:
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 0));
        if (op.index < 0 || static_cast<size_t>(op.index) >= g_.inputs.size() || g_.inputs[op.index] != op.result) {
          return fail(&op, "parameter index " + std::to_string(op.index) + " is not in graph.inputs");
        }
        if (op.shape_symbol >= 0 &&
            (static_cast<size_t>(op.shape_symbol) >= g_.symbols.symbols.size() || r.dtype != DType::kInt64 || rank != 0)) {
          return fail(&op, "a shape value's parameter must be i64[] and name a declared symbol");
        }
        return ok_status();
      case OpKind::kConstant:
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 0));
        if (!op.constant.defined() || op.constant.dtype() != r.dtype || !is_static(r.shape) ||
            op.constant.shape() != static_dims(r.shape)) {
          return fail(&op, "constant data does not match the result type");
        }
        return ok_status();
      case OpKind::kIota:
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 0));
        if (op.dims.size() != 1 || op.dims[0] < 0 || op.dims[0] >= rank) return fail(&op, "iota needs one dim inside the rank");
        if (r.dtype == DType::kBool) return fail(&op, "iota cannot produce bool");
        return ok_status();
      case OpKind::kElementwise: return check_elementwise(op, r);
      case OpKind::kBroadcast: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
        const Value& a = operand(0);
        if (a.dtype != r.dtype) return fail(&op, "dtype changes");
        if (op.dims.size() != a.shape.size()) return fail(&op, "dims must map every operand dim");
        for (size_t i = 0; i < op.dims.size(); ++i) {
          if (op.dims[i] < 0 || op.dims[i] >= rank || (i && op.dims[i] <= op.dims[i - 1])) {
            return fail(&op, "dims must be increasing and inside the result rank");
          }
          const Dim& from = a.shape[i];
          if (!(from.is_static() && from.static_value() == 1) && !may_equal(from, r.shape[op.dims[i]])) {
            return fail(&op, "operand dim " + std::to_string(i) + " (" + from.str(&g_.symbols) +
                                 ") cannot broadcast to " + r.shape[op.dims[i]].str(&g_.symbols));
          }
        }
        return ok_status();
      }
      case OpKind::kReshape: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
        if (operand(0).dtype != r.dtype) return fail(&op, "dtype changes");
        if (!may_equal(num_elements(operand(0).shape), num_elements(r.shape))) return fail(&op, "element count changes");
        return ok_status();
      }
      case OpKind::kTranspose: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
        const Value& a = operand(0);
        if (a.dtype != r.dtype) return fail(&op, "dtype changes");
        std::vector<int64_t> sorted = op.dims;
        std::sort(sorted.begin(), sorted.end());
        bool perm = static_cast<int64_t>(sorted.size()) == rank && a.shape.size() == sorted.size();
        for (size_t i = 0; perm && i < sorted.size(); ++i) perm = sorted[i] == static_cast<int64_t>(i);
        if (!perm) return fail(&op, "dims must be a permutation of the operand's dims");
        Shape want;
        for (int64_t d : op.dims) want.push_back(a.shape[d]);
        return expect_shape(op, want, r.shape, "the result");
      }
      case OpKind::kSlice: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
        const Value& a = operand(0);
        if (a.dtype != r.dtype) return fail(&op, "dtype changes");
        size_t n = a.shape.size();
        if (op.starts.size() != n || op.limits.size() != n || op.steps.size() != n || r.shape.size() != n) {
          return fail(&op, "starts, limits and steps need one entry per dim");
        }
        Shape want;
        for (size_t i = 0; i < n; ++i) {
          // Negative steps walk backwards (flip); zero would repeat one element forever.
          if (op.steps[i].is_static() && op.steps[i].static_value() == 0) return fail(&op, "steps must not be 0");
          // A reversed range (limit before start for the step's direction) is empty, not negative.
          want.push_back(Dim::make(DimOp::kMax, Dim::make(DimOp::kCeilDiv, op.limits[i] - op.starts[i], op.steps[i]), 0));
        }
        return expect_shape(op, want, r.shape, "the result");
      }
      case OpKind::kConcatenate: {
        if (op.operands.empty()) return fail(&op, "needs at least one operand");
        if (op.dims.size() != 1 || op.dims[0] < 0 || op.dims[0] >= rank) return fail(&op, "needs one axis inside the rank");
        Dim total(int64_t{0});
        for (size_t i = 0; i < op.operands.size(); ++i) {
          const Value& a = operand(i);
          if (a.dtype != r.dtype) return fail(&op, "operands must share the result dtype");
          Shape want = r.shape;
          if (a.shape.size() != want.size()) return fail(&op, "operands must share the result rank");
          want[op.dims[0]] = a.shape[op.dims[0]];
          TRIPY_RETURN_IF_ERROR(expect_shape(op, want, a.shape, "an operand"));
          total = total + a.shape[op.dims[0]];
        }
        if (!may_equal(total, r.shape[op.dims[0]])) return fail(&op, "the result's axis is not the sum of the operands'");
        return ok_status();
      }
      case OpKind::kReduce: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
        const Value& a = operand(0);
        if (!rt::is_reduction(op.fn)) return fail(&op, "fn is not a reduction");
        if (a.dtype != r.dtype) return fail(&op, "dtype changes");
        Shape want;
        size_t k = 0;
        for (size_t i = 0; i < a.shape.size(); ++i) {
          if (k < op.dims.size() && op.dims[k] == static_cast<int64_t>(i)) {
            ++k;
          } else {
            want.push_back(a.shape[i]);
          }
        }
        if (k != op.dims.size()) return fail(&op, "dims must be sorted, unique and inside the operand's rank");
        return expect_shape(op, want, r.shape, "the result");
      }
      case OpKind::kDot: return check_dot(op, r);
      case OpKind::kAttention: return check_attention(op, r);
      case OpKind::kConvolution: return check_convolution(op, r);
      case OpKind::kPlugin: {
        // The plugin's rule gave the result; only the limits backends rely on are checked.
        if (op.plugin.name.empty()) return fail(&op, "names no plugin");
        if (op.operands.size() > rt::kMaxPluginInputs) return fail(&op, "has more than 8 operands");
        for (ValueId v : op.operands)
          if (g_.values[v].shape.size() > rt::kMaxPluginRank) return fail(&op, "has an operand of rank above 8");
        if (r.shape.size() > rt::kMaxPluginRank) return fail(&op, "has a result of rank above 8");
        return ok_status();
      }
      case OpKind::kPooling: return check_pooling(op, r);
      case OpKind::kKernel: {
        // The kind's own rules check the kernel it becomes (rt::validate_program, when the
        // program is built); fused kernels are fusion's to make.
        if (static_cast<size_t>(op.kernel.kind) >= rt::kNumKernelKinds) return fail(&op, "has an invalid kernel kind");
        if (op.kernel.kind == rt::KernelKind::kFused) return fail(&op, "is a fused kernel, which only fusion makes");
        return ok_status();
      }
      case OpKind::kGather: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 2));
        const Value& a = operand(0);
        const Value& idx = operand(1);
        if (a.dtype != r.dtype) return fail(&op, "dtype changes");
        if (idx.dtype != DType::kInt32 && idx.dtype != DType::kInt64) return fail(&op, "indices must be int32");
        if (op.dims.size() != 1 || op.dims[0] < 0 || op.dims[0] >= static_cast<int64_t>(a.shape.size())) {
          return fail(&op, "needs one axis inside the operand's rank");
        }
        Shape want(a.shape.begin(), a.shape.begin() + op.dims[0]);
        want.insert(want.end(), idx.shape.begin(), idx.shape.end());
        want.insert(want.end(), a.shape.begin() + op.dims[0] + 1, a.shape.end());
        return expect_shape(op, want, r.shape, "the result");
      }
      case OpKind::kUpdateSlice: {
        TRIPY_RETURN_IF_ERROR(expect_operands(op, 3));
        const Value& a = operand(0);
        const Value& up = operand(1);
        const Value& start = operand(2);
        if (a.dtype != r.dtype || up.dtype != r.dtype) return fail(&op, "the operand, update and result dtypes differ");
        if ((start.dtype != DType::kInt32 && start.dtype != DType::kInt64) || start.shape.size() > 1)
          return fail(&op, "the start must be an int32 or int64 scalar");
        if (op.dims.empty() || op.dims.size() > 2 || op.dims[0] < 0 ||
            op.dims[0] >= static_cast<int64_t>(a.shape.size()) || up.shape.size() != a.shape.size())
          return fail(&op, "needs one axis inside the operand's rank and an update of the operand's rank");
        const size_t axis = static_cast<size_t>(op.dims[0]);
        for (size_t d = 0; d < a.shape.size(); ++d)
          if (d < axis || (d > axis && op.dims.size() == 1))
            TRIPY_RETURN_IF_ERROR(expect_shape(op, {a.shape[d]}, {up.shape[d]}, "the update"));
        if (op.dims.size() == 2) {  // windows (fold_update_windows): static rows past the axis
          int64_t row = 1, window = 1;
          for (size_t d = axis + 1; d < a.shape.size(); ++d) {
            if (!a.shape[d].is_static() || !up.shape[d].is_static())
              return fail(&op, "reads windows of an update whose dims past the axis are not static");
            row *= up.shape[d].static_value();
            window *= a.shape[d].static_value();
          }
          if (op.dims[1] < 0 || op.dims[1] > row - window)
            return fail(&op, "reads a window past the end of the update's rows");
        }
        return expect_shape(op, a.shape, r.shape, "the result");
      }
    }
    return fail(&op, "unknown op kind");
  }

  // The op's row in the primitive table gives its operands and the kinds it is defined on.
  Status check_elementwise(const Op& op, const Value& r) const {
    if (!rt::ew_valid(op.fn)) return fail(&op, "fn is not an elementwise function");
    const rt::EwForm form = rt::ew_form(op.fn);
    using F = rt::EwForm;
    if (form == F::kLoad || form == F::kConst || form == F::kIota || form == F::kReduce)
      return fail(&op, "fn is not an elementwise function");
    const size_t n = static_cast<size_t>(rt::ew_num_operands(op.fn));
    TRIPY_RETURN_IF_ERROR(expect_operands(op, n));
    for (size_t i = 0; i < n; ++i) {
      TRIPY_RETURN_IF_ERROR(expect_shape(op, r.shape, g_.values[op.operands[i]].shape, "an operand"));
    }
    DType a = g_.values[op.operands[0]].dtype;
    switch (form) {
      case F::kConvert: return ok_status();
      case F::kSelect:
        if (a != DType::kBool) return fail(&op, "the condition must be bool");
        if (g_.values[op.operands[1]].dtype != r.dtype || g_.values[op.operands[2]].dtype != r.dtype) {
          return fail(&op, "both branches must have the result dtype");
        }
        return ok_status();
      case F::kBinary:
      case F::kCompare:
        if (g_.values[op.operands[1]].dtype != a) return fail(&op, "operands must share a dtype");
        if (form == F::kCompare && r.dtype != DType::kBool) return fail(&op, "a comparison gives bool");
        if (form == F::kBinary && r.dtype != a) return fail(&op, "the result must have the operands' dtype");
        break;
      case F::kUnary:
        if (r.dtype != a) return fail(&op, "the result must have the operands' dtype");
        break;
      case F::kLoad: case F::kConst: case F::kIota: case F::kReduce: break;  // rejected above
    }
    if (!rt::ew_defined_on(op.fn, rt::compute_kind(a)))
      return fail(&op, "is not defined on " + std::string(dtype_name(a)) + " operands");
    return ok_status();
  }

  Status check_pooling(const Op& op, const Value& r) const {
    TRIPY_RETURN_IF_ERROR(expect_operands(op, 1));
    const Value& x = g_.values[op.operands[0]];
    const rt::PoolingAttrs& a = op.pooling;
    if (x.dtype != r.dtype) return fail(&op, "dtype changes");
    if (a.layout > rt::Layout::kChannelsLast) return fail(&op, "has an invalid layout");
    const size_t nd = x.shape.size() - 2;
    if (x.shape.size() < 3 || nd > rt::kMaxConvSpatialDims) return fail(&op, "the input needs 1 to 3 spatial dims");
    if (const std::string e = rt::pool_attrs_error(a, nd); !e.empty()) return fail(&op, e);
    return expect_shape(op, pool_result_shape(x.shape, a), r.shape, "the result");
  }

  Status check_convolution(const Op& op, const Value& r) const {
    TRIPY_RETURN_IF_ERROR(expect_operands(op, 2));
    const Value& xv = g_.values[op.operands[0]];
    const Value& wv = g_.values[op.operands[1]];
    const rt::ConvolutionAttrs& a = op.convolution;
    if (xv.dtype != wv.dtype || xv.dtype != r.dtype) return fail(&op, "operands and result must share a dtype");
    if (a.layout > rt::Layout::kChannelsLast) return fail(&op, "has an invalid layout");
    const size_t nd = xv.shape.size() - 2;
    if (xv.shape.size() < 3 || nd > rt::kMaxConvSpatialDims || wv.shape.size() != xv.shape.size())
      return fail(&op, "input and weight need one rank with 1 to 3 spatial dims");
    // The rules are stated channels-first: read channels-last operands in that order.
    const Value x{xv.dtype, rt::to_channels_first(a.layout, xv.shape), xv.def};
    const Value w{wv.dtype, rt::to_channels_first(a.layout, wv.shape), wv.def};
    if (const std::string e = rt::conv_attrs_error(a, nd); !e.empty()) return fail(&op, e);
    if (!is_static(w.shape)) return fail(&op, "the weight's shape must be static");
    // The weight's dims enter the size rule's products (channels times groups, dilation times
    // the kernel's size): bounded like the attributes.
    for (const Dim& d : w.shape)
      if (d.static_value() > rt::kMaxConvAttr) return fail(&op, "has a weight dim over 2^30");
    if (a.has_bias || a.has_residual || a.activation != rt::Activation::kNone)
      return fail(&op, "epilogues are the fusion planner's, not FlatIR's");
    const int64_t w0 = w.shape[0].static_value(), w1 = w.shape[1].static_value();
    const Dim in_c = a.transposed ? Dim(w0) : Dim(w1 * a.groups);
    if (!may_equal(x.shape[1], in_c)) return fail(&op, "the input's channels do not match the weight's");
    if (w0 % a.groups != 0) return fail(&op, "groups must divide the channels");
    return expect_shape(op, conv_result_shape(xv.shape, wv.shape, a), r.shape, "the result");
  }

  Status check_dot(const Op& op, const Value& r) const {
    TRIPY_RETURN_IF_ERROR(expect_operands(op, 2));
    const Value& a = g_.values[op.operands[0]];
    const Value& b = g_.values[op.operands[1]];
    if (a.dtype != b.dtype || (r.dtype != a.dtype && r.dtype != rt::dot_accumulator_dtype(a.dtype)))
      return fail(&op, "operands must share a dtype, and the result must have it or be their accumulator (int8 -> "
                       "int32, float8 -> float32)");
    size_t ra = a.shape.size(), rb = b.shape.size();
    if (ra < 2 || rb < 2) return fail(&op, "operands need rank >= 2");
    if (!may_equal(a.shape[ra - 1], b.shape[rb - 2])) {
      return fail(&op, "contracting dims differ: " + a.shape[ra - 1].str(&g_.symbols) + " vs " + b.shape[rb - 2].str(&g_.symbols));
    }
    // Batch dims broadcast numpy-style.
    size_t batch = std::max(ra, rb) - 2;
    Shape want;
    for (size_t i = 0; i < batch; ++i) {
      // Right-aligned: operand x has rank(x) - 2 batch dims, the last ones of the result's.
      size_t skip_a = batch - (ra - 2), skip_b = batch - (rb - 2);
      Dim da = i >= skip_a ? a.shape[i - skip_a] : Dim(1);
      Dim db = i >= skip_b ? b.shape[i - skip_b] : Dim(1);
      bool a_one = da.is_static() && da.static_value() == 1;
      want.push_back(a_one ? db : da);
    }
    want.push_back(a.shape[ra - 2]);
    want.push_back(b.shape[rb - 1]);
    return expect_shape(op, want, r.shape, "the result");
  }

  // Operand shapes as the attention reads them: logical dim i is operand dim perms[x][i].
  Status check_attention(const Op& op, const Value& r) const {
    const rt::AttentionAttrs& a = op.attention;
    const bool masked = a.mask != rt::MaskKind::kNone;
    TRIPY_RETURN_IF_ERROR(expect_operands(op, masked ? 4 : 3));
    for (const rt::AttentionAttrs::Perm& p : a.perms) {
      bool seen[4] = {false, false, false, false};
      for (int8_t d : p) {
        if (d < 0 || d > 3 || seen[d]) return fail(&op, "an operand layout is not a permutation of 4 dims");
        seen[d] = true;
      }
    }
    std::vector<const Value*> vals;
    for (ValueId v : op.operands) vals.push_back(&g_.values[v]);
    vals.push_back(&r);
    for (const Value* v : vals)
      if (v->shape.size() != 4) return fail(&op, "operands and result must be 4-D");
    for (size_t i = 0; i < vals.size(); ++i) {
      const int x = i + 1 == vals.size() ? rt::AttentionAttrs::kOut : static_cast<int>(i);
      const rt::AttentionAttrs::HeadWindow& w = a.heads[x];
      const Dim& dim = vals[i]->shape[a.perms[x][1]];
      if (w != rt::AttentionAttrs::HeadWindow{} &&
          (w.start < 0 || w.count < 1 || (dim.is_static() && w.start + w.count > dim.static_value())))
        return fail(&op, "a head window does not fit its operand");
    }
    auto logical = [&](int x, const Value& v) {
      Shape s;
      for (int i = 0; i < 4; ++i) s.push_back(v.shape[a.perms[x][i]]);
      if (a.heads[x].count > 0) s[1] = Dim(a.heads[x].count);
      return s;
    };
    const DType t = r.dtype;
    if ((t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) || vals[0]->dtype != t || vals[1]->dtype != t || vals[2]->dtype != t)
      return fail(&op, "q, k, v and the result must share a float dtype");
    if (a.mask == rt::MaskKind::kCausalOffset) {
      if (vals[3]->dtype != DType::kInt32 && vals[3]->dtype != DType::kInt64)
        return fail(&op, "the causal offset must be int32 or int64");
      for (const Dim& d : vals[3]->shape)
        if (!d.is_static() || d.static_value() != 1) return fail(&op, "the causal offset must have shape (1, 1, 1, 1)");
      if (a.causal) return fail(&op, "causal and a causal offset exclude each other");
    } else if (masked && vals[3]->dtype != (a.mask == rt::MaskKind::kBool ? DType::kBool : t)) {
      return fail(&op, "the mask's dtype does not fit its kind");
    }
    const Shape q = logical(rt::AttentionAttrs::kQ, *vals[0]), k = logical(rt::AttentionAttrs::kK, *vals[1]);
    const Shape v = logical(rt::AttentionAttrs::kV, *vals[2]), o = logical(rt::AttentionAttrs::kOut, r);
    TRIPY_RETURN_IF_ERROR(expect_shape(op, {q[0], k[1], k[2], q[3]}, k, "k"));
    TRIPY_RETURN_IF_ERROR(expect_shape(op, {q[0], k[1], k[2], v[3]}, v, "v"));
    TRIPY_RETURN_IF_ERROR(expect_shape(op, {q[0], q[1], q[2], v[3]}, o, "the result"));
    if (q[1].is_static() && k[1].is_static() && k[1].static_value() > 0 && q[1].static_value() % k[1].static_value() != 0)
      return fail(&op, "k/v heads (" + k[1].str(&g_.symbols) + ") must divide q heads (" + q[1].str(&g_.symbols) + ")");
    if (masked && a.mask != rt::MaskKind::kCausalOffset) {
      const Shape m = logical(rt::AttentionAttrs::kMask, *vals[3]);
      const Shape full = {q[0], q[1], q[2], k[2]};
      for (int i = 0; i < 4; ++i)
        if (!(m[i].is_static() && m[i].static_value() == 1) && !may_equal(m[i], full[i]))
          return fail(&op, "the mask " + shape_str(m, &g_.symbols) + " does not broadcast to " + shape_str(full, &g_.symbols));
    }
    return ok_status();
  }

  const Graph& g_;
};

}  // namespace

Status verify(const Graph& graph) { return Verifier(graph).run(); }

}  // namespace tripy::flat

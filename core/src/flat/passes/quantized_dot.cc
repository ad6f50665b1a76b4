// Low-precision GEMMs from quantize/dequantize around a matmul. tp.dequantize lowers to
//   mul(convert(q -> F), broadcast(constant scale))
// so dot(dequantize(qa, sa), dequantize(qb, sb)) multiplies int8 (or float8) values that were
// widened to F first. With constant scales that do not vary along the contracted axis, the scales
// come out of the sum:
//   dot(qa * sa, qb * sb[n]) = dot(qa, qb) * (sa * sb[n])
// and the product runs on the quantized operands: int8 x int8 summed exactly in int32, float8 x
// float8 in float32 (flat::Op kDot with the accumulator result, rt::dot_accumulator_dtype), then
// one rescale (convert, multiply by the folded constant, convert to F) that fusion runs as one
// kernel. Matched: a per-tensor scale on the lhs (the activation); on the rhs (the weight) a
// per-tensor scale or one per output column (tp.Linear's weight_quant_dim = 0 through its
// transpose, or dim = 1 of a [K, N] weight). Not matched (the dequantize + GEMM stays): scales
// that are not constants, scales along the contracted axis or along the lhs rows, weight-only
// quantization (a float activation times a dequantized weight: cuBLASLt has no mixed kernel), and
// where the rules say so an int8 dot of few rows with a constant weight (weight_only_dot then reads
// that weight as it is, the activation's quantize and dequantize one elementwise kernel).
#include <cmath>
#include <cstring>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

// `v` = mul(convert(q), broadcast(constant)) in either operand order: q, and the scale as one
// value (per tensor) or one per index of `axis` of v.
struct Dequantized {
  ValueId q = -1;
  std::vector<double> scale;
  int64_t axis = -1;  // -1: per tensor
};

std::optional<Dequantized> dequantized(const Graph& g, ValueId v) {
  const Op& mul = g.def(v);
  if (mul.kind != OpKind::kElementwise || mul.fn != EwOp::kMul || mul.operands.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Op& cv = g.def(mul.operands[side]);
    const Op& bc = g.def(mul.operands[1 - side]);
    if (cv.kind != OpKind::kElementwise || cv.fn != EwOp::kConvert || bc.kind != OpKind::kBroadcast) continue;
    const DType qt = g.values[cv.operands[0]].dtype;
    if (qt != DType::kInt8 && qt != DType::kFloat8E4M3) continue;
    const Op& c = g.def(bc.operands[0]);
    if (c.kind != OpKind::kConstant || !c.constant.defined()) return std::nullopt;
    Dequantized d;
    d.q = cv.operands[0];
    const std::vector<int64_t>& cs = c.constant.shape();
    for (size_t j = 0; j < cs.size(); ++j) {
      if (cs[j] == 1) continue;
      if (d.axis >= 0) return std::nullopt;  // varies along two axes: not a per-channel scale
      d.axis = bc.dims[j];
    }
    StatusOr<Tensor> scales = copy_to(c.constant, Device{});
    if (!scales.ok()) return std::nullopt;
    for (int64_t i = 0; i < scales.value().numel(); ++i) {
      d.scale.push_back(read_element(scales.value(), i));
      if (!std::isfinite(d.scale.back())) return std::nullopt;
    }
    if (d.scale.empty()) return std::nullopt;
    return d;
  }
  return std::nullopt;
}

bool static_multiple(const Dim& d, int64_t m) { return d.is_static() && d.static_value() % m == 0; }

// One matched dot: the quantized operands, how the weight is read, and the folded scale.
struct Match {
  ValueId qa = -1, qb = -1;
  bool rhs_transposed = false;  // qb is stored [.., N, K] and read through a transpose
  bool transpose_constant = false;  // qb is a [K, N] constant to store as [N, K] (the GPU's layout)
  Tensor qb_host;                   // with transpose_constant: qb's elements in host memory
  std::vector<double> scale;        // 1 value, or N (per output column)
};

std::optional<Match> match(const Graph& g, const Op& dot, const QuantizedDotRules& rules) {
  Match m;
  const std::optional<Dequantized> a = dequantized(g, dot.operands[0]);
  if (!a || a->axis >= 0) return std::nullopt;  // the activation's scale: per tensor only
  ValueId b_value = dot.operands[1];
  const Op& bdef = g.def(b_value);
  if (swaps_last_two_dims(bdef)) {
    m.rhs_transposed = true;
    b_value = bdef.operands[0];
  }
  const std::optional<Dequantized> b = dequantized(g, b_value);
  if (!b) return std::nullopt;
  const DType qt = g.values[a->q].dtype;
  if (g.values[b->q].dtype != qt) return std::nullopt;
  if (qt == DType::kInt8 ? !rules.int8 : !rules.float8) return std::nullopt;
  if (qt == DType::kInt8 && rules.int8_weight_only_rows != 0 && g.def(b->q).kind == OpKind::kConstant &&
      (rules.int8_weight_only_rows < 0 || most_rows(g, dot.operands[0]) <= rules.int8_weight_only_rows))
    return std::nullopt;  // weight_only_dot's
  // The weight's scale may vary along its output columns only (N: the last dim of [.., K, N], the
  // one before it of a transposed [.., N, K]); along K it cannot leave the sum.
  const int64_t rank_b = static_cast<int64_t>(g.values[b_value].shape.size());
  if (b->axis >= 0 && b->axis != (m.rhs_transposed ? rank_b - 2 : rank_b - 1)) return std::nullopt;
  m.qa = a->q;
  m.qb = b->q;
  for (double sb : b->scale) m.scale.push_back(a->scale[0] * sb);
  if (rules.weight_nk) {
    // cuBLASLt's int8 and float8 kernels: "TN" (the weight [N, K], the activation [M, K] as
    // stored), K and N aligned. A constant [K, N] weight is stored transposed by this pass.
    const Shape& sa = g.values[m.qa].shape;
    const Shape& so = g.values[dot.result].shape;
    const int64_t multiple = qt == DType::kInt8 ? rules.int8_multiple : rules.float8_multiple;
    if (g.def(m.qa).kind == OpKind::kTranspose || !static_multiple(sa.back(), multiple) ||
        !static_multiple(so.back(), multiple))
      return std::nullopt;
    if (!m.rhs_transposed) {
      if (g.def(m.qb).kind != OpKind::kConstant || rank_b != 2) return std::nullopt;
      StatusOr<Tensor> host = copy_to(g.def(m.qb).constant, Device{});
      if (!host.ok()) return std::nullopt;
      m.transpose_constant = true;
      m.qb_host = std::move(host.value());
    }
  }
  return m;
}

// `t` [K, N] stored as [N, K].
Tensor transposed_2d(const Tensor& t) {
  const int64_t k = t.shape()[0], n = t.shape()[1];
  const int64_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty_host(t.dtype(), {n, k});
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) std::memcpy(dst + (j * k + i) * es, src + (i * n + j) * es, static_cast<size_t>(es));
  return out;
}

}  // namespace

bool converts_low_precision(const Graph& graph) {
  for (const Op& op : graph.ops) {
    if (op.kind != OpKind::kElementwise || op.fn != EwOp::kConvert || op.operands.empty()) continue;
    const DType t = graph.values[op.operands[0]].dtype;
    if (t == DType::kInt8 || t == DType::kFloat8E4M3) return true;
  }
  return false;
}

std::optional<Graph> quantized_dot(const Graph& graph, const QuantizedDotRules& rules) {
  std::vector<std::optional<Match>> matches(graph.ops.size());
  bool any = false;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (graph.ops[i].kind == OpKind::kDot) {
      matches[i] = match(graph, graph.ops[i], rules);
      any = any || matches[i].has_value();
    }
  if (!any) return std::nullopt;

  return dce(rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    if (!matches[i]) return false;
    const Op& src = graph.ops[i];
    const Value& val = graph.values[src.result];
    const Match& m = *matches[i];
    const DType qt = graph.values[m.qa].dtype, acc_t = rt::dot_accumulator_dtype(qt);
    const OriginRef why = with_reason(src.origin, std::string("the ") + (qt == DType::kInt8 ? "int8" : "float8") +
                                                      " GEMM that replaced dequantize -> dot, and its rescale");
    auto add = [&](Op op, DType t, const Shape& s) {
      op.origin = why;
      return rw.add(std::move(op), t, s);
    };
    ValueId rhs = rw[m.qb];
    const Shape& qbs = graph.values[m.qb].shape;
    if (m.transpose_constant) {
      Op c;
      c.kind = OpKind::kConstant;
      c.constant = transposed_2d(m.qb_host);
      rhs = add(std::move(c), qt, Shape{qbs[1], qbs[0]});
    }
    if (m.rhs_transposed || m.transpose_constant) {
      Op t;
      t.kind = OpKind::kTranspose;
      const Shape& stored = rw.out().values[rhs].shape;
      Shape ts = stored;
      for (size_t d = 0; d < stored.size(); ++d) t.dims.push_back(static_cast<int64_t>(d));
      std::swap(t.dims[stored.size() - 1], t.dims[stored.size() - 2]);
      std::swap(ts[stored.size() - 1], ts[stored.size() - 2]);
      t.operands = {rhs};
      rhs = add(std::move(t), qt, ts);
    }
    Op dot = src;
    dot.operands = {rw[m.qa], rhs};
    ValueId cur = add(std::move(dot), acc_t, val.shape);
    if (acc_t != DType::kFloat32) {
      Op cv;
      cv.kind = OpKind::kElementwise;
      cv.fn = EwOp::kConvert;
      cv.operands = {cur};
      cur = add(std::move(cv), DType::kFloat32, val.shape);
    }
    // sa * sb[n] in float32, broadcast along the output's columns (or everywhere).
    Op c;
    c.kind = OpKind::kConstant;
    const int64_t n = static_cast<int64_t>(m.scale.size());
    c.constant = Tensor::empty_host(DType::kFloat32, n == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{n});
    for (int64_t j = 0; j < n; ++j) write_element(c.constant, j, m.scale[static_cast<size_t>(j)]);
    const ValueId cs = add(std::move(c), DType::kFloat32, n == 1 ? Shape{} : Shape{Dim(n)});
    Op bc;
    bc.kind = OpKind::kBroadcast;
    if (n != 1) bc.dims = {static_cast<int64_t>(val.shape.size()) - 1};
    bc.operands = {cs};
    const ValueId cb = add(std::move(bc), DType::kFloat32, val.shape);
    Op mul;
    mul.kind = OpKind::kElementwise;
    mul.fn = EwOp::kMul;
    mul.operands = {cur, cb};
    cur = add(std::move(mul), DType::kFloat32, val.shape);
    if (val.dtype != DType::kFloat32) {
      Op cv;
      cv.kind = OpKind::kElementwise;
      cv.fn = EwOp::kConvert;
      cv.operands = {cur};
      cur = add(std::move(cv), val.dtype, val.shape);
    }
    rw.set(src.result, cur);
    return true;
  }));
}

}  // namespace tripy::flat

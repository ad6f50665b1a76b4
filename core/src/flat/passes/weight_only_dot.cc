// Weight-only quantized matrix products. tp.dequantize of a constant int8 or int4 weight lowers to
//   mul(convert(q -> F), scale)   or, with zero points,   mul(sub(convert(q -> F), zero), scale)
// where scale and zero are broadcasts (and reshapes) of constants. A float activation times such a
// weight, x @ W.T of a tp.Linear or x @ W of a [K, N] weight, becomes one weight_only_dot kernel
// (rt::WeightOnlyDotAttrs) reading the weight packed: stored [N, K] as int8, or two int4 values a
// byte, with the scales and zero points gathered per output row and group of K. The dequantized
// weight then exists only in registers, and a decode step reads a quarter (int4) or half (int8) of
// the float16 weight's bytes. Matched where the scale and zero point are constant over groups of
// K (per tensor, per output channel, block-wise along K; per element along K is a group of 1) and
// the rows of x stay within the device's limit (PassRules: the GPU's kernel is for decode sizes,
// where a larger GEMM keeps cuBLASLt on tensor cores).
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

bool swaps_last_two(const Op& t) {
  return t.kind == OpKind::kTranspose && t.dims.size() == 2 && t.dims[0] == 1 && t.dims[1] == 0;
}

// A constant's host copy (nullopt where it cannot be read).
std::optional<Tensor> host_constant(const Op& c) {
  if (c.kind != OpKind::kConstant || !c.constant.defined()) return std::nullopt;
  if (on_host(c.constant)) return c.constant;
  StatusOr<Tensor> host = copy_to(c.constant, Device{});
  if (!host.ok()) return std::nullopt;
  return host.value();
}

// A per-group parameter (scale or zero point) of a weight read as [N, K]: `at(n, k)` is the
// constant index that element uses, and `group` the K values a group spans (divides K).
struct GroupParam {
  Tensor constant;  // host
  std::function<int64_t(int64_t n, int64_t k)> at;
  int64_t group = 1;
  double value(int64_t n, int64_t k) const { return read_element(constant, at(n, k)); }
};

// Row-major strides of `shape`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// `v` (of the weight's static 2-D shape) as a broadcast of a constant, optionally reshaped from a
// rank-3 broadcast that splits one of its axes (tp.dequantize's block-wise scales), or a constant
// of the weight's shape. `nk`: the weight is stored [N, K] (else [K, N]).
std::optional<GroupParam> group_param(const Graph& g, ValueId v, bool nk, int64_t N, int64_t K) {
  const std::vector<int64_t> shape = static_dims(g.values[v].shape);
  auto weight_index = [nk](int64_t n, int64_t k) { return nk ? std::array<int64_t, 2>{n, k} : std::array<int64_t, 2>{k, n}; };
  const Op* op = &g.def(v);
  GroupParam p;
  if (op->kind == OpKind::kConstant) {
    std::optional<Tensor> c = host_constant(*op);
    if (!c || c->shape() != shape) return std::nullopt;
    p.constant = *c;
    p.at = [weight_index, cols = shape[1]](int64_t n, int64_t k) {
      const auto i = weight_index(n, k);
      return i[0] * cols + i[1];
    };
    // The group: where values change along K, in every row (a small constant: folded).
    int64_t group = K;
    for (int64_t n = 0; n < N && group > 1; ++n)
      for (int64_t k = 1; k < K; ++k)
        if (p.value(n, k) != p.value(n, k - 1)) group = std::gcd(group, k);
    p.group = group;
    return p;
  }
  // Reshape [a, b, c] -> [a, b * c] (split = 1: axis 1 holds b groups of c) or [a * b, c] (split =
  // 0: axis 0 holds a groups of b); the weight index maps to the broadcast's rank-3 index.
  int split = -1;
  std::vector<int64_t> b3;
  if (op->kind == OpKind::kReshape) {
    const Op& bc = g.def(op->operands[0]);
    if (bc.kind != OpKind::kBroadcast || !is_static(g.values[bc.result].shape)) return std::nullopt;
    b3 = static_dims(g.values[bc.result].shape);
    if (b3.size() != 3) return std::nullopt;
    if (b3[0] == shape[0] && b3[1] * b3[2] == shape[1]) split = 1;
    else if (b3[0] * b3[1] == shape[0] && b3[2] == shape[1]) split = 0;
    else return std::nullopt;
    op = &bc;
  }
  if (op->kind != OpKind::kBroadcast) return std::nullopt;
  std::optional<Tensor> c = host_constant(g.def(op->operands[0]));
  if (!c) return std::nullopt;
  p.constant = *c;
  const std::vector<int64_t> cs = c->shape(), cstride = strides_of(cs), dims = op->dims;
  if (dims.size() != cs.size()) return std::nullopt;
  // The broadcast's index (rank 2 or 3) -> the constant's.
  auto from_broadcast = [cs, cstride, dims](const int64_t* idx) {
    int64_t i = 0;
    for (size_t j = 0; j < cs.size(); ++j)
      if (cs[j] != 1) i += idx[dims[j]] * cstride[j];
    return i;
  };
  p.at = [=](int64_t n, int64_t k) {
    const auto w = weight_index(n, k);
    if (split < 0) return from_broadcast(w.data());
    const std::array<int64_t, 3> i3 = split == 1 ? std::array<int64_t, 3>{w[0], w[1] / b3[2], w[1] % b3[2]}
                                           : std::array<int64_t, 3>{w[0] / b3[1], w[0] % b3[1], w[1]};
    return from_broadcast(i3.data());
  };
  // These maps treat K the same in every row: the group is where row 0's index changes.
  int64_t group = K;
  for (int64_t k = 1; k < K && group > 1; ++k)
    if (p.at(0, k) != p.at(0, k - 1)) group = std::gcd(group, k);
  p.group = group;
  return p;
}

// Groups smaller than this (a scale per few values along K) would make the scales as large as the
// packed weight: such dots keep dequantize and the GEMM.
constexpr int64_t kMinGroup = 8;

struct Match {
  ValueId x = -1;
  Tensor q;  // host, [N, K] or [K, N]
  bool nk = true;
  int64_t N = 0, K = 0, group = 1;
  std::optional<GroupParam> scale, zero;
};

std::optional<Match> match(const Graph& g, const Op& dot, int64_t max_rows) {
  const Value& out = g.values[dot.result];
  const ValueId x = dot.operands[0];
  if (!is_float(out.dtype) || g.values[x].dtype != out.dtype || g.values[x].shape.size() < 2) return std::nullopt;
  if (g.def(x).kind == OpKind::kTranspose) return std::nullopt;  // x's rows must be dense
  if (max_rows >= 0) {
    int64_t rows = 1;
    const Shape& xs = g.values[x].shape;
    for (size_t d = 0; d + 1 < xs.size(); ++d) rows *= std::max<int64_t>(1, xs[d].upper_bound(g.symbols));
    if (rows > max_rows) return std::nullopt;
  }
  Match m;
  m.x = x;
  ValueId w = dot.operands[1];
  m.nk = swaps_last_two(g.def(w));
  if (m.nk) w = g.def(w).operands[0];
  const Op& mul = g.def(w);
  if (g.values[w].shape.size() != 2 || !is_static(g.values[w].shape)) return std::nullopt;
  if (mul.kind != OpKind::kElementwise || mul.fn != EwOp::kMul || mul.operands.size() != 2) return std::nullopt;
  const std::vector<int64_t> ws = static_dims(g.values[w].shape);
  m.N = m.nk ? ws[0] : ws[1];
  m.K = m.nk ? ws[1] : ws[0];
  if (m.N == 0 || m.K == 0) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    ValueId wide = mul.operands[side];
    ValueId zero = -1;
    const Op* d = &g.def(wide);
    if (d->kind == OpKind::kElementwise && d->fn == EwOp::kSub) {
      zero = d->operands[1];
      d = &g.def(d->operands[0]);
    }
    if (d->kind != OpKind::kElementwise || d->fn != EwOp::kConvert) continue;
    const Op& qc = g.def(d->operands[0]);
    const DType qt = g.values[qc.result].dtype;
    if (qt != DType::kInt8 && qt != DType::kInt4) continue;
    std::optional<Tensor> q = host_constant(qc);
    if (!q) return std::nullopt;
    m.q = *q;
    m.scale = group_param(g, mul.operands[1 - side], m.nk, m.N, m.K);
    if (!m.scale) return std::nullopt;
    m.group = m.scale->group;
    if (zero >= 0) {
      m.zero = group_param(g, zero, m.nk, m.N, m.K);
      if (!m.zero) return std::nullopt;
      m.group = std::gcd(m.group, m.zero->group);
    }
    if (m.group < kMinGroup && m.group != m.K) return std::nullopt;
    return m;
  }
  return std::nullopt;
}

OriginRef with_reason(const OriginRef& origin, const std::string& reason) {
  auto o = std::make_shared<Origin>(origin ? *origin : Origin{});
  o->reason = reason;
  return o;
}

// The weight [N, row bytes]: int8 as it is (transposed from [K, N]), int4 two values a byte.
Tensor packed_weight(const Match& m, int bits) {
  const int64_t row_bytes = rt::weight_only_row_bytes(bits, m.K);
  Tensor out = Tensor::empty_host(DType::kInt8, {m.N, row_bytes});
  auto* dst = static_cast<uint8_t*>(out.data());
  const auto* src = static_cast<const int8_t*>(m.q.data());
  std::memset(dst, 0, static_cast<size_t>(m.N * row_bytes));
  for (int64_t n = 0; n < m.N; ++n)
    for (int64_t k = 0; k < m.K; ++k) {
      const int8_t v = src[m.nk ? n * m.K + k : k * m.N + n];
      if (bits == 8) {
        dst[n * row_bytes + k] = static_cast<uint8_t>(v);
      } else {
        dst[n * row_bytes + k / 2] |= static_cast<uint8_t>(((v + 8) & 15) << (4 * (k & 1)));
      }
    }
  return out;
}

// A group parameter as [N, groups] in `dtype`.
Tensor per_group(const GroupParam& p, const Match& m, DType dtype) {
  const int64_t groups = m.K / m.group;
  Tensor out = Tensor::empty_host(dtype, {m.N, groups});
  for (int64_t n = 0; n < m.N; ++n)
    for (int64_t j = 0; j < groups; ++j) write_element(out, n * groups + j, p.value(n, j * m.group));
  return out;
}

}  // namespace

std::optional<Graph> weight_only_dot(const Graph& graph, int64_t max_rows) {
  std::vector<std::optional<Match>> matches(graph.ops.size());
  bool any = false;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (graph.ops[i].kind == OpKind::kDot) {
      matches[i] = match(graph, graph.ops[i], max_rows);
      any = any || matches[i].has_value();
    }
  if (!any) return std::nullopt;

  Graph out = empty_like(graph);
  std::vector<ValueId> map(graph.values.size(), -1);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& src = graph.ops[i];
    const Value& val = graph.values[src.result];
    if (!matches[i]) {
      Op op = src;
      for (ValueId& v : op.operands) v = map[v];
      map[src.result] = out.add(std::move(op), val.dtype, val.shape);
      continue;
    }
    const Match& m = *matches[i];
    const int bits = m.q.dtype() == DType::kInt4 ? 4 : 8;
    const OriginRef why = with_reason(src.origin, "the weight-only int" + std::to_string(bits) +
                                                      " product that replaced dequantize -> dot");
    auto constant = [&](Tensor t) {
      Op c;
      c.kind = OpKind::kConstant;
      c.origin = why;
      const DType dt = t.dtype();
      Shape s;
      for (int64_t d : t.shape()) s.push_back(Dim(d));
      c.constant = std::move(t);
      return out.add(std::move(c), dt, s);
    };
    Op k;
    k.kind = OpKind::kKernel;
    k.origin = why;
    k.kernel.kind = rt::KernelKind::kWeightOnlyDot;
    k.kernel.weight_only_dot.bits = bits;
    k.kernel.weight_only_dot.group_size = m.group;
    k.kernel.weight_only_dot.has_zero = m.zero.has_value();
    k.operands = {map[m.x], constant(packed_weight(m, bits)), constant(per_group(*m.scale, m, val.dtype))};
    if (m.zero) k.operands.push_back(constant(per_group(*m.zero, m, val.dtype)));
    map[src.result] = out.add(std::move(k), val.dtype, val.shape);
  }
  finish_like(out, graph, map);
  return dce(out);
}

}  // namespace tripy::flat

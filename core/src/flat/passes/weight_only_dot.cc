// Weight-only quantized matrix products. tp.dequantize of a constant int8, int4 or float8 weight
// lowers to
//   mul(convert(q -> F), scale)   or, with zero points,   mul(sub(convert(q -> F), zero), scale)
// where scale and zero are broadcasts (and reshapes) of constants, and q is an int8, int4 or
// float8 e4m3 constant or unpack_int4's view of packed int4 bytes (trace/ops_quantize.cc). A float
// activation times such a weight, x @ W.T of a tp.Linear or x @ W of a [K, N] weight, becomes one
// weight_only_dot kernel (rt::WeightOnlyDotAttrs) reading the weight packed: stored [N, K] as
// int8 or float8, or two int4 values a byte, with the scales and zero points gathered per output
// row and group of K. The dequantized weight then exists only in registers, and a decode step reads
// a quarter (int4) or half (int8, float8) of the float16 weight's bytes. Constants that already
// have the kernel's layout (an int8 or float8 [N, K] weight, packed int4 bytes [N, ceil(K / 2)], scales [N, groups]
// of the activation's dtype) are its operands as they are, never read or copied: a model's
// weights, on the GPU or the host, are then held once however many executables read them (a
// generator's prefill and decode steps). Matched where the scale and zero point are constant over
// groups of K (per tensor, per output channel, block-wise along K; per element along K is a group
// of 1) and the rows of x stay within the backend's limit (PassRules; none on the CPU and the GPU,
// whose kernels dequantize tiles of the weight, or all of it into scratch, for many rows). A dot
// with more rows keeps the dequantization, computed by groups of K (see Blocked) so that fusion
// makes it one kernel.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <utility>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

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
  Tensor source;  // the constant as the graph holds it (possibly on a device)
  Tensor constant;  // its host copy, read where values are needed
  std::function<int64_t(int64_t n, int64_t k)> at;
  int64_t group = 1;
  bool reshaped = false;  // given to the weight through a reshape that splits an axis into groups
  // Whether at(n, j * group) is affine in (n, j) for a group that is a multiple of `k_block`: a
  // constant or a broadcast of one, or through a reshape that splits K into blocks of k_block
  // values (not one that splits N: its divisions are not affine in n).
  bool affine = true;
  int64_t k_block = 1;
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
    p.source = op->constant;
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
    // The weight's axis 1 is K where it is stored [N, K] (nk), its axis 0 where [K, N].
    p.affine = (split == 1) == nk;
    p.k_block = split == 1 ? b3[2] : b3[1];
    op = &bc;
    p.reshaped = true;
  }
  if (op->kind != OpKind::kBroadcast) return std::nullopt;
  const Op& source = g.def(op->operands[0]);
  if (source.kind != OpKind::kConstant || !source.constant.defined()) return std::nullopt;
  p.source = source.constant;  // read (copied to the host) only where per_group needs its values
  const std::vector<int64_t> cs = p.source.shape(), cstride = strides_of(cs), dims = op->dims;
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

// Whether `v` is a host constant of one element equal to `want`, or a broadcast of one.
bool splat_int(const Graph& g, ValueId v, double want) { return splat_value(g, v) == want; }

// A window [starts, limits) of unpack_int4's view [..., K] of constant bytes: the whole view, the
// [..., :K] slice of an odd K, or a tensor-parallel rank's share (rows of a column-parallel weight,
// an even-aligned range of K of a row-parallel one).
struct UnpackedInt4 {
  const Op* bytes = nullptr;  // the constant op holding the bytes
  std::vector<int64_t> starts, limits;  // on the unpacked view; empty: all of it
};

// unpack_int4's lowering (trace/ops_quantize.cc) over constant bytes P [..., ceil(K / 2)], after
// simplify and CSE:
//   convert<int4>(add(floordiv(broadcast(convert<int32>(P)), broadcast([1, 16])), 8)) -> reshape
//   -> a slice with unit steps and static bounds, starting on a whole byte along the last dim
// The bytes and the window, or nullopt where `v` is not that form.
std::optional<UnpackedInt4> unpacked_int4(const Graph& g, ValueId v) {
  UnpackedInt4 out;
  const Op* op = &g.def(v);
  if (op->kind == OpKind::kSlice) {
    const Shape& in = g.values[op->operands[0]].shape;
    for (size_t d = 0; d < in.size(); ++d) {
      const bool unit = op->steps[d].is_static() && op->steps[d].static_value() == 1;
      if (!unit || !op->starts[d].is_static() || !op->limits[d].is_static() || !in[d].is_static()) return std::nullopt;
      out.starts.push_back(op->starts[d].static_value());
      out.limits.push_back(op->limits[d].static_value());
    }
    if (out.starts.back() % 2 != 0) return std::nullopt;  // no value pairs split across bytes
    op = &g.def(op->operands[0]);
  }
  if (op->kind != OpKind::kReshape) return std::nullopt;
  const Op& narrow = g.def(op->operands[0]);
  if (narrow.kind != OpKind::kElementwise || narrow.fn != EwOp::kConvert || g.values[narrow.result].dtype != DType::kInt4)
    return std::nullopt;
  const Op& add = g.def(narrow.operands[0]);
  if (add.kind != OpKind::kElementwise || add.fn != EwOp::kAdd || add.operands.size() != 2) return std::nullopt;
  const int eight = splat_int(g, add.operands[1], 8) ? 1 : splat_int(g, add.operands[0], 8) ? 0 : -1;
  if (eight < 0) return std::nullopt;
  const Op& div = g.def(add.operands[1 - eight]);
  if (div.kind != OpKind::kElementwise || div.fn != EwOp::kFloorDiv || g.values[div.result].dtype != DType::kInt32)
    return std::nullopt;
  const Shape& pairs = g.values[div.result].shape;
  const size_t rank = pairs.size();
  if (rank < 2 || !pairs.back().is_static() || pairs.back().static_value() != 2) return std::nullopt;
  // The divisors: 1 for the low nibble, 16 for the high one, along the last dim.
  const Op& dv = g.def(div.operands[1]);
  if (dv.kind != OpKind::kBroadcast || dv.dims != std::vector<int64_t>{static_cast<int64_t>(rank - 1)}) return std::nullopt;
  const Op& divisors = g.def(dv.operands[0]);
  if (divisors.kind != OpKind::kConstant || !divisors.constant.defined() || !on_host(divisors.constant) ||
      divisors.constant.numel() != 2 || read_element(divisors.constant, 0) != 1 ||
      read_element(divisors.constant, 1) != 16)
    return std::nullopt;
  // The bytes, each spread over the new last dim.
  const Op& spread = g.def(div.operands[0]);
  if (spread.kind != OpKind::kBroadcast || spread.dims.size() != rank - 1) return std::nullopt;
  for (size_t d = 0; d + 1 < rank; ++d)
    if (spread.dims[d] != static_cast<int64_t>(d)) return std::nullopt;
  const Op& widen = g.def(spread.operands[0]);
  if (widen.kind != OpKind::kElementwise || widen.fn != EwOp::kConvert || g.values[widen.result].dtype != DType::kInt32)
    return std::nullopt;
  const Op& bytes = g.def(widen.operands[0]);
  if (bytes.kind != OpKind::kConstant || !bytes.constant.defined() || bytes.constant.dtype() != DType::kInt8)
    return std::nullopt;
  out.bytes = &bytes;
  return out;
}

// The bytes of `u`'s window: the constant itself for the whole view, a view of it (no copy) for a
// window of whole rows of a 2-D weight, else a copy on the host; nullopt where it cannot be read.
std::optional<Tensor> window_bytes(const UnpackedInt4& u) {
  const Tensor& c = u.bytes->constant;
  const std::vector<int64_t>& shape = c.shape();
  if (u.starts.empty()) return c;
  const size_t rank = shape.size();
  if (u.starts.size() != rank) return std::nullopt;
  std::vector<int64_t> from(rank), to(rank);  // the window in bytes
  for (size_t d = 0; d < rank; ++d) {
    from[d] = d + 1 < rank ? u.starts[d] : u.starts[d] / 2;
    to[d] = d + 1 < rank ? u.limits[d] : std::min(shape[d], (u.limits[d] + 1) / 2);
    if (from[d] < 0 || to[d] < from[d] || to[d] > shape[d]) return std::nullopt;
  }
  std::vector<int64_t> out_shape(rank);
  for (size_t d = 0; d < rank; ++d) out_shape[d] = to[d] - from[d];
  bool whole = true;  // the window is the whole constant
  for (size_t d = 0; d < rank; ++d) whole = whole && from[d] == 0 && to[d] == shape[d];
  if (whole) return c;
  bool rows_only = rank == 2 && from[1] == 0 && to[1] == shape[1];
  if (rows_only) {
    auto* base = static_cast<uint8_t*>(c.data()) + from[0] * shape[1];
    return Tensor::borrow(base, c.dtype(), out_shape, c.device(), c.owner());
  }
  std::optional<Tensor> host = host_constant(*u.bytes);
  if (!host) return std::nullopt;
  Tensor out = Tensor::empty_host(DType::kInt8, out_shape);
  const int64_t rows = numel_of(out_shape) / std::max<int64_t>(1, out_shape.back());
  const auto* src = static_cast<const uint8_t*>(host->data());
  auto* dst = static_cast<uint8_t*>(out.data());
  const std::vector<int64_t> strides = strides_of(shape);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = from.back(), rest = r;  // row r of the window: its index in each leading dim
    for (size_t d = rank - 1; d-- > 0;) {
      offset += (from[d] + rest % out_shape[d]) * strides[d];
      rest /= out_shape[d];
    }
    std::memcpy(dst + r * out_shape.back(), src + offset, static_cast<size_t>(out_shape.back()));
  }
  return out;
}

// Int4 values held two a byte along the last dim (unpack_int4's layout), as one int8 per value:
// a host tensor of `shape` (the unpacked shape).
Tensor unpacked_on_host(const Tensor& bytes, const std::vector<int64_t>& shape) {
  Tensor out = Tensor::empty_host(DType::kInt8, shape);
  const int64_t K = shape.back(), row_bytes = bytes.shape().back(), rows = K == 0 ? 0 : out.numel() / K;
  const auto* src = static_cast<const uint8_t*>(bytes.data());
  auto* dst = static_cast<int8_t*>(out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k)
      dst[r * K + k] = static_cast<int8_t>(((src[r * row_bytes + k / 2] >> (4 * (k & 1))) & 15) - 8);
  return out;
}

struct Match {
  ValueId x = -1;
  ValueId weight = -1;    // the dequantized weight: the mul's result
  bool rows_fit = true;   // x's rows within the kernel's limit
  const Op* q = nullptr;  // the weight's constant: int8 or int4 values, or (packed) int4 bytes
  Tensor q_values;        // q's data that the weight reads: all of it, or (packed) a window's bytes
  bool packed = false;    // q holds unpack_int4's bytes
  int bits = 8;
  bool float8 = false;    // q holds float8 e4m3 values (8 bits), not integers
  bool nk = true;
  int64_t N = 0, K = 0, group = 1;
  std::optional<GroupParam> scale, zero;
};

std::optional<Match> match(const Graph& g, const Op& dot, int64_t max_rows) {
  const Value& out = g.values[dot.result];
  const ValueId x = dot.operands[0];
  if (!is_float(out.dtype) || g.values[x].dtype != out.dtype || g.values[x].shape.size() < 2) return std::nullopt;
  Match m;
  m.x = x;
  m.rows_fit = g.def(x).kind != OpKind::kTranspose;  // x's rows must be dense
  if (max_rows >= 0) m.rows_fit = m.rows_fit && most_rows(g, x) <= max_rows;
  ValueId w = dot.operands[1];
  m.nk = swaps_last_two_dims(g.def(w));
  if (m.nk) w = g.def(w).operands[0];
  const Op& mul = g.def(w);
  if (g.values[w].shape.size() != 2 || !is_static(g.values[w].shape)) return std::nullopt;
  if (mul.kind != OpKind::kElementwise || mul.fn != EwOp::kMul || mul.operands.size() != 2) return std::nullopt;
  m.weight = w;
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
    if (qt != DType::kInt8 && qt != DType::kInt4 && qt != DType::kFloat8E4M3) continue;
    std::optional<UnpackedInt4> unpacked;
    if (qc.kind == OpKind::kConstant) {
      if (!qc.constant.defined()) return std::nullopt;
      m.q = &qc;
      m.q_values = qc.constant;
    } else if (qt == DType::kInt4 && (unpacked = unpacked_int4(g, qc.result))) {
      std::optional<Tensor> bytes = window_bytes(*unpacked);
      if (!bytes) return std::nullopt;
      m.q = unpacked->bytes;
      m.q_values = *bytes;
      m.packed = true;
    } else {
      return std::nullopt;
    }
    m.bits = qt == DType::kInt4 ? 4 : 8;
    m.float8 = qt == DType::kFloat8E4M3;
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

// The weight [N, row bytes]: the constant itself where it has that layout (int8 or float8 [N, K],
// or unpack_int4's bytes of an [N, K] weight); else int8 or float8 as it is (transposed from
// [K, N]), int4 two values a byte, made on the host.
StatusOr<Tensor> packed_weight(const Match& m) {
  const int bits = m.bits;
  const int64_t row_bytes = rt::weight_only_row_bytes(bits, m.K);
  const Tensor& c = m.q_values;
  const std::vector<int64_t> kernel_layout{m.N, row_bytes};
  const DType stored = m.float8 ? DType::kFloat8E4M3 : DType::kInt8;
  if (m.nk && c.dtype() == stored && c.shape() == kernel_layout && (bits == 8 || m.packed)) return c;
  std::optional<Tensor> host = on_host(c) ? std::optional<Tensor>(c) : std::nullopt;
  if (!host) {
    StatusOr<Tensor> copied = copy_to(c, Device{});
    if (copied.ok()) host = copied.value();
  }
  if (!host) return internal_error("weight_only_dot: the weight's constant cannot be read on the host");
  const Tensor q = m.packed ? unpacked_on_host(*host, m.nk ? std::vector<int64_t>{m.N, m.K} : std::vector<int64_t>{m.K, m.N})
                            : *host;
  Tensor out = Tensor::empty_host(stored, kernel_layout);
  auto* dst = static_cast<uint8_t*>(out.data());
  const auto* src = static_cast<const int8_t*>(q.data());
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

// A group parameter as [N, groups] in `dtype` (`groups_first`: [groups, N]): the constant itself
// (or a view of it in that shape) where it holds exactly those values in that order, else gathered
// on the host.
StatusOr<Tensor> per_group(GroupParam& p, const Match& m, DType dtype, bool groups_first = false) {
  const int64_t groups = m.K / m.group;
  const std::vector<int64_t> shape =
      groups_first ? std::vector<int64_t>{groups, m.N} : std::vector<int64_t>{m.N, groups};
  auto index = [&](int64_t n, int64_t j) { return groups_first ? j * m.N + n : n * groups + j; };
  bool in_order = p.source.dtype() == dtype && p.source.numel() == m.N * groups;
  if (in_order && p.affine && m.group % p.k_block == 0) {
    // Affine maps agree everywhere where they agree at (0, 0), (1, 0) and (0, 1): three reads
    // instead of one for each of a model's tens of millions of scales.
    const int64_t base = p.at(0, 0);
    in_order = base == index(0, 0) && (m.N < 2 || p.at(1, 0) - base == index(1, 0)) &&
               (groups < 2 || p.at(0, m.group) - base == index(0, 1));
  } else {
    for (int64_t n = 0; n < m.N && in_order; ++n)
      for (int64_t j = 0; j < groups && in_order; ++j) in_order = p.at(n, j * m.group) == index(n, j);
  }
  if (in_order) {
    if (p.source.shape() == shape) return p.source;
    return Tensor::borrow(p.source.data(), dtype, shape, p.source.device(), p.source.owner());
  }
  if (!p.constant.defined()) {
    StatusOr<Tensor> host = on_host(p.source) ? StatusOr<Tensor>(p.source) : copy_to(p.source, Device{});
    if (!host.ok()) return host.status();
    p.constant = host.value();
  }
  Tensor out = Tensor::empty_host(dtype, shape);
  for (int64_t n = 0; n < m.N; ++n)
    for (int64_t j = 0; j < groups; ++j) write_element(out, index(n, j), p.value(n, j * m.group));
  return out;
}

// `t`'s bytes viewed as `shape` (a reshape of a dense tensor: no copy).
Tensor viewed_as(const Tensor& t, std::vector<int64_t> shape) {
  return Tensor::borrow(t.data(), t.dtype(), std::move(shape), t.device(), t.owner());
}

// A dequantized weight that no weight_only_dot reads (x has more rows than the device's kernel
// takes), computed by groups of K: the weight's K axis split into [groups, group] (and, for int4
// bytes, the last axis into [bytes, 2]), so that the scales and zero points [N, groups] are
// broadcasts along trailing axes and the bytes a load per element. Fusion plans that as one
// kernel writing the float weight, whose reshape to 2-D is free; as tp.dequantize lowers it, the
// reshapes of broadcast scales and of the unpacked nibbles would each materialise a temporary as
// large as the weight (a fused kernel loads through strides, never through a reshape that merges
// axes).
struct Blocked {
  Tensor q, scale, zero;          // the weight's constant and the parameters, viewed in the block shape
  std::vector<int64_t> domain;    // the fused kernel's
  std::vector<int64_t> param_dims;  // where the parameters' axes go in `domain`
};

std::optional<Blocked> blocked(Match& m, DType dtype) {
  // Only where tp.dequantize's form has a reshape to undo: packed bytes or block-wise parameters.
  const bool reshaped = m.scale->reshaped || (m.zero && m.zero->reshaped);
  if (!m.packed && !reshaped) return std::nullopt;
  const int64_t groups = m.K / m.group;
  Blocked b;
  // The weight by groups: [N, groups, group] stored [N, K], [groups, group, N] stored [K, N].
  std::vector<int64_t> q_shape =
      m.nk ? std::vector<int64_t>{m.N, groups, m.group} : std::vector<int64_t>{groups, m.group, m.N};
  std::vector<int64_t> param_shape = m.nk ? std::vector<int64_t>{m.N, groups} : std::vector<int64_t>{groups, m.N};
  b.param_dims = m.nk ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0, 2};
  b.domain = q_shape;
  if (m.packed) {
    // Two values a byte along the last axis (a whole number of bytes: no slice of a last half byte).
    const int64_t last = q_shape.back();
    if (last % 2 != 0) return std::nullopt;
    q_shape.back() = last / 2;
    b.domain = q_shape;
    b.domain.push_back(2);
    if (!m.nk) {  // the parameters' N axis is split too
      param_shape = {groups, m.N / 2, 2};
      b.param_dims = {0, 2, 3};
    }
  }
  const Tensor& q = m.q_values;
  if (q.numel() != numel_of(q_shape)) return std::nullopt;
  StatusOr<Tensor> scale = per_group(*m.scale, m, dtype, !m.nk);
  StatusOr<Tensor> zero = m.zero ? per_group(*m.zero, m, dtype, !m.nk) : StatusOr<Tensor>(Tensor());
  if (!scale.ok() || !zero.ok()) return std::nullopt;
  b.q = viewed_as(q, q_shape);
  b.scale = viewed_as(scale.value(), param_shape);
  if (m.zero) b.zero = viewed_as(zero.value(), param_shape);
  return b;
}

// Emits `b`'s dequantization (as unpacked_int4 and tp.dequantize compute it, by groups) and its
// reshape to the weight's shape; returns that reshape.
ValueId emit_blocked(const Blocked& b, const Match& m, const Value& weight, const OriginRef& origin, GraphRewrite& rw) {
  auto shape_of = [](const std::vector<int64_t>& dims) {
    Shape s;
    for (int64_t d : dims) s.push_back(Dim(d));
    return s;
  };
  auto constant = [&](const Tensor& t) {
    Op c;
    c.kind = OpKind::kConstant;
    c.origin = origin;
    c.constant = t;
    return rw.add(std::move(c), t.dtype(), shape_of(t.shape()));
  };
  auto unary = [&](OpKind kind, EwOp fn, ValueId a, DType dtype, const std::vector<int64_t>& shape,
                   std::vector<int64_t> dims = {}) {
    Op op;
    op.kind = kind;
    op.fn = fn;
    op.operands = {a};
    op.dims = std::move(dims);
    op.origin = origin;
    return rw.add(std::move(op), dtype, shape_of(shape));
  };
  auto binary = [&](EwOp fn, ValueId a, ValueId c, DType dtype) {
    Op op;
    op.fn = fn;
    op.operands = {a, c};
    op.origin = origin;
    return rw.add(std::move(op), dtype, shape_of(b.domain));
  };
  auto broadcast = [&](ValueId a, DType dtype, std::vector<int64_t> dims) {
    return unary(OpKind::kBroadcast, EwOp::kAdd, a, dtype, b.domain, std::move(dims));
  };
  const DType f = weight.dtype;
  const int64_t rank = static_cast<int64_t>(b.domain.size());
  ValueId q = constant(b.q);
  if (m.packed) {
    // The nibbles: floordiv(byte, [1, 16]) + 8, narrowed to int4 (unpack_int4's arithmetic).
    std::vector<int64_t> spread(static_cast<size_t>(rank - 1));
    std::iota(spread.begin(), spread.end(), 0);
    const ValueId wide = unary(OpKind::kElementwise, EwOp::kConvert, q, DType::kInt32, b.q.shape());
    Tensor divisors = Tensor::empty_host(DType::kInt32, {2});
    write_element(divisors, 0, 1);
    write_element(divisors, 1, 16);
    Tensor eight = Tensor::empty_host(DType::kInt32, {});
    write_element(eight, 0, 8);
    const ValueId bytes = broadcast(wide, DType::kInt32, spread);  // (one statement each: in this order)
    const ValueId by = broadcast(constant(divisors), DType::kInt32, {rank - 1});
    const ValueId div = binary(EwOp::kFloorDiv, bytes, by, DType::kInt32);
    const ValueId add = binary(EwOp::kAdd, div, broadcast(constant(eight), DType::kInt32, {}), DType::kInt32);
    q = unary(OpKind::kElementwise, EwOp::kConvert, add, DType::kInt4, b.domain);
  }
  ValueId x = unary(OpKind::kElementwise, EwOp::kConvert, q, f, b.domain);
  if (m.zero) x = binary(EwOp::kSub, x, broadcast(constant(b.zero), f, b.param_dims), f);
  x = binary(EwOp::kMul, x, broadcast(constant(b.scale), f, b.param_dims), f);
  return unary(OpKind::kReshape, EwOp::kAdd, x, f, static_dims(weight.shape));
}

}  // namespace

std::optional<Graph> weight_only_dot(const Graph& graph, int64_t max_rows) {
  // Each match and its kernel's constants: the packed weight, the scales and the zero points.
  struct Rewrite {
    Match m;
    Tensor weight, scale, zero;
  };
  std::vector<std::optional<Rewrite>> rewrites(graph.ops.size());
  // Per op computing a dequantized weight that a dot with too many rows reads: its form by groups.
  std::vector<std::optional<std::pair<Match, Blocked>>> blocks(graph.ops.size());
  bool any = false;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (graph.ops[i].kind != OpKind::kDot) continue;
    std::optional<Match> m = match(graph, graph.ops[i], max_rows);
    if (!m) continue;
    const DType dtype = graph.values[graph.ops[i].result].dtype;
    if (!m->rows_fit) {
      const size_t at = static_cast<size_t>(graph.values[m->weight].def);
      if (blocks[at]) continue;  // another dot's
      std::optional<Blocked> b = blocked(*m, dtype);
      if (b) blocks[at] = std::make_pair(*m, std::move(*b));
      any = any || b.has_value();
      continue;
    }
    // A weight that cannot be read (a device copy that fails) keeps dequantize and the GEMM.
    StatusOr<Tensor> w = packed_weight(*m);
    StatusOr<Tensor> scale = per_group(*m->scale, *m, dtype);
    StatusOr<Tensor> zero = m->zero ? per_group(*m->zero, *m, dtype) : StatusOr<Tensor>(Tensor());
    if (!w.ok() || !scale.ok() || !zero.ok()) continue;
    rewrites[i] = Rewrite{*m, w.value(), scale.value(), zero.value()};
    any = true;
  }
  if (!any) return std::nullopt;

  return dce(rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    if (blocks[i]) {
      const Op& mul = graph.ops[i];
      const OriginRef why =
          with_reason(mul.origin, "dequantize computed by groups of K for the GEMM (one fused kernel)");
      rw.set(mul.result, emit_blocked(blocks[i]->second, blocks[i]->first, graph.values[mul.result], why, rw));
      return true;
    }
    if (!rewrites[i]) return false;
    const Op& src = graph.ops[i];
    const Value& val = graph.values[src.result];
    const Match& m = rewrites[i]->m;
    const std::string format = m.float8 ? "float8" : "int" + std::to_string(m.bits);
    const OriginRef why =
        with_reason(src.origin, "the weight-only " + format + " product that replaced dequantize -> dot");
    auto constant = [&](const Tensor& c_tensor) {
      Op c;
      c.kind = OpKind::kConstant;
      c.origin = why;
      Shape s;
      for (int64_t d : c_tensor.shape()) s.push_back(Dim(d));
      c.constant = c_tensor;
      return rw.add(std::move(c), c_tensor.dtype(), s);
    };
    Op k;
    k.kind = OpKind::kKernel;
    k.origin = why;
    k.kernel.kind = rt::KernelKind::kWeightOnlyDot;
    k.kernel.weight_only_dot.bits = m.bits;
    k.kernel.weight_only_dot.group_size = m.group;
    k.kernel.weight_only_dot.has_zero = m.zero.has_value();
    k.operands = {rw[m.x], constant(rewrites[i]->weight), constant(rewrites[i]->scale)};
    if (m.zero) k.operands.push_back(constant(rewrites[i]->zero));
    rw.set(src.result, rw.add(std::move(k), val.dtype, val.shape));
    return true;
  }));
}

}  // namespace tripy::flat

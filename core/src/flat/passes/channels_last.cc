// Channels-last convolutions. cuDNN's tensor-core convolution kernels read activations NHWC and
// weights KRSC; given NCHW they transpose internally or fall back to slower kernels (ResNet-50 in
// float16 on an H100 spent 97% of its GPU time in NCHW convolutions, 3.6x torch's channels-last
// run). This pass runs every eligible convolution channels-last, and with it the pooling and the
// elementwise ops (bias, residual, activation) between convolutions, so a chain of convolutions
// changes layout only at its edges: one transpose where a channels-first value enters (the input
// image) and one where a channels-last value leaves for an op that needs channels-first (a
// reduction, a reshape, an output). Concatenations of channels-last values stay channels-last. Constant weights are re-laid out here, once, in one pass
// over their bytes.
//
// The rewrite keeps, per original value, its channels-first value in the new graph and its
// channels-last twin (the same tensor stored permuted, (N, C, spatial...) -> (N, spatial..., C));
// either is made from the other by a transpose on first use, so a value that every consumer
// reads channels-last is never transposed.
#include <algorithm>

#include "flat/constant_data.h"
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"
#include "tripy/executable.h"

namespace tripy::flat {
namespace {

using rt::Layout;

// transpose(x, to_last(r)) stores x channels-last; transpose(y, to_first(r)) undoes it.
std::vector<int64_t> to_last(size_t r) {
  std::vector<int64_t> p = {0};
  for (size_t d = 2; d < r; ++d) p.push_back(static_cast<int64_t>(d));
  p.push_back(1);
  return p;
}
std::vector<int64_t> to_first(size_t r) {
  std::vector<int64_t> p = {0, static_cast<int64_t>(r) - 1};
  for (size_t d = 1; d + 1 < r; ++d) p.push_back(static_cast<int64_t>(d));
  return p;
}
// Where channels-first dim d of a rank-r tensor sits channels-last.
int64_t last_position(int64_t d, size_t r) { return d == 0 ? 0 : d == 1 ? static_cast<int64_t>(r) - 1 : d - 1; }

template <class T>
void relayout(const T* src, T* dst, int64_t rows, int64_t channels, int64_t taps) {
  // Writes run in order; reads stride by `taps` (1, 9 or 49 for usual kernels).
  for (int64_t r = 0; r < rows; ++r, src += channels * taps)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t c = 0; c < channels; ++c) *dst++ = src[c * taps + t];
}

// A constant weight (w0, w1, k...) stored channels-last, (w0, k..., w1).
Tensor weight_channels_last(const Tensor& w) {
  const std::vector<int64_t>& s = w.shape();
  int64_t taps = 1;
  for (size_t d = 2; d < s.size(); ++d) taps *= s[d];
  Tensor out = Tensor::empty_host(w.dtype(), rt::from_channels_first(Layout::kChannelsLast, s));
  switch (dtype_size(w.dtype())) {
    case 2: relayout(static_cast<const uint16_t*>(w.data()), static_cast<uint16_t*>(out.data()), s[0], s[1], taps); break;
    case 4: relayout(static_cast<const uint32_t*>(w.data()), static_cast<uint32_t*>(out.data()), s[0], s[1], taps); break;
    default: relayout(static_cast<const uint64_t*>(w.data()), static_cast<uint64_t*>(out.data()), s[0], s[1], taps);
  }
  return out;
}

bool is_static_one(const Dim& d) { return d.is_static() && d.static_value() == 1; }

class Rewriter {
 public:
  Rewriter(const Graph& g, const ChannelsLastRule& rule) : g_(g), rule_(rule), out_(empty_like(g)) {
    first_.assign(g.values.size(), -1);
    last_.assign(g.values.size(), -1);
  }

  bool eligible(const Op& op) const {
    const Value& v = g_.values[op.result];
    if (std::find(rule_.dtypes.begin(), rule_.dtypes.end(), v.dtype) == rule_.dtypes.end() || v.shape.size() < 3)
      return false;
    if (op.kind == OpKind::kConvolution) return op.convolution.layout == Layout::kChannelsFirst;
    // Pooling follows a convolution's layout; alone it stays channels-first.
    return op.kind == OpKind::kPooling && op.pooling.layout == Layout::kChannelsFirst && last_[op.operands[0]] >= 0;
  }

  Graph run() {
    for (const Op& src : g_.ops) {
      const Value& val = g_.values[src.result];
      if (src.kind == OpKind::kConvolution && eligible(src)) {
        Op op = src;
        op.convolution.layout = Layout::kChannelsLast;
        op.operands = {last(src.operands[0]), last(src.operands[1])};
        last_[src.result] = out_.add(std::move(op), val.dtype, rt::from_channels_first(Layout::kChannelsLast, val.shape));
      } else if (src.kind == OpKind::kPooling && eligible(src)) {
        Op op = src;
        op.pooling.layout = Layout::kChannelsLast;
        op.operands = {last_[src.operands[0]]};
        last_[src.result] = out_.add(std::move(op), val.dtype, rt::from_channels_first(Layout::kChannelsLast, val.shape));
      } else if (runs_last(src)) {
        Op op = src;
        for (ValueId& v : op.operands) v = last(v);
        if (op.kind == OpKind::kConcatenate) op.dims = {last_position(src.dims[0], val.shape.size())};
        last_[src.result] = out_.add(std::move(op), val.dtype, rt::from_channels_first(Layout::kChannelsLast, val.shape));
      } else {
        Op op = src;
        for (ValueId& v : op.operands) v = first(v);
        first_[src.result] = out_.add(std::move(op), val.dtype, val.shape);
      }
    }
    for (ValueId v : g_.inputs) out_.inputs.push_back(first(v));
    for (ValueId v : g_.outputs) out_.outputs.push_back(first(v));
    return dce(out_);
  }

 private:
  // An elementwise op (or a concatenation: UNet's skip connections) reading at least one
  // channels-last twin, whose other operands are twins or broadcasts (which become broadcasts
  // along the permuted dims, free in fused kernels).
  bool runs_last(const Op& op) const {
    if (op.kind != OpKind::kElementwise && op.kind != OpKind::kConcatenate) return false;
    if (g_.values[op.result].shape.size() < 3) return false;
    bool any = false;
    for (ValueId v : op.operands) {
      if (last_[v] >= 0) any = any || g_.def(v).kind != OpKind::kBroadcast;
      else if (g_.def(v).kind != OpKind::kBroadcast) return false;
    }
    return any;
  }

  ValueId transpose(ValueId x, std::vector<int64_t> perm, const Value& like, Shape shape, const char* reason) {
    Op t;
    t.kind = OpKind::kTranspose;
    t.dims = std::move(perm);
    t.operands = {x};
    t.origin = with_reason(g_.ops[like.def].origin, reason);
    return out_.add(std::move(t), like.dtype, std::move(shape));
  }

  // v's channels-first value in the new graph. A widening convert that ran channels-last is
  // converted again from its operand's channels-first value, so the transpose moves the narrow
  // value and the convert fuses into the reader (a float16 mean, computed in float32, of a
  // channels-last pooling stays one reduction kernel).
  ValueId first(ValueId v) {
    if (first_[v] < 0) {
      const Value& val = g_.values[v];
      const Op& def = g_.ops[val.def];
      if (def.kind == OpKind::kElementwise && def.fn == EwOp::kConvert && last_[def.operands[0]] >= 0 &&
          dtype_size(g_.values[def.operands[0]].dtype) < dtype_size(val.dtype)) {
        Op op = def;
        op.operands = {first(def.operands[0])};
        return first_[v] = out_.add(std::move(op), val.dtype, val.shape);
      }
      first_[v] = transpose(last_[v], to_first(val.shape.size()), val, val.shape,
                            "back to channels-first after channels-last convolutions");
    }
    return first_[v];
  }

  // v's channels-last twin in the new graph.
  ValueId last(ValueId v) {
    if (last_[v] >= 0) return last_[v];
    const Value& val = g_.values[v];
    const Op& def = g_.ops[val.def];
    const Shape shape = rt::from_channels_first(Layout::kChannelsLast, val.shape);
    const int64_t es = dtype_size(val.dtype);
    if (def.kind == OpKind::kConstant && def.constant.defined() && val.shape.size() >= 3 &&
        def.constant.dtype() == val.dtype && is_static(val.shape) && (es == 2 || es == 4 || es == 8)) {
      // (A device-resident weight is relaid on the host and uploaded again: that one is the copy
      // the executable keeps. Where it cannot be read, a transpose kernel does the same.)
      if (StatusOr<Tensor> host = copy_to(def.constant, Device{}); host.ok()) {
        Op c;
        c.kind = OpKind::kConstant;
        c.constant = weight_channels_last(host.value());
        c.origin = def.origin;
        return last_[v] = out_.add(std::move(c), val.dtype, shape);
      }
    }
    // Never a transpose of a broadcast: broadcast the operand along the permuted dims instead.
    if (def.kind == OpKind::kBroadcast) return last_[v] = broadcast_last(def, val, shape);
    return last_[v] = transpose(first(v), to_last(val.shape.size()), val, shape,
                                "to channels-last for cuDNN's tensor-core convolutions");
  }

  // broadcast(s, dims) channels-last: s's dims land at permuted positions, which must increase,
  // so s is reordered first (a reshape when only unit dims move, a per-channel bias [C, 1, 1]).
  ValueId broadcast_last(const Op& b, const Value& val, const Shape& shape) {
    const size_t r = val.shape.size();
    const ValueId s = b.operands[0];
    const Shape& ss = g_.values[s].shape;
    std::vector<size_t> order(ss.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) {
      return last_position(b.dims[i], r) < last_position(b.dims[j], r);
    });
    Op nb = b;
    nb.dims.clear();
    Shape sorted;
    std::vector<int64_t> perm;
    std::vector<size_t> kept_first, kept_sorted;  // non-unit dims, in each order
    for (size_t k = 0; k < order.size(); ++k) {
      nb.dims.push_back(last_position(b.dims[order[k]], r));
      sorted.push_back(ss[order[k]]);
      perm.push_back(static_cast<int64_t>(order[k]));
      if (!is_static_one(ss[k])) kept_first.push_back(k);
      if (!is_static_one(ss[order[k]])) kept_sorted.push_back(order[k]);
    }
    ValueId operand = first(s);
    bool moved = false;
    for (size_t k = 0; k < perm.size(); ++k) moved = moved || perm[k] != static_cast<int64_t>(k);
    if (moved) {
      const Value& sv = g_.values[s];
      if (kept_first == kept_sorted) {
        Op re;
        re.kind = OpKind::kReshape;
        re.operands = {operand};
        re.origin = b.origin;
        operand = out_.add(std::move(re), sv.dtype, sorted);
      } else {
        Op t;
        t.kind = OpKind::kTranspose;
        t.dims = perm;
        t.operands = {operand};
        t.origin = b.origin;
        operand = out_.add(std::move(t), sv.dtype, sorted);
      }
    }
    nb.operands = {operand};
    return out_.add(std::move(nb), val.dtype, shape);
  }

  const Graph& g_;
  const ChannelsLastRule& rule_;
  Graph out_;
  std::vector<ValueId> first_, last_;  // per original value: its value in out_, or -1
};

}  // namespace

std::optional<Graph> channels_last(const Graph& graph, const ChannelsLastRule& rule) {
  Rewriter rw(graph, rule);
  int convolutions = 0;
  for (const Op& op : graph.ops) convolutions += op.kind == OpKind::kConvolution && rw.eligible(op);
  if (convolutions == 0 || convolutions < rule.min_convolutions) return std::nullopt;
  return rw.run();
}

}  // namespace tripy::flat

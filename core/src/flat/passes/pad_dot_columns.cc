// Pads the output columns of GEMMs whose rows are not 16-byte aligned. A vocabulary of 50257
// halves makes every output row start at a 2-byte boundary, and cuBLASLt then falls back to old
// kernels that accept any alignment: 6.0 ms instead of 0.86 for GPT-2's lm_head at B8 x 1024 on
// an H100. With the constant weight padded by zero columns at compile time, the GEMM writes an
// aligned [.., Npad] buffer; its users read the [.., :N] slice (fused kernels in place, a program
// output through one copy of ~0.5 ms).
#include <cstring>

#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

bool is_constant(const Graph& g, ValueId v) { return g.def(v).kind == OpKind::kConstant; }

// The constant the right operand reads, and whether it is transposed ([N, K] read as [K, N]).
bool constant_rhs(const Graph& g, ValueId rhs, ValueId* w, bool* transposed) {
  const Op& t = g.def(rhs);
  *transposed = t.kind == OpKind::kTranspose && t.dims == std::vector<int64_t>{1, 0};
  *w = *transposed ? t.operands[0] : rhs;
  return g.values[*w].shape.size() == 2 && is_constant(g, *w);
}

struct Padding {
  int64_t columns = 0, padded = 0;
};

std::optional<Padding> padding_for(const Graph& g, const Op& dot, int64_t min_columns) {
  ValueId w;
  bool transposed;
  if (!constant_rhs(g, dot.operands[1], &w, &transposed)) return std::nullopt;
  const Value& out = g.values[dot.result];
  const int64_t es = dtype_size(out.dtype);
  if (es != 2 && es != 4) return std::nullopt;
  const int64_t per_16_bytes = 16 / es;
  const Shape& ws = g.values[w].shape;
  const Dim& n = ws[transposed ? 0 : 1];
  const Dim& k = ws[transposed ? 1 : 0];
  if (!n.is_static() || !k.is_static() || k.static_value() % per_16_bytes != 0) return std::nullopt;
  const int64_t columns = n.static_value();
  if (columns < min_columns || columns % per_16_bytes == 0) return std::nullopt;
  return Padding{columns, (columns + per_16_bytes - 1) / per_16_bytes * per_16_bytes};
}

}  // namespace

std::optional<Graph> pad_dot_columns(const Graph& graph, int64_t min_columns) {
  bool any = false;
  for (const Op& op : graph.ops) any = any || (op.kind == OpKind::kDot && padding_for(graph, op, min_columns));
  if (!any) return std::nullopt;
  return rewrite_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    const Value& val = graph.values[src.result];
    std::optional<Padding> pad = src.kind == OpKind::kDot ? padding_for(graph, src, min_columns) : std::nullopt;
    if (!pad) return false;
    ValueId w;
    bool transposed;
    constant_rhs(graph, src.operands[1], &w, &transposed);
    const size_t axis = transposed ? 0 : 1;  // W's column axis
    const Value& wv = graph.values[w];
    // W with zero columns appended (constant folding evaluates the concatenation).
    Shape zshape = wv.shape;
    zshape[axis] = Dim(pad->padded - pad->columns);
    std::vector<int64_t> zdims = {zshape[0].static_value(), zshape[1].static_value()};
    Tensor zeros = Tensor::empty_host(wv.dtype, zdims);
    std::memset(zeros.data(), 0, static_cast<size_t>(zeros.nbytes()));
    Op z;
    z.kind = OpKind::kConstant;
    z.constant = zeros;
    z.origin = src.origin;
    const ValueId zv = rw.add(std::move(z), wv.dtype, zshape);
    Shape pshape = wv.shape;
    pshape[axis] = Dim(pad->padded);
    Op cat;
    cat.kind = OpKind::kConcatenate;
    cat.operands = {rw[w], zv};
    cat.dims = {static_cast<int64_t>(axis)};
    cat.origin = src.origin;
    ValueId rhs = rw.add(std::move(cat), wv.dtype, pshape);
    if (transposed) {
      Op t = graph.def(src.operands[1]);
      t.operands = {rhs};
      rhs = rw.add(std::move(t), wv.dtype, Shape{pshape[1], pshape[0]});
    }
    Op dot = src;
    dot.operands = {rw[src.operands[0]], rhs};
    Shape wide = val.shape;
    wide.back() = Dim(pad->padded);
    const ValueId y = rw.add(std::move(dot), val.dtype, wide);
    Op slice;
    slice.kind = OpKind::kSlice;
    slice.operands = {y};
    slice.origin = src.origin;
    for (size_t d = 0; d < wide.size(); ++d) {
      slice.starts.push_back(Dim(int64_t{0}));
      slice.limits.push_back(d + 1 == wide.size() ? Dim(pad->columns) : wide[d]);
      slice.steps.push_back(Dim(int64_t{1}));
    }
    rw.set(src.result, rw.add(std::move(slice), val.dtype, val.shape));
    return true;
  });
}

}  // namespace tripy::flat

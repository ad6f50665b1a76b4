// FlatIR graph construction and the op-kind name table shared by the printer and the parser.
#include "flat/ir.h"

#include <algorithm>
#include <array>

#include "flat/constant_data.h"

namespace tripy::flat {
namespace {

constexpr const char* kOpKindNames[] = {
#define TRIPY_FLAT_OP(Enum, name, attrs) name,
#include "flat/op_kinds.def"
};
constexpr OpAttrs kOpAttrs[] = {
#define TRIPY_FLAT_OP(Enum, name, attrs) attrs,
#include "flat/op_kinds.def"
};

}  // namespace

const char* op_kind_name(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < std::size(kOpKindNames) ? kOpKindNames[i] : "invalid";
}

OpAttrs op_attrs(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < std::size(kOpAttrs) ? kOpAttrs[i] : OpAttrs{kNoAttrs};
}

bool swaps_last_two_dims(const Op& op) {
  const size_t n = op.dims.size();
  if (op.kind != OpKind::kTranspose || n < 2) return false;
  for (size_t i = 0; i + 2 < n; ++i)
    if (op.dims[i] != static_cast<int64_t>(i)) return false;
  return op.dims[n - 2] == static_cast<int64_t>(n - 1) && op.dims[n - 1] == static_cast<int64_t>(n - 2);
}

int64_t most_rows(const Graph& g, ValueId x) {
  int64_t rows = 1;
  const Shape& xs = g.values[x].shape;
  for (size_t d = 0; d + 1 < xs.size(); ++d) rows *= std::max<int64_t>(1, xs[d].upper_bound(g.symbols));
  return rows;
}

std::optional<double> splat_value(const Graph& g, ValueId v) {
  const Op* op = &g.def(v);
  while (op->kind == OpKind::kBroadcast) op = &g.def(op->operands[0]);
  if (op->kind != OpKind::kConstant || !op->constant.defined() || op->constant.numel() != 1 || !on_host(op->constant))
    return std::nullopt;
  return read_element(op->constant, 0);
}

Shape conv_result_shape(const Shape& stored_input, const Shape& stored_weight, const rt::ConvolutionAttrs& a) {
  const Shape input = rt::to_channels_first(a.layout, stored_input);
  const Shape weight = rt::to_channels_first(a.layout, stored_weight);
  const int64_t w0 = weight[0].static_value(), w1 = weight[1].static_value();
  Shape out = {input[0], Dim(a.transposed ? w1 * a.groups : w0)};
  for (size_t d = 0; d < a.spatial(); ++d) {
    const int64_t span = a.dilation[d] * (weight[d + 2].static_value() - 1) + 1;
    const Dim& n = input[d + 2];
    if (a.transposed) {
      out.push_back((n - Dim(1)) * Dim(a.stride[d]) + Dim(span + a.output_padding[d] - a.pad_before[d] - a.pad_after[d]));
    } else {
      out.push_back(Dim::make(DimOp::kFloorDiv, n + Dim(a.pad_before[d] + a.pad_after[d] - span), Dim(a.stride[d])) +
                    Dim(1));
    }
  }
  return rt::from_channels_first(a.layout, std::move(out));
}

Shape pool_result_shape(const Shape& stored_input, const rt::PoolingAttrs& a) {
  const Shape input = rt::to_channels_first(a.layout, stored_input);
  Shape out = {input[0], input[1]};
  for (size_t d = 0; d < a.spatial(); ++d)
    out.push_back(Dim::make(DimOp::kFloorDiv, input[d + 2] + Dim(a.pad_before[d] + a.pad_after[d] - a.window[d]),
                            Dim(a.stride[d])) +
                  Dim(1));
  return rt::from_channels_first(a.layout, std::move(out));
}

ValueId Graph::add(Op op, DType dtype, Shape shape) {
  auto id = static_cast<ValueId>(values.size());
  values.push_back(Value{dtype, std::move(shape), static_cast<int32_t>(ops.size())});
  op.result = id;
  ops.push_back(std::move(op));
  return id;
}

std::vector<int32_t> Graph::use_counts() const {
  std::vector<int32_t> counts(values.size(), 0);
  for (const Op& op : ops) {
    for (ValueId v : op.operands) {
      if (v >= 0 && static_cast<size_t>(v) < counts.size()) ++counts[v];
    }
  }
  for (ValueId v : outputs) {
    if (v >= 0 && static_cast<size_t>(v) < counts.size()) ++counts[v];
  }
  return counts;
}

}  // namespace tripy::flat

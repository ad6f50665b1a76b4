// A KV-cache write takes its rows from a slice of a projection (a layer's k and v are head ranges
// of one qkv product), and the slice is a copy kernel of its own before the update. Where each
// row the update writes is one contiguous run of the slice's operand, the update reads that
// operand directly instead:
//
//   update_slice(cache, slice(x, [0.., 0.., h0, 0..]), pos) {dims = [axis]}
//     ->  update_slice(cache, x, pos) {dims = [axis, h0 * D]}
//
// dims[1] is the offset, in elements, of each written row within the update's row (the dims past
// the axis): the rows are the cache's row length long, the update's rows are read whole-stride.
#include "flat/passes/passes.h"
#include "flat/passes/rebuild.h"

namespace tripy::flat {
namespace {

bool all_static(const Shape& s, size_t from) {
  for (size_t d = from; d < s.size(); ++d)
    if (!s[d].is_static()) return false;
  return true;
}

// The element offset of the update's rows in `slice`'s operand, or -1 where the slice does not
// leave each of them one contiguous run there: every dim up to the axis whole, the dims past it
// whole but for one (d0), the dims between the axis and d0 of size 1, steps of 1, static starts.
int64_t window_offset(const Graph& g, const Op& slice, int64_t axis) {
  const Shape& x = g.values[slice.operands[0]].shape;
  const size_t rank = x.size();
  if (slice.starts.size() != rank || slice.limits.size() != rank || slice.steps.size() != rank ||
      axis < 0 || static_cast<size_t>(axis) >= rank || !all_static(x, static_cast<size_t>(axis) + 1))
    return -1;
  auto whole = [&](size_t d) {
    return slice.starts[d].is_static() && slice.starts[d].static_value() == 0 && slice.limits[d].same_as(x[d]);
  };
  for (size_t d = 0; d < rank; ++d)
    if (!slice.steps[d].is_static() || slice.steps[d].static_value() != 1) return -1;
  for (size_t d = 0; d <= static_cast<size_t>(axis); ++d)
    if (!whole(d)) return -1;
  int64_t offset = 0, inner = 1;
  bool cut = false;  // the one partial dim seen (going outwards from the last)
  for (size_t d = rank; d-- > static_cast<size_t>(axis) + 1;) {
    const int64_t size = x[d].static_value();
    if (whole(d)) {
      if (cut && size != 1) return -1;  // whole dims outside the cut must be unit
    } else {
      if (cut || !slice.starts[d].is_static() || !slice.limits[d].is_static()) return -1;
      cut = true;
      offset = slice.starts[d].static_value() * inner;
    }
    inner *= size;
  }
  return cut ? offset : -1;
}

}  // namespace

std::optional<Graph> fold_update_windows(const Graph& graph) {
  std::optional<Graph> out = rewrite_some_ops(graph, [&](size_t i, GraphRewrite& rw) {
    const Op& src = graph.ops[i];
    if (src.kind != OpKind::kUpdateSlice || src.dims.size() != 1 || src.operands.size() != 3) return false;
    const Op& up = graph.def(src.operands[1]);
    if (up.kind != OpKind::kSlice) return false;
    const int64_t offset = window_offset(graph, up, src.dims[0]);
    if (offset < 0) return false;
    Op op = src;
    op.operands = {src.operands[0], up.operands[0], src.operands[2]};  // source values, mapped by copy
    op.dims = {src.dims[0], offset};
    rw.copy(op);
    return true;
  });
  if (!out) return out;
  return dce(*out);
}

}  // namespace tripy::flat

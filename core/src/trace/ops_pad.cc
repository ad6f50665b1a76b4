// pad: grows each dim by (before, after) elements, filled with a constant or mirrored from the
// tensor ("reflect", without repeating the edge), as a composite of FlatIR slice, broadcast and
// concatenate. Its rule is symbolic: dims and pad widths may be dynamic (a tp.DimensionSize), and
// what the compiler cannot prove (a width not negative, a reflection that fits) is checked at run
// time with the user's line.
#include <cmath>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

bool is_zero(const Dim& d) { return d.is_static() && d.static_value() == 0; }

std::string pairs_str(const Shape& before, const Shape& after) {
  std::string s = "[";
  for (size_t i = 0; i < before.size(); ++i)
    s += (i ? ", (" : "(") + before[i].str() + ", " + after[i].str() + ")";
  return s + "]";
}

// pad(x): attrs.starts[d] / attrs.limits[d] elements before / after dim d; attrs.mode
// "constant" (attrs.fill) or "reflect".
Status infer_pad(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  const Attrs& a = ctx.node.attrs;
  const SymbolTable* table = ctx.node.symbols.get();
  if (a.mode != "constant" && a.mode != "reflect")
    return ctx.error("pad: unsupported mode '" + a.mode + "'; use 'constant' or 'reflect'.");
  if (a.starts.size() != in.size() || a.limits.size() != in.size())
    return ctx.error("pad: got " + std::to_string(a.starts.size()) + " (before, after) pairs for a tensor of rank " +
                     std::to_string(in.size()) + "; give one per dim.");
  for (size_t d = 0; d < in.size(); ++d)
    for (const Dim* w : {&a.starts[d], &a.limits[d]})
      if (w->is_static() && w->static_value() < 0)
        return ctx.error("pad: padding sizes must be non-negative, but got: " + pairs_str(a.starts, a.limits) + ".");
  const DType dt = ctx.in()[0]->dtype;
  if (a.mode == "constant") TRIPY_RETURN_IF_ERROR(check_fill(ctx, dt, "pad"));
  Shape out = in;
  for (size_t d = 0; d < in.size(); ++d) {
    if (a.mode == "reflect" && in[d].is_static()) {
      const int64_t size = in[d].static_value();
      const Dim& before = a.starts[d];
      const Dim& after = a.limits[d];
      const bool pads = !is_zero(before) || !is_zero(after);
      // A dynamic width is checked against the size at run time (lower_pad).
      if (pads && ((before.is_static() && before.static_value() >= size) ||
                   (after.is_static() && after.static_value() >= size)))
        return ctx.error("pad: reflect padding of (" + before.str(table) + ", " + after.str(table) +
                         ") on dimension " + std::to_string(d) + " needs both sides smaller than its size " +
                         std::to_string(size) + ".");
    }
    out[d] = a.starts[d] + in[d] + a.limits[d];
  }
  ctx.node.shape = std::move(out);
  ctx.node.dtype = dt;
  return ok_status();
}

// x[start : start -/+ n : step] along `axis` (the other dims whole), of length n.
flat::ValueId slice_along(LowerCtx& c, flat::ValueId x, int64_t axis, Dim start, Dim limit, int64_t step,
                          const Dim& n, const std::string& reason) {
  const Shape in = c.value(x).shape;
  flat::Op op;
  op.kind = flat::OpKind::kSlice;
  op.operands = {x};
  Shape out = in;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool here = static_cast<int64_t>(d) == axis;
    op.starts.push_back(here ? start : Dim(0));
    op.limits.push_back(here ? limit : in[d]);
    op.steps.push_back(here ? Dim(step) : Dim(1));
  }
  out[axis] = n;
  const DType dt = c.value(x).dtype;
  return c.emit(std::move(op), dt, std::move(out), reason);
}

// Asserts lo <= v at run time unless the symbols' bounds prove it.
void check_at_least(LowerCtx& c, const Dim& lo, const Dim& v, const std::string& message) {
  const SymbolTable* table = c.node().symbols.get();
  if (table && provably_le(lo, v, *table)) return;
  c.check_equal(Dim::make(DimOp::kMax, v, lo), v, message);
}

StatusOr<flat::ValueId> lower_pad(LowerCtx& c) {
  const Attrs& a = c.node().attrs;
  const DType dt = c.node().dtype;
  const bool reflect = a.mode == "reflect";
  flat::ValueId out = c.in(0);
  for (int64_t d = 0; d < static_cast<int64_t>(a.starts.size()); ++d) {
    const Dim& before = a.starts[d];
    const Dim& after = a.limits[d];
    if (is_zero(before) && is_zero(after)) continue;
    const Dim size = c.value(out).shape[d];
    const std::string where = " on dimension " + std::to_string(d);
    for (const Dim* w : {&before, &after}) {
      if (!w->is_static()) check_at_least(c, Dim(0), *w, "pad: a padding size" + where + " is negative at run time.");
      // The rule checked static widths against static sizes; the rest is known at run time.
      if (reflect && !is_zero(*w) && !(w->is_static() && size.is_static()))
        check_at_least(c, *w + Dim(1), size,
                       "pad: reflect padding" + where + " needs both sides smaller than its size at run time.");
    }
    std::vector<flat::ValueId> parts;
    for (int side = 0; side < 2; ++side) {
      const Dim& width = side == 0 ? before : after;
      if (is_zero(width)) continue;
      flat::ValueId block;
      if (reflect) {
        // The mirror excludes the edge: indices before..1, and size-2 down to size-1-after.
        block = side == 0 ? slice_along(c, out, d, width, Dim(0), -1, width, "reflect the start" + where)
                          : slice_along(c, out, d, size - Dim(2), size - Dim(2) - width, -1, width,
                                        "reflect the end" + where);
      } else {
        Shape shape = c.value(out).shape;
        shape[d] = width;
        block = c.splat_fill(dt, std::move(shape));
      }
      parts.push_back(block);
      if (side == 0) parts.push_back(out);
    }
    if (is_zero(before)) parts.insert(parts.begin(), out);
    out = c.concat(std::move(parts), d);
  }
  return out;
}

}  // namespace

void register_pad_ops() {
  constexpr AttrSet kPad = attr::starts | attr::limits | attr::mode;
  register_op({"pad", "pad", 1, 1, {}, true, infer_pad, lower_pad, kPad | attr::fill | attr::fill_int, kPad}); }

}  // namespace tripy::trace

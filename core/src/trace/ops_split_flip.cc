// split_part and flip: composites of a FlatIR slice whose rules work on symbolic dims, so both
// take dynamic dims inside tp.compile. What cannot be proved at compile time (that a dynamic dim
// divides into equal parts, that explicit sizes add up to it) is checked at run time.
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

// split_part: part attrs.dims[0] of x split along attrs.axis, either into attrs.dims[1] equal
// parts (attrs.dims has 2 entries) or into parts of the sizes attrs.shape (attrs.dims has 1).
Status infer_split_part(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  if (in.empty()) return ctx.error("split: cannot split a tensor of rank 0.");
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(in.size())));
  Attrs& a = ctx.node.attrs;
  a.axis = axis;
  const Dim& size = in[axis];
  const std::string where = "dimension " + std::to_string(axis) + " of size " + size.str();
  Dim part;
  if (a.dims.size() == 2) {
    const int64_t count = a.dims[1];
    if (count <= 0) return ctx.error("split: the number of parts must be positive, but got " + std::to_string(count) + ".");
    if (size.is_static() && size.static_value() % count != 0)
      return ctx.error("split: " + where + " cannot be split into " + std::to_string(count) + " equal parts.");
    part = Dim::make(DimOp::kFloorDiv, size, Dim(count));
  } else if (a.dims.size() == 1) {
    Dim total = 0;
    bool all_static = true;
    for (const Dim& s : a.shape) {
      if (s.is_static() && s.static_value() < 0)
        return ctx.error("split: sizes must not be negative, but got " + shape_str(a.shape) + ".");
      all_static = all_static && s.is_static();
      total = total + s;
    }
    if (a.shape.empty()) return ctx.error("split: expected at least one size.");
    if (all_static && size.is_static() && total.static_value() != size.static_value())
      return ctx.error("split: sizes " + shape_str(a.shape) + " do not add up to the size of " + where + ".");
    if (a.dims[0] < 0 || a.dims[0] >= static_cast<int64_t>(a.shape.size()))
      return ctx.error("split: part " + std::to_string(a.dims[0]) + " does not exist.");
    part = a.shape[a.dims[0]];
  } else {
    return ctx.error("split: expected the part index and the number of parts, or the part index and sizes.");
  }
  if (a.dims[0] < 0 || (a.dims.size() == 2 && a.dims[0] >= a.dims[1]))
    return ctx.error("split: part " + std::to_string(a.dims[0]) + " does not exist.");
  Shape out = in;
  out[axis] = part;
  ctx.node.shape = std::move(out);
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

flat::ValueId emit_slice(LowerCtx& c, int64_t axis, Dim start, Dim limit, int64_t step) {
  const Shape& in = c.value(c.in(0)).shape;
  flat::Op op;
  op.kind = flat::OpKind::kSlice;
  op.operands = {c.in(0)};
  for (size_t d = 0; d < in.size(); ++d) {
    const bool here = static_cast<int64_t>(d) == axis;
    op.starts.push_back(here ? start : Dim(0));
    op.limits.push_back(here ? limit : in[d]);
    op.steps.push_back(here ? Dim(step) : Dim(1));
  }
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

StatusOr<flat::ValueId> lower_split_part(LowerCtx& c) {
  const Attrs& a = c.node().attrs;
  const Dim size = c.value(c.in(0)).shape[a.axis];
  const int64_t index = a.dims[0];
  Dim start;
  Dim part;
  if (a.dims.size() == 2) {
    part = Dim::make(DimOp::kFloorDiv, size, Dim(a.dims[1]));
    start = part * Dim(index);
    c.check_equal(part * Dim(a.dims[1]), size,
                  "split: dimension " + std::to_string(a.axis) + " cannot be split into " + std::to_string(a.dims[1]) +
                      " equal parts: its size is not a multiple of " + std::to_string(a.dims[1]) +
                      " (the sizes below are the largest multiple that fits, and the size).");
  } else {
    Dim total = 0;
    start = 0;
    for (size_t i = 0; i < a.shape.size(); ++i) {
      if (static_cast<int64_t>(i) < index) start = start + a.shape[i];
      total = total + a.shape[i];
    }
    part = a.shape[index];
    c.check_equal(total, size,
                  "split: the sizes " + shape_str(a.shape) + " do not add up to the size of dimension " +
                      std::to_string(a.axis) + ".");
  }
  return emit_slice(c, a.axis, start, start + part, 1);
}

// flip: x reversed along attrs.axis (the frontend applies it once per dim).
Status infer_flip(InferCtx& ctx) {
  const Shape& in = ctx.shape(0);
  if (in.empty()) return ctx.error("flip: a tensor of rank 0 has no dimension to flip.");
  TRIPY_ASSIGN_OR_RETURN(int64_t axis, normalize_dim(ctx, ctx.node.attrs.axis, static_cast<int64_t>(in.size())));
  ctx.node.attrs.axis = axis;
  ctx.node.shape = in;
  ctx.node.dtype = ctx.in()[0]->dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_flip(LowerCtx& c) {
  const int64_t axis = c.node().attrs.axis;
  const Dim size = c.value(c.in(0)).shape[axis];
  // From the last element down to "before the first" (-1), as Python's x[::-1] clamps.
  return emit_slice(c, axis, size - Dim(1), Dim(-1), -1);
}

}  // namespace

void register_split_flip_ops() {
  register_op({"split_part", "split", 1, 1, {}, true, infer_split_part, lower_split_part,
               attr::axis | attr::dims | attr::shape, attr::axis | attr::dims});
  register_op({"flip", "flip", 1, 1, {}, true, infer_flip, lower_flip, attr::axis, attr::axis});
}

}  // namespace tripy::trace

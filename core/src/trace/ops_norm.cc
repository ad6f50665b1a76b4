// The normalizations whose statistics come from the data: LayerNorm and RMSNorm (over the
// trailing dims), GroupNorm and InstanceNorm (over channel groups of (N, C, spatial...) tensors).
// Each is a composite of FlatIR reduce and elementwise ops that fusion turns into row kernels.
// float16 and bfloat16 statistics are computed in float32 and the result is rounded once: a
// float16 sum overflows (65504) for rows of a few thousand large activations, and a float16 mean
// over many elements is off by several ulps, which the normalization then amplifies.
// Shapes are symbolic: batch and spatial dims may be dynamic inside tp.compile.
#include <cmath>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

constexpr DType kStats = DType::kFloat32;

flat::ValueId widen(LowerCtx& c, flat::ValueId v) {
  return c.value(v).dtype == kStats ? v : c.ew(EwOp::kConvert, {v}, kStats);
}

flat::ValueId narrow_to(LowerCtx& c, flat::ValueId v, DType io) {
  return io == kStats ? v : c.ew(EwOp::kConvert, {v}, io);
}

// rsqrt(stat + eps), broadcast back over `dims` of `full`.
flat::ValueId inverse_root(LowerCtx& c, flat::ValueId stat, const Shape& full, const std::vector<int64_t>& dims) {
  flat::ValueId eps = c.broadcast_to(c.scalar(c.node().attrs.eps, kStats), c.value(stat).shape, "");
  return unreduce(c, c.ew(EwOp::kRsqrt, {c.ew(EwOp::kAdd, {stat, eps}, kStats)}, kStats), full, dims);
}

// (x - mean) / sqrt(var + eps) over `dims` of x (float32), with the biased variance.
flat::ValueId standardize(LowerCtx& c, flat::ValueId x, const std::vector<int64_t>& dims) {
  const Shape s = c.value(x).shape;
  flat::ValueId centered = c.ew(EwOp::kSub, {x, unreduce(c, mean_of(c, x, dims), s, dims)}, kStats);
  flat::ValueId var = mean_of(c, c.ew(EwOp::kMul, {centered, centered}, kStats), dims);
  return c.ew(EwOp::kMul, {centered, inverse_root(c, var, s, dims)}, kStats);
}

// --- LayerNorm and RMSNorm: over attrs.dims (the trailing dims), then weight (and bias) --------

Status infer_trailing_norm(InferCtx& ctx) {
  const std::string& what = ctx.node.def->display;
  const Shape& x = ctx.shape(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t>& dims = ctx.node.attrs.dims;
  const int64_t k = static_cast<int64_t>(dims.size());
  if (k < 1 || k > rank)
    return ctx.error(what + " normalises " + std::to_string(k) + " dims of a rank " + std::to_string(rank) + " input.");
  for (int64_t j = 0; j < k; ++j) {
    TRIPY_ASSIGN_OR_RETURN(dims[j], normalize_dim(ctx, dims[j], rank));
    if (dims[j] != rank - k + j)
      return ctx.error(what + " normalises the trailing dims of its input, in order; got dims " + dims_str(dims) + ".");
  }
  for (size_t i = 1; i < ctx.in().size(); ++i) {
    const Shape& p = ctx.shape(static_cast<int>(i));
    bool match = static_cast<int64_t>(p.size()) == k;
    for (int64_t j = 0; match && j < k; ++j) match = p[j].same_as(x[rank - k + j]);
    if (!match)
      return ctx.error(what + "'s " + std::string(i == 1 ? "weight" : "bias") + " has shape " + shape_str(p) +
                       ", but the input's normalized dims are " + shape_str(Shape(x.end() - k, x.end())) + ".");
  }
  ctx.node.dtype = ctx.in()[0]->dtype;
  ctx.node.shape = x;
  return ok_status();
}

flat::ValueId affine(LowerCtx& c, flat::ValueId normed, flat::ValueId weight, flat::ValueId bias,
                     const std::string& what) {
  const Shape s = c.value(normed).shape;
  flat::ValueId w = c.broadcast_to(widen(c, weight), s, "broadcast " + what + "'s weight over the other dims");
  flat::ValueId y = c.ew(EwOp::kMul, {normed, w}, kStats);
  if (bias < 0) return y;
  flat::ValueId b = c.broadcast_to(widen(c, bias), s, "broadcast " + what + "'s bias over the other dims");
  return c.ew(EwOp::kAdd, {y, b}, kStats);
}

StatusOr<flat::ValueId> lower_layernorm(LowerCtx& c) {
  flat::ValueId x = widen(c, c.in(0));
  flat::ValueId y = affine(c, standardize(c, x, c.node().attrs.dims), c.in(1), c.in(2), "LayerNorm");
  return narrow_to(c, y, c.node().dtype);
}

// x / sqrt(mean(x^2) + eps) * weight: no centering, no bias.
//
// x^2 overflows float32 once |x| passes 1.8e19 (the sum of the squares sooner), and underflows
// below 1e-19, though the result is never larger than sqrt(n). So the mean square is also taken
// of x * 2^-96, in the same pass over the row (a power of two scales exactly, and no float32
// square of it overflows), and a row whose plain mean square is not finite is normalised with
// that one. When eps is too small to hide a mean square in the subnormals (eps = 0), a row whose
// plain mean square is below float32's normal range uses x * 2^100 likewise. A row scaled by 2^e
// computes (x * 2^(e/2)) * (rsqrt(mean((x * 2^e)^2) + eps * 2^(2e)) * 2^(e/2)), both factors
// normal floats; every other row gets x * 1 * rsqrt(mean(x^2) + eps), bit for bit the plain
// formula. (Scaling by the row's max |x| would need a second pass after a max reduction.) An inf
// or NaN in the row makes every mean square so and the result NaN, as numpy's.
StatusOr<flat::ValueId> lower_rmsnorm(LowerCtx& c) {
  flat::ValueId x = widen(c, c.in(0));
  const Shape s = c.value(x).shape;
  const std::vector<int64_t>& dims = c.node().attrs.dims;
  const double eps = c.node().attrs.eps;
  auto full_constant = [&](double v) { return c.broadcast_to(c.scalar(v, kStats), s, ""); };
  auto mean_square = [&](int e) {
    flat::ValueId y = e == 0 ? x : c.ew(EwOp::kMul, {x, full_constant(std::ldexp(1.0, e))}, kStats);
    return mean_of(c, c.ew(EwOp::kMul, {y, y}, kStats), dims);
  };
  flat::ValueId plain = mean_square(0);
  const Shape rows = c.value(plain).shape;
  auto row_constant = [&](double v) { return c.broadcast_to(c.scalar(v, kStats), rows, ""); };
  auto root = [&](flat::ValueId square, int e) {
    flat::ValueId r = c.ew(EwOp::kRsqrt, {c.ew(EwOp::kAdd, {square, row_constant(std::ldexp(eps, 2 * e))}, kStats)}, kStats);
    return e == 0 ? r : c.ew(EwOp::kMul, {r, row_constant(std::ldexp(1.0, e / 2))}, kStats);
  };
  flat::ValueId pre = row_constant(1.0), factor = root(plain, 0);
  auto use_where = [&](flat::ValueId rows_to_scale, int e) {
    pre = c.ew(EwOp::kSelect, {rows_to_scale, row_constant(std::ldexp(1.0, e / 2)), pre}, kStats);
    factor = c.ew(EwOp::kSelect, {rows_to_scale, root(mean_square(e), e), factor}, kStats);
  };
  use_where(c.ew(EwOp::kGe, {plain, row_constant(HUGE_VAL)}, DType::kBool), -96);
  if (eps < std::ldexp(1.0, -100)) use_where(c.ew(EwOp::kLt, {plain, row_constant(std::ldexp(1.0, -126))}, DType::kBool), 100);
  flat::ValueId scaled = c.ew(EwOp::kMul, {x, unreduce(c, pre, s, dims)}, kStats);
  flat::ValueId normed = c.ew(EwOp::kMul, {scaled, unreduce(c, factor, s, dims)}, kStats);
  return narrow_to(c, affine(c, normed, c.in(1), -1, "RMSNorm"), c.node().dtype);
}

// --- GroupNorm and InstanceNorm: over groups of channels of (N, C, spatial...) ------------------

// groupnorm: attrs.groups groups of C / groups channels each; instancenorm: one group per channel.
// The weight and bias (each (C,)) say C.
int64_t group_count(const Node& node) {
  return node.def->name == "instancenorm" ? node.inputs[1]->shape[0].static_value() : node.attrs.groups;
}

Status infer_group_norm(InferCtx& ctx) {
  const std::string& what = ctx.node.def->display;
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  if (w.size() != 1 || !w[0].is_static() || !same_shape(ctx.shape(2), w))
    return ctx.error(what + ": the weight and bias must both have shape (C,), but they have shapes " + shape_str(w) +
                     " and " + shape_str(ctx.shape(2)) + ".");
  const int64_t channels = w[0].static_value();
  if (x.size() < 2 || (x[1].is_static() && x[1].static_value() != channels))
    return ctx.error(what + " expects an input of shape (N, " + std::to_string(channels) + ", ...), but got shape " +
                     shape_str(x, ctx.node.symbols.get()) + ".");
  const int64_t groups = group_count(ctx.node);
  if (groups < 1 || channels % groups != 0)
    return ctx.error(what + ": num_channels (" + std::to_string(channels) + ") must be divisible by num_groups (" +
                     std::to_string(groups) + ").");
  ctx.node.dtype = ctx.in()[0]->dtype;
  ctx.node.shape = x;
  return ok_status();
}

// The channels of each sample fold into (N, groups, rest): one row per group, which fusion runs
// as a row reduction.
StatusOr<flat::ValueId> lower_group_norm(LowerCtx& c) {
  const std::string& what = c.node().def->display;
  flat::ValueId x = widen(c, c.in(0));
  const Shape s = c.value(x).shape;
  const int64_t channels = c.value(c.in(1)).shape[0].static_value();
  const int64_t groups = group_count(c.node());
  c.check_equal(s[1], Dim(channels), what + " expects " + std::to_string(channels) + " channels (dimension 1).");
  Dim rest = Dim(channels / groups);
  for (size_t d = 2; d < s.size(); ++d) rest = rest * s[d];
  flat::ValueId rows = c.reshape(x, {s[0], Dim(groups), rest}, what + " gathers each group of channels into a row");
  flat::ValueId normed = c.reshape(standardize(c, rows, {2}), s);
  // The (C,) weight and bias as (C, 1, ...), to broadcast over the spatial dims.
  Shape per_channel(s.size() - 1, Dim(1));
  per_channel[0] = Dim(channels);
  flat::ValueId w = c.reshape(c.in(1), per_channel, "align " + what + "'s weight with the channel dim");
  flat::ValueId b = c.reshape(c.in(2), per_channel, "align " + what + "'s bias with the channel dim");
  return narrow_to(c, affine(c, normed, w, b, what), c.node().dtype);
}

}  // namespace

void register_norm_ops() {
  // dims: the normalized (trailing) dims; groups: GroupNorm's channel groups; value: eps.
  constexpr AttrSet kTrailing = attr::dims | attr::eps, kGroups = attr::groups | attr::eps;
  register_op({"layernorm", "LayerNorm", 3, 3, {kFloats}, true, infer_trailing_norm, lower_layernorm, kTrailing,
               kTrailing});
  register_op({"rmsnorm", "RMSNorm", 2, 2, {kFloats}, true, infer_trailing_norm, lower_rmsnorm, kTrailing, kTrailing});
  register_op({"groupnorm", "GroupNorm", 3, 3, {kFloats}, true, infer_group_norm, lower_group_norm, kGroups, kGroups});
  register_op({"instancenorm", "InstanceNorm", 3, 3, {kFloats}, true, infer_group_norm, lower_group_norm,
               attr::eps, attr::eps});
}

}  // namespace tripy::trace

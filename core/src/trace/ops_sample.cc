// The sample Trace op (tp.sample: one token drawn per row of logits): its checks, its shape rule
// and its lowering to one FlatIR kernel op of kind sample (rt::SampleAttrs, whose comment gives the
// rule both backends compute). The key is a tensor read when the kernel runs, so a decode loop
// draws anew each step without compiling again; the leading dims and the vocabulary may be dynamic.
#include <cmath>
#include <cstdio>
#include <string>

#include "trace/op_def.h"

namespace tripy::trace {
namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

Status infer_sample(InferCtx& ctx) {
  const rt::SampleAttrs& a = ctx.node.attrs.sample;
  if (!std::isfinite(a.temperature) || a.temperature < 0)
    return ctx.error("sample: temperature must be a finite number >= 0 (0 draws the most likely token), but got " +
                     number(a.temperature) + ".");
  if (a.top_k < 0)
    return ctx.error("sample: top_k must be >= 0 (0 keeps every token), but got " + std::to_string(a.top_k) + ".");
  if (!(a.top_p > 0 && a.top_p <= 1))
    return ctx.error("sample: top_p must be in (0, 1] (1 keeps every token), but got " + number(a.top_p) + ".");
  const Shape& x = ctx.shape(0);
  if (x.empty()) return ctx.error("sample: the logits must have rank >= 1 (a vocabulary dim last), but got a scalar.");
  // The vocabulary at its smallest and largest over the compiled range.
  const Dim& v = x.back();
  const SymbolTable* table = ctx.node.symbols.get();
  const int64_t fewest = v.is_static() ? v.static_value() : table ? v.lower_bound(*table) : 1;
  const int64_t most = v.is_static() ? v.static_value() : table ? v.upper_bound(*table) : rt::kMaxSampleVocab;
  if (fewest < 1 || most > rt::kMaxSampleVocab)
    return ctx.error("sample: the logits' last dim (the vocabulary) must be in [1, " +
                     std::to_string(rt::kMaxSampleVocab) + "], but it is " + v.str(table) +
                     (v.is_static() ? "" : " with bounds [" + std::to_string(fewest) + ", " + std::to_string(most) + "]") +
                     ".");
  const Shape& key = ctx.shape(1);
  if (key.size() != 1 || (key[0].is_static() && key[0].static_value() != 1))
    return ctx.error("sample: the key must be an int64 tensor of shape (1,), but it has shape " + shape_str(key, table) + ".");
  ctx.node.shape = Shape(x.begin(), x.end() - 1);
  ctx.node.dtype = DType::kInt32;
  return ok_status();
}

StatusOr<flat::ValueId> lower_sample(LowerCtx& c) {
  c.check_equal(c.value(c.in(1)).shape[0], Dim(1), "sample: the key must have shape (1,).");
  flat::Op op;
  op.kind = flat::OpKind::kKernel;
  op.kernel.kind = rt::KernelKind::kSample;
  op.kernel.sample = c.node().attrs.sample;
  op.operands = {c.in(0), c.in(1)};
  return c.emit(std::move(op), DType::kInt32, c.node().shape);
}

}  // namespace

void register_sample_ops() {
  register_op({"sample", "sample", 2, 2, {kFloats, dtype_bit(DType::kInt64)}, false, infer_sample, lower_sample,
               attr::sample, 0});
}

}  // namespace tripy::trace

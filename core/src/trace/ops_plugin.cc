// tp.plugin as a Trace op: a call of a registered plugin (tripy/plugin.h). The Python frontend
// runs the plugin's shape/dtype rule and hands over the result's shape and dtype; here the plugin
// must be registered (checked at the user's line) and its device code is copied into the op, so
// the Program carries it and a saved GPU executable needs no registry. It lowers to one FlatIR
// plugin op, which no pass looks into and which becomes one kernel.
#include "tripy/plugin.h"
#include "trace/op_def.h"

namespace tripy::trace {
namespace {

std::string known_plugins() {
  std::string out;
  for (const std::string& key : plugin_keys()) out += (out.empty() ? "" : ", ") + key;
  return out.empty() ? "none" : out;
}

Status infer_plugin(InferCtx& ctx) {
  rt::PluginAttrs& p = ctx.node.attrs.plugin;
  const PluginDef* def = find_plugin(p.name);
  if (def == nullptr)
    return ctx.error("tp.plugin: no plugin is registered as '" + p.name + "'. Registered plugins: " + known_plugins() +
                     ". Register it with tp.register_plugin first.");
  if (ctx.in().size() > rt::kMaxPluginInputs)
    return ctx.error("tp.plugin: a plugin takes at most " + std::to_string(rt::kMaxPluginInputs) + " inputs, but got " +
                     std::to_string(ctx.in().size()) + ".");
  for (size_t i = 0; i < ctx.in().size(); ++i)
    if (ctx.shape(static_cast<int>(i)).size() > rt::kMaxPluginRank)
      return ctx.error("tp.plugin: input " + std::to_string(i) + " has rank " + std::to_string(ctx.shape(static_cast<int>(i)).size()) +
                       "; plugins take tensors of rank <= " + std::to_string(rt::kMaxPluginRank) + ".");
  if (ctx.node.attrs.shape.size() > rt::kMaxPluginRank)
    return ctx.error("tp.plugin: the output's rank must be <= " + std::to_string(rt::kMaxPluginRank) + ".");
  for (const Dim& d : ctx.node.attrs.shape)
    if (d.is_static() && d.static_value() < 0)
      return ctx.error("tp.plugin: the rule gave the output the shape " + shape_str(ctx.node.attrs.shape) +
                       ", which has a negative size.");
  p.cuda_source = def->cuda_source;
  p.cuda_entry = def->cuda_entry;
  p.block = def->block;
  ctx.node.shape = ctx.node.attrs.shape;
  ctx.node.dtype = ctx.node.attrs.dtype;
  return ok_status();
}

StatusOr<flat::ValueId> lower_plugin(LowerCtx& c) {
  flat::Op op;
  op.kind = flat::OpKind::kPlugin;
  op.plugin = c.node().attrs.plugin;
  for (size_t i = 0; i < c.node().inputs.size(); ++i) op.operands.push_back(c.in(static_cast<int>(i)));
  return c.emit(std::move(op), c.node().dtype, c.node().shape);
}

}  // namespace

void register_plugin_ops() {
  OpDef d;
  d.name = "plugin";
  d.display = "tp.plugin";
  d.min_inputs = 0;
  d.max_inputs = 1 << 20;  // the rule above names the real limit
  d.same_dtype = false;
  d.infer = infer_plugin;
  d.lower = lower_plugin;
  d.attrs = attr::plugin | attr::dtype | attr::shape;
  d.required = d.attrs;
  register_op(std::move(d));
}

}  // namespace tripy::trace

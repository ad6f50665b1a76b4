// compile_graph: the compiler's back half, stage by stage, each stage dumpable for TRIPY_DEBUG.
#include "compiler/compile.h"

#include <chrono>
#include <cstdio>
#include <optional>

#include "runtime/backend.h"
#include "compiler/build_program.h"
#include "flat/passes/passes.h"
#include "runtime/executable_impl.h"

namespace tripy {
namespace {

Status verified(const flat::Graph& g, const char* stage) {
  Status st = flat::verify(g);
  if (!st.ok()) st.note(std::string("after ") + stage);
  return st;
}

// Debug builds check the IR after every pass, so a broken rewrite is caught where it happens.
Status debug_verified(const flat::Graph& g, const char* pass) {
#ifndef NDEBUG
  return verified(g, pass);
#else
  (void)g;
  (void)pass;
  return ok_status();
#endif
}

// What the passes below read: the target's rules (its builder's, rt::pass_rules_for) and what the
// sequence has done so far.
struct PassContext {
  rt::PassRules rules;
  bool dots_rewritten = false;  // split_dot_slices or pad_dot_columns changed the graph
};

// A pass of the sequence: its new graph, or nullopt where it changed nothing or does not apply.
using PassFn = StatusOr<std::optional<flat::Graph>> (*)(const flat::Graph&, PassContext&);

// Wraps a pass that always returns a graph.
template <flat::Graph (*F)(const flat::Graph&)>
StatusOr<std::optional<flat::Graph>> always(const flat::Graph& g, PassContext&) {
  return std::optional<flat::Graph>(F(g));
}

// Wraps a pass that returns nullopt when it changes nothing.
template <std::optional<flat::Graph> (*F)(const flat::Graph&)>
StatusOr<std::optional<flat::Graph>> when_changed(const flat::Graph& g, PassContext&) {
  return F(g);
}

StatusOr<std::optional<flat::Graph>> fold_constants(const flat::Graph& g, PassContext&) {
  TRIPY_ASSIGN_OR_RETURN(flat::Graph folded, flat::constant_fold(g, evaluate_constant_graph));
  return std::optional<flat::Graph>(std::move(folded));
}

// A dot rewrite leaves new slices and constants: they are folded at once, and simplify and cse
// run again after the last one (cleanup_after_dot_rewrites).
template <std::optional<flat::Graph> (*F)(const flat::Graph&)>
StatusOr<std::optional<flat::Graph>> dot_rewrite(const flat::Graph& g, PassContext& c) {
  std::optional<flat::Graph> rewritten = F(g);
  if (!rewritten) return rewritten;
  TRIPY_RETURN_IF_ERROR(debug_verified(*rewritten, "dot rewrite"));
  c.dots_rewritten = true;
  TRIPY_ASSIGN_OR_RETURN(flat::Graph folded, flat::constant_fold(*rewritten, evaluate_constant_graph));
  return std::optional<flat::Graph>(std::move(folded));
}

std::optional<flat::Graph> pad_dot_columns(const flat::Graph& g) { return flat::pad_dot_columns(g); }

StatusOr<std::optional<flat::Graph>> pad_dot_columns_where_asked(const flat::Graph& g, PassContext& c) {
  if (!c.rules.pad_dot_columns) return std::optional<flat::Graph>();
  return dot_rewrite<pad_dot_columns>(g, c);
}

StatusOr<std::optional<flat::Graph>> cleanup_after_dot_rewrites(const flat::Graph& g, PassContext& c) {
  if (!c.dots_rewritten) return std::optional<flat::Graph>();
  return std::optional<flat::Graph>(flat::cse(flat::simplify(g)));
}

// A transpose the user wrote may meet its inverse once convolutions run channels-last.
StatusOr<std::optional<flat::Graph>> channels_last(const flat::Graph& g, PassContext& c) {
  if (c.rules.channels_last_dtypes.empty()) return std::optional<flat::Graph>();
  std::optional<flat::Graph> last =
      flat::channels_last(g, flat::ChannelsLastRule{c.rules.channels_last_dtypes, c.rules.channels_last_min_chain});
  if (!last) return last;
  TRIPY_RETURN_IF_ERROR(debug_verified(*last, "channels_last"));
  return std::optional<flat::Graph>(flat::simplify(*last));
}

StatusOr<std::optional<flat::Graph>> quantized_dot(const flat::Graph& g, PassContext& c) {
  if (!flat::converts_low_precision(g)) return std::optional<flat::Graph>();
  const rt::LowPrecisionGemms q = c.rules.low_precision_gemms();
  if (!q.int8 && !q.float8) return std::optional<flat::Graph>();
  // The weight-only product takes the decode-sized int8 dots only where it is on.
  const int64_t weight_only_rows = c.rules.weight_only_dot_max_rows == 0 ? 0 : q.int8_weight_only_rows;
  return flat::quantized_dot(
      g, flat::QuantizedDotRules{q.int8, q.float8, q.weight_nk, q.int8_multiple, q.float8_multiple, weight_only_rows});
}

// With the product off (max_rows 0) the pass still gives each dequantize its form by groups.
StatusOr<std::optional<flat::Graph>> weight_only_dot(const flat::Graph& g, PassContext& c) {
  return flat::weight_only_dot(g, c.rules.weight_only_dot_max_rows);
}

StatusOr<std::optional<flat::Graph>> gated_weight_only_dot(const flat::Graph& g, PassContext& c) {
  return flat::gated_weight_only_dot(g, c.rules.weight_only_fold);
}

StatusOr<std::optional<flat::Graph>> normed_weight_only_dot(const flat::Graph& g, PassContext& c) {
  return flat::normed_weight_only_dot(g, c.rules.weight_only_fold);
}

StatusOr<std::optional<flat::Graph>> residual_weight_only_dot(const flat::Graph& g, PassContext& c) {
  return flat::residual_weight_only_dot(g, c.rules.weight_only_fold);
}

StatusOr<std::optional<flat::Graph>> gate_weight_only_output(const flat::Graph& g, PassContext& c) {
  return flat::gate_weight_only_output(g, c.rules.weight_only_fold);
}

// The optimising passes, in order (optimization_level >= 1). Each row names a pass for the timing
// dump and the verifier's notes; where a pass applies is its own function's business.
struct PassRow {
  const char* name;
  PassFn run;
};
const PassRow kPasses[] = {
    {"constant_fold", fold_constants},
    {"sink_unit_reshapes", when_changed<flat::sink_unit_reshapes>},
    {"simplify", always<flat::simplify>},
    {"cse", always<flat::cse>},
    // Attention first: its operands may be slices of one projection, which it reads in place and
    // which split_dot_slices would otherwise turn into one GEMM per slice.
    {"match_attention", when_changed<flat::match_attention>},
    {"fold_attention_layouts", when_changed<flat::fold_attention_layouts>},
    {"unit_transposes", when_changed<flat::unit_transposes_to_reshapes>},
    {"fold_update_windows", when_changed<flat::fold_update_windows>},
    {"split_dot_slices", dot_rewrite<flat::split_dot_slices>},
    {"pad_dot_columns", pad_dot_columns_where_asked},
    {"simplify and cse", cleanup_after_dot_rewrites},
    {"fold_conv_affine", when_changed<flat::fold_conv_affine>},
    {"merge_conv_biases", when_changed<flat::merge_conv_biases>},
    {"channels_last", channels_last},
    // Last: nothing after it may fold the weight transpose it adds for cuBLASLt back into a constant.
    {"quantized_dot", quantized_dot},
    {"weight_only_dot", weight_only_dot},
    {"gated_weight_only_dot", gated_weight_only_dot},
    // A Llama layer's add + RMSNorm kernels leave: the norm into the next product, the add into
    // the product before it.
    {"normed_weight_only_dot", normed_weight_only_dot},
    {"residual_weight_only_dot", residual_weight_only_dot},
    // Where the down product did not take the SwiGLU's gate (gated_weight_only_dot), the gate_up
    // product may write it.
    {"gate_weight_only_output", gate_weight_only_output},
};

// The "kernels" dump: each kernel in launch order with the user line it came from, then the
// source of the kernels the device generates (none on the CPU, whose fused kernels the "program"
// dump shows).
std::string kernels_str(const rt::Program& program, rt::Builder& builder) {
  std::string text;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const rt::Kernel& k = program.kernels[i];
    text += "k" + std::to_string(i) + " " + rt::kernel_kind_name(k.kind) + " '" + k.name + "'";
    if (k.source >= 0 && static_cast<size_t>(k.source) < program.sources.size() && !program.sources[k.source].empty()) {
      const SourceFrame& f = program.sources[k.source].front();
      text += " from " + f.file + ":" + std::to_string(f.line) + " (" + f.function + ")";
    }
    text += "\n";
  }
  StatusOr<std::vector<std::string>> sources = builder.kernel_sources(program);
  if (sources.ok())
    for (const std::string& source : sources.value()) text += "\n" + source + "\n";
  return text;
}

}  // namespace

StatusOr<Tensor> evaluate_constant_graph(const flat::Graph& graph) {
  TRIPY_ASSIGN_OR_RETURN(rt::Program program, compiler::build_program(graph));
  rt::Backend* cpu = rt::backend_for(Device::Kind::kCpu);
  if (!cpu) return Status(StatusCode::kUnavailable, "constant folding needs the CPU backend");
  auto shared = std::make_shared<const rt::Program>(std::move(program));
  rt::Builder* builder = rt::builder_for(Device::Kind::kCpu);
  if (!builder) return Status(StatusCode::kUnavailable, "constant folding needs the CPU builder");
  TRIPY_ASSIGN_OR_RETURN(rt::Artifacts artifacts, builder->build(*shared, rt::BuildOptions{}));
  TRIPY_ASSIGN_OR_RETURN(std::unique_ptr<rt::LoadedProgram> loaded, cpu->load(shared, artifacts));
  std::vector<int64_t> slots;
  shared->eval_shapes({}, slots);
  TRIPY_ASSIGN_OR_RETURN(std::vector<Tensor> out, loaded->run({}, slots));
  if (out.size() != 1) return internal_error("constant folding: expected one result");
  return out[0];
}

StatusOr<Executable> compile_graph(flat::Graph graph, const CompileOptions& options) {
  // Text is only formatted when someone asked for it: eager mode compiles often.
  auto dump = [&](const char* stage, const auto& text) {
    if (options.wants(stage)) options.dump(stage, text());
  };
  dump("flat", [&] { return graph.str(); });
  // The device's one-time set-up (code every build needs; for graphs whose build will time GEMMs
  // or convolutions, their libraries' first load) runs beside the passes.
  if (rt::Builder* early = rt::builder_for(options.device.kind); early && options.optimization_level >= 1) {
    rt::Builder::Tunes tunes;
    for (const flat::Op& op : graph.ops) {
      tunes.gemms = tunes.gemms || op.kind == flat::OpKind::kDot;
      tunes.convolutions = tunes.convolutions || op.kind == flat::OpKind::kConvolution;
    }
    early->prepare(tunes);
  }
  // Where a compile's time goes, stage by stage: the "timing" dump.
  std::string timings;
  auto since = std::chrono::steady_clock::now();
  auto lap = [&](const char* stage, double seconds = -1) {
    const auto now = std::chrono::steady_clock::now();
    if (seconds < 0) seconds = std::chrono::duration<double>(now - since).count();
    char line[96];
    std::snprintf(line, sizeof line, "  %-24s %8.1f ms\n", stage, 1e3 * seconds);
    timings += line;
    since = now;
  };
  if (options.lowering_seconds > 0) lap("lowering", options.lowering_seconds);
  auto after_pass = [&](const flat::Graph& g, const char* pass) {
    lap(pass);
    return debug_verified(g, pass);
  };
  TRIPY_RETURN_IF_ERROR(verified(graph, "lowering"));
  if (options.optimization_level > 0) {
    PassContext context{rt::pass_rules_for(options.device.kind)};
    for (const PassRow& pass : kPasses) {
      TRIPY_ASSIGN_OR_RETURN(std::optional<flat::Graph> changed, pass.run(graph, context));
      if (changed) graph = std::move(*changed);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, pass.name));
    }
  }
  graph = flat::dce(graph);
  if (std::optional<flat::Graph> sunk = flat::sink_elementwise(graph)) graph = std::move(*sunk);
  dump("flat.optimized", [&] { return graph.str(); });
  TRIPY_RETURN_IF_ERROR(verified(graph, "optimisation"));
  lap("dce and verify");

  compiler::BuildProgramOptions build_program_options;
  build_program_options.output_names = options.output_names;
  build_program_options.donated_inputs = options.donated_inputs;
  build_program_options.device = options.device;
  if (options.wants("fusion")) build_program_options.dump_fusion = [&](const std::string& text) { options.dump("fusion", text); };
  TRIPY_ASSIGN_OR_RETURN(rt::Program program, compiler::build_program(graph, build_program_options));
  dump("program", [&] { return compiler::program_str(program); });
  if (Status st = rt::validate_program(program); !st.ok()) {
    return internal_error("the compiler built an inconsistent program: " + st.message());
  }
  lap("program");

  rt::Backend* backend = rt::backend_for(options.device.kind);
  if (backend == nullptr || !backend->available()) {
    return Status(StatusCode::kUnavailable,
                  "no backend for " + options.device.str() + " in this build or on this machine");
  }
  rt::Builder* builder = rt::builder_for(options.device.kind);
  if (builder == nullptr) {
    return Status(StatusCode::kUnavailable, "no builder for " + options.device.str() + " linked into this program");
  }
  rt::BuildOptions build_options;
  build_options.optimization_level = options.optimization_level;
  TRIPY_ASSIGN_OR_RETURN(rt::Artifacts artifacts, builder->build(program, build_options));
  lap("build");  // (the backend loads the artifacts at the first call)
  dump("kernels", [&] { return kernels_str(program, *builder); });
  dump("timing", [&] { return timings; });
  return make_executable(std::make_shared<const rt::Program>(std::move(program)), std::move(artifacts),
                         options.device);
}

}  // namespace tripy

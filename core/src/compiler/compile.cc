// compile_graph: the compiler's back half, stage by stage, each stage dumpable for TRIPY_DEBUG.
#include "compiler/compile.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Which convolutions run channels-last (nullopt: none). GPUs: the narrow-float ones (tensor cores
// want NHWC). CPU: float32 chains of three or more convolutions: oneDNN's float32 kernels read
// NHWC, and a chain then changes layout twice in all instead of twice per convolution (ResNet-50
// B1, 2 cores: 31 ms against 44 ms), but a lone convolution's two transposes cost more than
// oneDNN's own reorders. TRIPY_CHANNELS_LAST=1 (or kAll) takes every float convolution on every
// device, so tests run the channels-last kernels on the CPU too.
std::optional<flat::ChannelsLastRule> channels_last_rule(const CompileOptions& o) {
  using C = CompileOptions::ChannelsLast;
  C choice = o.channels_last;
  if (choice == C::kAuto) {
    const char* env = std::getenv("TRIPY_CHANNELS_LAST");
    if (env && std::strcmp(env, "0") == 0) choice = C::kOff;
    if (env && std::strcmp(env, "1") == 0) choice = C::kAll;
  }
  if (choice == C::kOff) return std::nullopt;
  if (choice == C::kAll) return flat::ChannelsLastRule{{DType::kFloat16, DType::kBFloat16, DType::kFloat32}, 1};
  if (o.device.kind == Device::Kind::kGpu) return flat::ChannelsLastRule{};
  return flat::ChannelsLastRule{{DType::kFloat32}, 3};
}

// The low-precision GEMMs the target device runs (TRIPY_QUANTIZED_DOT=0: none, so dequantize and
// a float GEMM run as written, for comparison).
std::optional<flat::QuantizedDotRules> quantized_dot_rules(const CompileOptions& o) {
  const char* env = std::getenv("TRIPY_QUANTIZED_DOT");
  if (env && std::strcmp(env, "0") == 0) return std::nullopt;
  rt::Backend* backend = rt::backend_for(o.device.kind);
  if (backend == nullptr || !backend->available()) return std::nullopt;
  const rt::LowPrecisionGemms g = backend->low_precision_gemms();
  if (!g.int8 && !g.float8) return std::nullopt;
  return flat::QuantizedDotRules{g.int8, g.float8, g.weight_nk, g.int8_multiple, g.float8_multiple};
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
    if (options.dump) options.dump(stage, text());
  };
  dump("flat", [&] { return graph.str(); });
  // The device's one-time set-up (code every build needs; for graphs whose build will time GEMMs
  // or convolutions, their libraries' first load) runs beside the passes.
  if (rt::Builder* early = rt::builder_for(options.device.kind); early && options.optimization_level >= 1) {
    bool tunes = false;
    for (const flat::Op& op : graph.ops)
      tunes = tunes || op.kind == flat::OpKind::kDot || op.kind == flat::OpKind::kConvolution;
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
    TRIPY_ASSIGN_OR_RETURN(graph, flat::constant_fold(graph, evaluate_constant_graph));
    TRIPY_RETURN_IF_ERROR(after_pass(graph, "constant_fold"));
    graph = flat::simplify(graph);
    TRIPY_RETURN_IF_ERROR(after_pass(graph, "simplify"));
    graph = flat::cse(graph);
    TRIPY_RETURN_IF_ERROR(after_pass(graph, "cse"));
    // Attention first: its operands may be slices of one projection, which it reads in place and
    // which split_dot_slices would otherwise turn into one GEMM per slice.
    if (std::optional<flat::Graph> matched = flat::match_attention(graph)) {
      graph = std::move(*matched);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "match_attention"));
    }
    if (std::optional<flat::Graph> folded = flat::fold_attention_layouts(graph)) {
      graph = std::move(*folded);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "fold_attention_layouts"));
    }
    bool rewrote_dots = false;
    if (std::optional<flat::Graph> split = flat::split_dot_slices(graph)) {
      TRIPY_RETURN_IF_ERROR(after_pass(*split, "split_dot_slices"));
      TRIPY_ASSIGN_OR_RETURN(graph, flat::constant_fold(*split, evaluate_constant_graph));
      rewrote_dots = true;
    }
    // cuBLASLt's fast kernels need aligned rows; oneDNN does not care, so the CPU skips the copy.
    if (options.device.kind == Device::Kind::kGpu)
      if (std::optional<flat::Graph> padded = flat::pad_dot_columns(graph)) {
        TRIPY_RETURN_IF_ERROR(after_pass(*padded, "pad_dot_columns"));
        TRIPY_ASSIGN_OR_RETURN(graph, flat::constant_fold(*padded, evaluate_constant_graph));
        rewrote_dots = true;
      }
    if (rewrote_dots) {  // their new slices and constants may simplify or repeat
      graph = flat::simplify(graph);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "simplify"));
      graph = flat::cse(graph);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "cse"));
    }
    if (std::optional<flat::Graph> folded = flat::fold_conv_affine(graph)) {
      graph = std::move(*folded);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "fold_conv_affine"));
    }
    if (std::optional<flat::Graph> merged = flat::merge_conv_biases(graph)) {
      graph = std::move(*merged);
      TRIPY_RETURN_IF_ERROR(after_pass(graph, "merge_conv_biases"));
    }
    if (const std::optional<flat::ChannelsLastRule> rule = channels_last_rule(options))
      if (std::optional<flat::Graph> last = flat::channels_last(graph, *rule)) {
        TRIPY_RETURN_IF_ERROR(after_pass(*last, "channels_last"));
        graph = flat::simplify(*last);  // a transpose the user wrote may now meet its inverse
        TRIPY_RETURN_IF_ERROR(after_pass(graph, "simplify"));
      }
    // Last: nothing after it may fold the weight transpose it adds for cuBLASLt back into a constant.
    if (std::optional<flat::QuantizedDotRules> rules = quantized_dot_rules(options))
      if (std::optional<flat::Graph> quantized = flat::quantized_dot(graph, *rules)) {
        graph = std::move(*quantized);
        TRIPY_RETURN_IF_ERROR(after_pass(graph, "quantized_dot"));
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
  if (options.dump) build_program_options.dump_fusion = [&](const std::string& text) { options.dump("fusion", text); };
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
  dump("timing", [&] { return timings; });
  return make_executable(std::make_shared<const rt::Program>(std::move(program)), std::move(artifacts),
                         options.device);
}

}  // namespace tripy

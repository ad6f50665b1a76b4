// Eager evaluation and tp.compile's entry. Eager subgraphs are cached (eager_cache.h: ops, attrs,
// dtypes, shapes; evaluated tensors are runtime inputs), so a repeated pattern costs one lookup.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "compiler/eager.h"
#include "compiler/eager_cache.h"
#include "runtime/backend.h"
#include "runtime/executable_impl.h"
#include "runtime/gpu_scope.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::compiler {

using trace::Lowered;
using trace::LowerMode;
using trace::Node;
using trace::NodeRef;

// Evaluation writes a node's value and detaches its inputs, which other evaluations of the same
// graph read: one evaluation at a time (compiled executables, which most of the time goes to,
// are not held by it: they run concurrently through Executable::run). Re-entrant: a plugin's CPU
// implementation runs inside an evaluation and may evaluate tensors of its own (print one, call
// tolist()); by then the outer evaluation has read the graph it needs, so the nested one cannot
// disturb it.
std::recursive_mutex g_evaluate_mu;

namespace {

// What this thread is evaluating and running, outermost first: a nested evaluation (from a
// plugin's CPU implementation) must not wait for either to finish.
thread_local std::vector<const Node*> t_evaluating;
thread_local std::vector<const Executable::Impl*> t_running;
// Scratch a cached eager program keeps between runs (release_executable_scratch).
constexpr int64_t kEagerScratchKept = int64_t{16} << 20;

template <typename T>
struct Pushed {
  Pushed(std::vector<T>& stack, T item) : stack_(stack) { stack_.push_back(item); }
  ~Pushed() { stack_.pop_back(); }
  std::vector<T>& stack_;
};

template <typename T>
bool contains(const std::vector<T>& v, const T& item) {
  return std::find(v.begin(), v.end(), item) != v.end();
}

// TRIPY_DEBUG for eager evaluation (options.dump set): which tensor is evaluated and where.
std::string eager_header(const Node& node) {
  std::string where;
  if (node.source && !node.source->empty()) {
    const SourceFrame& f = node.source->front();
    where = " at " + f.file + ":" + std::to_string(f.line) + " (" + f.function + ")";
  }
  return "evaluating " + node.describe() + where;
}

// The "eager.timing" dump: the compile (or cache hit) and each kernel's milliseconds.
std::string eager_timing(const Node& node, const Executable& exe, double compile_ms, const std::vector<double>& kernel_ms) {
  char line[160];
  std::string text = eager_header(node) + "\n";
  if (compile_ms < 0) text += "  compiled                  cached\n";
  else std::snprintf(line, sizeof line, "  compiled            %10.3f ms\n", compile_ms), text += line;
  double total = 0;
  const auto& kernels = exe.impl()->program()->kernels;
  for (size_t i = 0; i < kernels.size() && i < kernel_ms.size(); ++i) {
    std::snprintf(line, sizeof line, "  kernel %-3zu %-6s %-24s %10.4f ms\n", i, rt::kernel_kind_name(kernels[i].kind),
                  kernels[i].name.c_str(), kernel_ms[i]);
    text += line;
    total += kernel_ms[i];
  }
  std::snprintf(line, sizeof line, "  ran                 %10.4f ms\n", total);
  return text + line;
}

// evaluate() with g_evaluate_mu held.
Status evaluate_locked(const NodeRef& node, const CompileOptions& options) {
  if (node->evaluated()) return ok_status();
  if (contains(t_evaluating, static_cast<const Node*>(node.get())))
    return invalid_argument("This tensor is read while it is being computed: a plugin's CPU implementation reads the "
                            "output of the call that runs it (directly or through a tensor computed from it), "
                            "which would never finish.",
                            node->source);
  const EagerKey key = eager_key(node, options.device);
  Executable exe = find_eager(key, *node, options.device);
  // The cached program of a graph like this one may be running on this thread right now (a plugin
  // evaluating a call of itself on other values): it runs one call at a time, so compile another.
  const Executable::Impl* hit = exe.impl().get();
  const bool busy = hit != nullptr && contains(t_running, hit);
  const bool cached = hit != nullptr && !busy;
  double compile_ms = -1;
  if (!cached) {
    const auto start = std::chrono::steady_clock::now();
    if (options.wants("eager")) options.dump("eager", eager_header(*node) + "\n" + trace::trace_str({node}));
    TRIPY_ASSIGN_OR_RETURN(Lowered lowered, trace::lower_to_flat({node}, LowerMode::kEager));
    auto compiled = compile_graph(std::move(lowered.graph), options);
    if (!compiled.ok()) {
      Status st = compiled.status();
      return st.at(node->source);
    }
    exe = compiled.value();
    compile_ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!busy) insert_eager(key, *node, options.device, exe);
  }
  std::vector<Tensor> inputs;
  inputs.reserve(key.leaves.size());
  for (Node* in : key.leaves) inputs.push_back(in->value);
  std::vector<double> kernel_ms;
  StatusOr<std::vector<Tensor>> out = [&] {
    Pushed<const Node*> evaluating(t_evaluating, node.get());
    Pushed<const Executable::Impl*> running(t_running, exe.impl().get());
    // Under TRIPY_DEBUG each kernel is timed (on the GPU: launched directly, not replayed).
    return options.wants("eager.timing") ? exe.run_profiled(inputs, kernel_ms) : exe.run(inputs);
  }();
  if (out.ok() && options.wants("eager.timing")) options.dump("eager.timing", eager_timing(*node, exe, compile_ms, kernel_ms));
  if (!out.ok() && !cached) {
    Status st = out.status();
    return st.at(node->source);
  }
  if (!out.ok()) {
    // A cached program's source lines are those of the first subgraph with this structure, which
    // may be another line of the program: point at the tensor being evaluated instead.
    const Status& cause = out.status();
    Status st(cause.code(), cause.message(), node->source);
    for (const ErrorNote& n : cause.notes())
      if (!n.where) st.note(n.text);
    return st;
  }
  node->value = std::move(out.value()[0]);
  // The value now stands for the whole subgraph: drop it so memory can be reclaimed.
  node->inputs.clear();
  // A cached program keeps a small arena for the next call of its op; a large one goes back to the
  // allocator (quantizing an 8B model's weights on the GPU left 4 GB of float intermediates held
  // by the programs of its four projection shapes).
  release_executable_scratch(*exe.impl(), kEagerScratchKept);
  return ok_status();
}

// Whether the subgraph producing `node` is worth computing on the host: it reads only host values
// (or none) and no compile input, and has no GEMM or convolution (which a device does far faster).
bool cheap_on_host(const NodeRef& node) {
  for (Node* n : trace::topo_order({node})) {
    if (n->input_index >= 0 || (n->evaluated() && n->value.device().kind != Device::Kind::kCpu)) return false;
    if (!n->evaluated() && n->def != nullptr && (n->def->name == "matmul" || n->def->name == "convolution"))
      return false;
  }
  return true;
}

Status evaluate_parameter_locked(const NodeRef& node, const CompileOptions& options) {
  rt::Backend* device = rt::backend_for(node->device.kind);
  if (node->evaluated() || node->device.kind == Device::Kind::kCpu || device == nullptr || !cheap_on_host(node))
    return evaluate_locked(node, options);
  CompileOptions host = options;
  host.device = Device{};
  // Not on the CPU (a plugin with GPU code only): the device reports what it makes of it.
  if (!evaluate_locked(node, host).ok()) return evaluate_locked(node, options);
  StatusOr<Tensor> placed = [&] {
    rt::GpuScope on(node->device.index);
    return device->copy_from_host(node->value);
  }();
  if (!placed.ok()) {
    Status st = placed.status();
    return st.at(node->source);
  }
  node->value = std::move(placed.value());
  return ok_status();
}

// Under TRIPY_DEBUG a failing evaluation shows the graph it failed on (its inputs are still there).
Status reported(const NodeRef& node, const CompileOptions& options, Status st) {
  if (!st.ok() && options.wants("eager.failed"))
    options.dump("eager.failed", eager_header(*node) + " failed: " + st.message() + "\n" + trace::trace_str({node}));
  return st;
}

}  // namespace

std::unique_lock<std::recursive_mutex> lock_graph(bool wait) {
  return wait ? std::unique_lock<std::recursive_mutex>(g_evaluate_mu)
              : std::unique_lock<std::recursive_mutex>(g_evaluate_mu, std::try_to_lock);
}

bool reads_compile_input(const NodeRef& node) {
  if (node->input_index >= 0) return true;
  if (std::all_of(node->inputs.begin(), node->inputs.end(), [](const NodeRef& in) { return in->evaluated(); }))
    return false;
  for (Node* n : trace::topo_order({node}))
    if (n->input_index >= 0) return true;
  return false;
}

Status evaluate(const NodeRef& node, const CompileOptions& options) {
  std::lock_guard<std::recursive_mutex> evaluating(g_evaluate_mu);
  return reported(node, options, evaluate_locked(node, options));
}

Status evaluate_parameter(const NodeRef& node, const CompileOptions& options) {
  std::lock_guard<std::recursive_mutex> evaluating(g_evaluate_mu);
  return reported(node, options, evaluate_parameter_locked(node, options));
}

StatusOr<Executable> compile_trace(const std::vector<NodeRef>& outputs, const std::vector<NodeRef>& inputs,
                                   const std::vector<std::string>& output_names, const CompileOptions& options) {
  // The device's set-up that needs no graph (code every build uses) starts before lowering.
  if (rt::Builder* early = rt::builder_for(options.device.kind); early && options.optimization_level >= 1)
    early->prepare({});
  const auto start = std::chrono::steady_clock::now();
  // The trace may share nodes with another thread's evaluation: read it under the evaluation lock.
  // From the flat graph on, the compile reads only what it owns, so compiles run side by side.
  StatusOr<Lowered> lowering = [&] {
    std::lock_guard<std::recursive_mutex> reading(g_evaluate_mu);
    if (options.dump) options.dump("trace", trace::trace_str(outputs));
    return trace::lower_to_flat(outputs, LowerMode::kCompile, inputs);
  }();
  TRIPY_ASSIGN_OR_RETURN(Lowered lowered, std::move(lowering));
  CompileOptions with_names = options;
  with_names.output_names = output_names;
  with_names.lowering_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compile_graph(std::move(lowered.graph), with_names);
}

}  // namespace tripy::compiler

// Eager evaluation and tp.compile's entry. Eager subgraphs are cached by structure (ops, attrs,
// dtypes, shapes; evaluated tensors are runtime inputs), so a repeated pattern costs one lookup.
#include <list>
#include <mutex>
#include <unordered_map>

#include "trace/lower.h"

namespace tripy::trace {
namespace {

// The structural key of a lowered graph: its text plus the bytes of its constants (which are
// small: lowering only creates scalars) and the device.
std::string structural_key(const flat::Graph& g, const Device& device) {
  std::string key = device.str() + "\n" + g.str();
  for (const auto& op : g.ops) {
    if (op.kind != flat::OpKind::kConstant) continue;
    key.append(static_cast<const char*>(op.constant.data()), static_cast<size_t>(op.constant.nbytes()));
  }
  return key;
}

// A bounded LRU of compiled eager subgraphs.
class EagerCache {
 public:
  const Executable* find(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.second);
    return &it->second.first;
  }
  void insert(const std::string& key, Executable exe) {
    if (map_.size() >= kCapacity) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    map_.emplace(key, std::make_pair(std::move(exe), order_.begin()));
  }
  size_t size() const { return map_.size(); }

 private:
  static constexpr size_t kCapacity = 1024;
  std::list<std::string> order_;
  std::unordered_map<std::string, std::pair<Executable, std::list<std::string>::iterator>> map_;
};

std::mutex g_mu;
EagerCache& cache() {
  static EagerCache c;
  return c;
}

}  // namespace

size_t eager_cache_size() {
  std::lock_guard<std::mutex> lock(g_mu);
  return cache().size();
}

Status evaluate(const NodeRef& node, const CompileOptions& options) {
  if (node->evaluated()) return ok_status();
  TRIPY_ASSIGN_OR_RETURN(Lowered lowered, lower_to_flat({node}, LowerMode::kEager));
  std::string key = structural_key(lowered.graph, options.device);
  Executable exe(nullptr);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (const Executable* hit = cache().find(key)) exe = *hit;
  }
  if (!exe.impl()) {
    auto compiled = compile_graph(std::move(lowered.graph), options);
    if (!compiled.ok()) {
      Status st = compiled.status();
      return st.at(node->source);
    }
    exe = compiled.value();
    std::lock_guard<std::mutex> lock(g_mu);
    cache().insert(key, exe);
  }
  std::vector<Tensor> inputs;
  inputs.reserve(lowered.eager_inputs.size());
  for (const auto& in : lowered.eager_inputs) inputs.push_back(in->value);
  auto out = exe.run(inputs);
  if (!out.ok()) {
    Status st = out.status();
    return st.at(node->source);
  }
  node->value = std::move(out.value()[0]);
  // The value now stands for the whole subgraph: drop it so memory can be reclaimed.
  node->inputs.clear();
  return ok_status();
}

StatusOr<Executable> compile_trace(const std::vector<NodeRef>& outputs, const std::vector<NodeRef>& inputs,
                                   const std::vector<std::string>& output_names, const CompileOptions& options) {
  if (options.dump) options.dump("trace", trace_str(outputs));
  TRIPY_ASSIGN_OR_RETURN(Lowered lowered, lower_to_flat(outputs, LowerMode::kCompile, inputs));
  CompileOptions with_names = options;
  with_names.output_names = output_names;
  return compile_graph(std::move(lowered.graph), with_names);
}

}  // namespace tripy::trace

// Ordering and checking an ONNX graph (onnx_graph.h): Kahn's algorithm over the names nodes define
// and read, taking the lowest-numbered ready node first so a well-ordered file keeps its order.
#include "onnx/onnx_graph.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace tripy::onnx {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s.substr(0, 200)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out + (s.size() > 200 ? "...'" : "'");
}

std::string describe(const Node& n) { return "node " + quoted(n.name) + " (" + quoted(n.op_type) + ")"; }

}  // namespace

std::string order_graph(Graph& g, std::vector<ValueInfo>& declared, bool may_read_outer) {
  constexpr size_t kDefinedOutside = static_cast<size_t>(-1);
  std::unordered_map<std::string, size_t> producer;  // name -> node index, or kDefinedOutside
  std::unordered_set<std::string> initializers;
  for (const TensorValue& t : g.initializers) {
    if (t.name.empty()) return "an initializer has no name";
    if (!initializers.insert(t.name).second) return "the initializer " + quoted(t.name) + " is defined twice";
    producer[t.name] = kDefinedOutside;
  }
  std::unordered_set<std::string> inputs;
  g.inputs.clear();
  for (ValueInfo& v : declared) {
    if (v.name.empty()) return "a graph input has no name";
    if (!inputs.insert(v.name).second) return "the graph input " + quoted(v.name) + " is declared twice";
    if (initializers.count(v.name)) continue;  // IR version < 4 lists initializers as inputs too
    producer[v.name] = kDefinedOutside;
    g.inputs.push_back(std::move(v));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::string& out : g.nodes[i].outputs) {
      if (out.empty()) continue;
      if (!producer.emplace(out, i).second)
        return describe(g.nodes[i]) + " defines " + quoted(out) + ", which is already defined";
    }
  }
  // Each node waits for the nodes that define what it reads.
  std::vector<size_t> waiting(g.nodes.size(), 0);
  std::vector<std::vector<size_t>> readers(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::unordered_set<size_t> deps;
    for (const std::string& in : g.nodes[i].inputs) {
      if (in.empty()) continue;
      auto p = producer.find(in);
      if (p == producer.end()) {
        if (may_read_outer) continue;
        return describe(g.nodes[i]) + " reads " + quoted(in) + ", which no graph input, initializer or node defines";
      }
      if (p->second != kDefinedOutside && deps.insert(p->second).second) readers[p->second].push_back(i);
    }
    waiting[i] = deps.size();
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(g.nodes.size());
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t r : readers[i])
      if (--waiting[r] == 0) ready.push(r);
  }
  if (order.size() != g.nodes.size()) {
    std::string cycle;
    int shown = 0;
    for (size_t i = 0; i < g.nodes.size() && shown < 5; ++i)
      if (waiting[i] != 0) cycle += (shown++ ? ", " : "") + describe(g.nodes[i]);
    return "its nodes form a cycle (each waits for another's output): " + cycle;
  }
  std::vector<Node> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);
  for (const ValueInfo& out : g.outputs) {
    if (out.name.empty()) return "a graph output has no name";
    if (!producer.count(out.name) && !may_read_outer)
      return "the graph output " + quoted(out.name) + " is not defined by any graph input, initializer or node";
  }
  return "";
}

}  // namespace tripy::onnx

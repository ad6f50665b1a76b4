// libFuzzer harness: the ONNX reader (onnx/onnx_model.h) on arbitrary bytes. Any result is fine
// except a crash, a sanitizer report, or a model that breaks what the reader promises: nodes in an
// order where every name read is defined before (by an input, an initializer or an earlier node),
// and each tensor holding exactly its dims' bytes. No folder is given, so external data is refused.
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "onnx/onnx_model.h"

namespace {

void check_tensor(const tripy::onnx::TensorValue& t) {
  if (!t.tensor.defined()) return;
  if (t.tensor.shape() != t.dims || (t.tensor.data() == nullptr && t.tensor.nbytes() != 0)) std::abort();
  // Without a keep-alive every tensor owns a copy: its last byte must be readable (ASan checks).
  static volatile char sink;
  if (t.tensor.nbytes() > 0) sink = static_cast<const char*>(t.tensor.data())[t.tensor.nbytes() - 1];
}

void check_graph(const tripy::onnx::Graph& g, bool top) {
  std::unordered_set<std::string> defined;
  for (const auto& t : g.initializers) {
    check_tensor(t);
    defined.insert(t.name);
  }
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& n : g.nodes) {
    for (const std::string& in : n.inputs)
      if (top && !in.empty() && !defined.count(in)) std::abort();
    for (const auto& a : n.attributes) {
      check_tensor(a.t);
      for (const auto& t : a.tensors) check_tensor(t);
      if (a.g) check_graph(*a.g, false);
      for (const auto& sub : a.graphs) check_graph(*sub, false);
    }
    for (const std::string& out : n.outputs) defined.insert(out);
  }
  for (const auto& out : g.outputs)
    if (top && !defined.count(out.name)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tripy::StatusOr<tripy::onnx::Model> model = tripy::onnx::parse_onnx(data, size, "fuzz.onnx", "", nullptr);
  if (!model.ok()) {
    if (model.status().message().empty()) std::abort();
    return 0;
  }
  check_graph(model->graph, true);
  return 0;
}

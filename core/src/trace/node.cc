// Trace node construction and description.
#include "trace/node.h"

#include <atomic>

namespace tripy::trace {

uint64_t next_node_id() {
  static std::atomic<uint64_t> counter{0};
  return counter++;
}

std::string Node::describe() const {
  const SymbolTable* table = symbols.get();
  return name() + ": [shape=" + shape_str(shape, table) + ", dtype=" + std::string(dtype_name(dtype)) +
         ", loc=" + device.str() + "]";
}

NodeRef make_data_node(Tensor value, SourceRef source) {
  auto n = std::make_shared<Node>();
  n->dtype = value.dtype();
  n->shape = shape_of(value.shape());
  n->device = value.device();
  n->source = std::move(source);
  n->id = next_node_id();
  n->value = std::move(value);
  return n;
}

NodeRef make_input_node(int index, std::string name, DType dtype, Shape shape, Device device,
                        std::shared_ptr<SymbolTable> symbols, SourceRef source) {
  auto n = std::make_shared<Node>();
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->device = device;
  n->source = std::move(source);
  n->id = next_node_id();
  n->input_index = index;
  n->input_name = std::move(name);
  n->symbols = std::move(symbols);
  return n;
}

NodeRef make_shape_input_node(int index, std::string name, int symbol, Device device,
                              std::shared_ptr<SymbolTable> symbols, SourceRef source) {
  NodeRef n = make_input_node(index, std::move(name), DType::kInt32, {}, device, std::move(symbols), std::move(source));
  n->dim_value = Dim::symbol(symbol);
  return n;
}

}  // namespace tripy::trace

// Trace graph: what the Python frontend builds, one node per API-level op call. Each node knows
// its dtype and symbolic shape (inferred and checked at the call) and the user's source frames.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "runtime/program.h"
#include "tripy/dtype.h"
#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::trace {

struct OpDef;

// Attributes of a Trace op. One flat struct (not a map); each OpDef declares the fields it reads
// and needs (OpDef::attrs, TRIPY_TRACE_ATTRS), and the Python binding refuses any other.
struct Attrs {
  std::vector<int64_t> dims;  // reduce dims, permutation, squeeze dims, ...
  Shape shape;                // target shape (full, iota, reshape, expand)
  Shape starts, limits, steps;
  double value = 0;  // fill value, eps, exponent
  int64_t axis = 0;
  int64_t k = 0;       // topk: how many elements
  int64_t groups = 1;  // groupnorm: how many groups of channels
  bool keepdim = false;
  bool causal = false;  // attention: query i sees keys 0..i only
  std::string mode;     // pad: "constant" | "reflect"; resize: "nearest" | ...; checked by the op's rule
  std::vector<double> scales;  // resize: a factor per dim (instead of output sizes in `shape`)
  bool align_corners = false;  // resize: sample at the corner pixels instead of the centres
  DType dtype = DType::kFloat32;
  rt::ConvolutionAttrs convolution;  // convolution: typed, checked where Python hands it over
  rt::PluginAttrs plugin;  // plugin: its registry key and fields (the device code is filled in)
  rt::PoolingAttrs pooling;  // pooling: likewise
};

struct Node;
using NodeRef = std::shared_ptr<Node>;

struct Node : std::enable_shared_from_this<Node> {
  const OpDef* def = nullptr;  // nullptr for data and runtime-input nodes
  Attrs attrs;
  std::vector<NodeRef> inputs;
  DType dtype = DType::kFloat32;
  Shape shape;
  Device device;
  SourceRef source;
  uint64_t id = 0;  // unique, for names like "t7" in messages
  // Data: set for tensors made from data and for evaluated tensors. In eager evaluation such a
  // node enters the subgraph as a runtime input; in tp.compile it is frozen as a constant.
  Tensor value;
  // tp.compile runtime input (InputInfo, or DimensionInputInfo: a scalar whose dim_value is its
  // own symbol): its position and name; shapes use `symbols`.
  int input_index = -1;
  std::string input_name;
  std::shared_ptr<SymbolTable> symbols;
  // For scalar int32 tensors that stand for a size (tp.DimensionSize): the size as a symbolic
  // expression, so shapes built from it stay symbolic in compiled graphs.
  std::optional<Dim> dim_value;

  bool evaluated() const { return value.defined(); }
  std::string name() const { return "t" + std::to_string(id); }
  // "t1: [shape=(3, 3), dtype=float32, loc=cpu]" — the form error notes use.
  std::string describe() const;
};

uint64_t next_node_id();
NodeRef make_data_node(Tensor value, SourceRef source);
NodeRef make_input_node(int index, std::string name, DType dtype, Shape shape, Device device,
                        std::shared_ptr<SymbolTable> symbols, SourceRef source);
// A shape value (tp.DimensionInputInfo): an int32 scalar (a tp.DimensionSize) standing for `symbol`.
NodeRef make_shape_input_node(int index, std::string name, int symbol, Device device,
                              std::shared_ptr<SymbolTable> symbols, SourceRef source);

}  // namespace tripy::trace

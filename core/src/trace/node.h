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

// The attributes Trace ops take, one row each: X(type, name, default), named as the Python
// frontend hands them over. Each field has one meaning. From this list come the Attrs struct, its
// field visitor (the eager cache key), the binding's reader and the bits with which each OpDef
// declares the fields it reads and needs (op_def.h): the binding refuses any other, so an
// attribute cannot be passed to an op that would silently ignore it.
#define TRIPY_TRACE_ATTRS(X)                                                                                \
  X(std::vector<int64_t>, dims, {})  /* reduce dims, permutation, squeeze dims, ... */                     \
  X(Shape, shape, {})                /* target shape (full, iota, reshape, expand) */                      \
  X(Shape, starts, {})               /* slice starts; pad: the sizes before */                             \
  X(Shape, limits, {})               /* slice limits; pad: the sizes after */                              \
  X(Shape, steps, {})                /* slice steps */                                                     \
  X(double, fill, 0)                 /* full, pad: the value written (float and bool dtypes) */            \
  X(int64_t, fill_int, 0)            /* full, pad: the value written, exact, for integer dtypes */          \
  X(double, eps, 0)                  /* layernorm, rmsnorm, groupnorm, instancenorm: added to the variance */ \
  X(double, correction, 0)           /* var: subtracted from the count */                                  \
  X(double, scale, 0)                /* scaled_dot_product_attention: the logits' factor */                \
  X(int64_t, axis, 0)                                                                                      \
  X(bool, keepdim, false)                                                                                  \
  X(bool, causal, false)             /* attention: query i sees keys 0..i only */                          \
  X(std::string, mode, {})           /* pad: "constant" | "reflect"; resize: "nearest" | ... */            \
  X(int64_t, k, 0)                   /* topk: how many elements */                                         \
  X(DType, dtype, DType::kFloat32)                                                                         \
  X(rt::ConvolutionAttrs, convolution, {})  /* typed, checked where Python hands it over */                \
  X(rt::PluginAttrs, plugin, {})     /* its registry key and fields (the device code is filled in) */      \
  X(rt::PoolingAttrs, pooling, {})                                                                         \
  X(rt::SampleAttrs, sample, {})     /* typed, read from a dict by its field names */                      \
  X(std::vector<double>, scales, {}) /* resize: a factor per dim (instead of output sizes in `shape`) */    \
  X(bool, align_corners, false)      /* resize: sample at the corner pixels instead of the centres */      \
  X(int64_t, groups, 1)              /* groupnorm: how many groups of channels */                          \
  X(rt::CollectiveAttrs, collective, {}) /* all_reduce, all_gather: the op, axis and the mesh's size */

struct Attrs {
#define TRIPY_TRACE_ATTR_FIELD(type, name, init) type name = init;
  TRIPY_TRACE_ATTRS(TRIPY_TRACE_ATTR_FIELD)
#undef TRIPY_TRACE_ATTR_FIELD
  static constexpr bool kHasFields = true;
  template <class Visit, class... Self>
  static void visit_fields(Visit&& visit, Self&... self) {
#define TRIPY_TRACE_ATTR_VISIT(type, name, init) visit(#name, self.name...);
    TRIPY_TRACE_ATTRS(TRIPY_TRACE_ATTR_VISIT)
#undef TRIPY_TRACE_ATTR_VISIT
  }
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

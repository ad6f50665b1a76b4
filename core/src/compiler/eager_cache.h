// The caches of eager mode's compiled programs, looked up on every evaluation (eager.cc). One op
// over values, the usual eager step (`(a + b).eval()`), is found by its op signature: its op,
// attributes and inputs' dtypes and shapes, hashed and compared where they live in the Trace
// nodes, so a hit builds and allocates nothing. Any other subgraph is found by a structural key
// of its nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/node.h"
#include "tripy/executable.h"

namespace tripy::compiler {

// What the subgraph producing a node is looked up by.
struct EagerKey {
  // The evaluated tensors it reads, in the order lowering numbers its parameters (its runtime
  // inputs).
  std::vector<trace::Node*> leaves;
  // One op over values: found by `hash` and compared field by field. Otherwise by `structure`.
  bool one_op = false;
  uint64_t hash = 0;
  std::string structure;
};

EagerKey eager_key(const trace::NodeRef& node, const Device& device);
// The cached program of `node`'s subgraph (key: eager_key(node, device)), or a null executable.
// Thread-safe, as insert_eager is.
Executable find_eager(const EagerKey& key, const trace::Node& node, const Device& device);
void insert_eager(const EagerKey& key, const trace::Node& node, const Device& device, Executable exe);
size_t eager_cache_size();
// Drops every cached program (and the device memory it holds).
void clear_eager_cache();

}  // namespace tripy::compiler

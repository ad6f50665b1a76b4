// The caches of eager mode's compiled programs: by op signature for one op over values, by
// structural key for any other subgraph.
#include "compiler/eager_cache.h"

#include <algorithm>
#include <cstring>
#include <list>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "runtime/fields.h"
#include "trace/lower.h"
#include "trace/op_def.h"

namespace tripy::compiler {

using trace::Node;
using trace::NodeRef;

namespace {

// ---- one op over values: the op signature ------------------------------------------------------

// Whether `n` is one op over values, with static shapes: the usual eager step.
bool is_one_op(const Node& n) {
  if (n.evaluated() || n.input_index >= 0 || n.def == nullptr || !is_static(n.shape)) return false;
  for (const auto& in : n.inputs)
    if (!in->evaluated() || !is_static(in->shape)) return false;
  return true;
}

struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void mix(uint64_t v) {
    h = (h ^ v) * 0x100000001b3ull;
    h ^= h >> 32;
  }
};

// Hashing and comparing attributes field by field (trace::Attrs lists its fields). Numbers are
// compared by their bits, as a key of bytes would: a NaN fill matches itself.
template <class T>
void hash_field(Hasher& h, const T& v) {
  if constexpr (std::is_same_v<T, Dim>) {
    h.mix(v.is_static() ? static_cast<uint64_t>(v.static_value()) : v.hash());
  } else if constexpr (rt::has_fields<T>::value) {
    T::visit_fields([&](const char*, const auto& f) { hash_field(h, f); }, v);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, std::min(sizeof(v), sizeof(bits)));
    h.mix(bits);
  } else if constexpr (std::is_same_v<T, std::string>) {
    h.mix(std::hash<std::string>{}(v));
  } else {
    for (const auto& e : v) hash_field(h, e);
    h.mix(v.size());
  }
}

template <class T>
bool same_field(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, Dim>) {
    return a.is_static() && b.is_static() ? a.static_value() == b.static_value() : a.same_as(b);
  } else if constexpr (rt::has_fields<T>::value) {
    bool same = true;
    T::visit_fields([&](const char*, const auto& x, const auto& y) { same = same && same_field(x, y); }, a, b);
    return same;
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return a == b;
  } else {
    if (a.size() != b.size()) return false;
    auto i = a.begin();
    for (const auto& y : b)
      if (!same_field(*i++, y)) return false;
    return true;
  }
}

// The leaf number of each of `n`'s inputs (`a + a`: 0, 0): the program reads each value once.
int32_t leaf_of(const std::vector<Node*>& leaves, const Node* in) {
  return static_cast<int32_t>(std::find(leaves.begin(), leaves.end(), in) - leaves.begin());
}

uint64_t op_hash(const Node& n, const Device& device, const std::vector<Node*>& leaves) {
  Hasher h;
  h.mix(reinterpret_cast<uintptr_t>(n.def));  // op definitions are registered once and never move
  h.mix(static_cast<uint64_t>(device.kind) << 32 | static_cast<uint32_t>(device.index));
  for (const auto& in : n.inputs) h.mix(static_cast<uint64_t>(leaf_of(leaves, in.get())));
  for (const Node* leaf : leaves) {
    h.mix(static_cast<uint64_t>(leaf->dtype));
    hash_field(h, leaf->shape);
  }
  // Only the attributes the op declares (OpDef::attrs; AttrIndex follows the field list): the
  // others are left at their defaults. Matching compares every field, so this is only a hash.
  int field = 0;
  trace::Attrs::visit_fields(
      [&](const char*, const auto& f) {
        if (n.def->attrs & (trace::AttrSet{1} << field++)) hash_field(h, f);
      },
      n.attrs);
  return h.h;
}

// What a one-op program was compiled for, copied from its node.
struct OpEntry {
  const trace::OpDef* def;
  Device device;
  std::vector<int32_t> input_leaves;
  std::vector<DType> leaf_dtypes;
  std::vector<Device> leaf_devices;
  std::vector<std::vector<int64_t>> leaf_dims;
  trace::Attrs attrs;
  Executable exe;

  bool matches(const Node& n, const Device& dev, const std::vector<Node*>& leaves) const {
    if (n.def != def || !(dev == device) || n.inputs.size() != input_leaves.size() || leaves.size() != leaf_dims.size())
      return false;
    for (size_t i = 0; i < input_leaves.size(); ++i)
      if (leaf_of(leaves, n.inputs[i].get()) != input_leaves[i]) return false;
    for (size_t i = 0; i < leaves.size(); ++i) {
      const Node& leaf = *leaves[i];
      if (leaf.dtype != leaf_dtypes[i] || !(leaf.value.device() == leaf_devices[i]) ||
          leaf.shape.size() != leaf_dims[i].size())
        return false;
      for (size_t d = 0; d < leaf_dims[i].size(); ++d)
        if (leaf.shape[d].static_value() != leaf_dims[i][d]) return false;
    }
    return same_field(n.attrs, attrs);
  }
};

// ---- any other subgraph: the structural key ----------------------------------------------------

template <typename T>
void append_raw(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// The rank, then static dims as raw bytes, symbolic ones as text.
void append_dims(std::string& key, const Shape& shape) {
  append_raw(key, static_cast<uint32_t>(shape.size()));
  for (const auto& d : shape) {
    if (d.is_static()) {
      key += 'd';
      append_raw(key, d.static_value());
    } else {
      key += 's';
      key += d.str();
      key += '\0';
    }
  }
}

// The structural key of the Trace subgraph producing `node`: per node in topological order, its
// dtype and shape, then either that it is a value (an evaluated tensor: a runtime input of the
// program) or a compile input (which lowering rejects), or its op, its inputs' numbers and every
// attribute (their field list, node.h), so two calls that differ in any one never share a
// compiled kernel. Computed without lowering, so a hit skips it. Also collects the leaves.
std::string structural_key(const NodeRef& node, const Device& device, std::vector<Node*>& leaves) {
  std::string key;
  key.reserve(512);
  append_raw(key, device.kind);
  append_raw(key, device.index);
  const std::vector<Node*> order = trace::topo_order({node});
  std::unordered_map<const Node*, int32_t> index;
  index.reserve(order.size());
  for (Node* n : order) {
    index.emplace(n, static_cast<int32_t>(index.size()));
    if (n->evaluated() || n->input_index >= 0) {
      if (n->evaluated()) leaves.push_back(n);
      key += n->evaluated() ? 'v' : 'c';
      append_raw(key, n->dtype);
      append_dims(key, n->shape);
      continue;
    }
    key += 'o';
    append_raw(key, n->dtype);
    append_dims(key, n->shape);
    append_raw(key, n->def);
    append_raw(key, static_cast<uint32_t>(n->inputs.size()));
    for (const auto& in : n->inputs) append_raw(key, index.at(in.get()));
    trace::Attrs::visit_fields(
        [&](const char*, const auto& field) {
          if constexpr (std::is_same_v<std::decay_t<decltype(field)>, Shape>) append_dims(key, field);
          else rt::append_field_key(key, field);
        },
        n->attrs);
  }
  return key;
}

// ---- the caches -------------------------------------------------------------------------------

constexpr size_t kCapacity = 1024;  // programs per cache

// A bounded LRU of compiled subgraphs by structural key.
class StructureCache {
 public:
  Executable find(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return Executable(nullptr);
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }
  void insert(const std::string& key, Executable exe) {
    if (map_.count(key)) return;
    if (map_.size() >= kCapacity) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    map_.emplace(key, std::make_pair(std::move(exe), order_.begin()));
  }
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(), order_.clear(); }

 private:
  std::list<std::string> order_;
  std::unordered_map<std::string, std::pair<Executable, std::list<std::string>::iterator>> map_;
};

// One-op programs by signature hash. Full, it drops an arbitrary entry: a program that cycles
// through more than kCapacity op signatures recompiles some of them either way.
class OpCache {
 public:
  Executable find(uint64_t hash, const Node& n, const Device& device, const std::vector<Node*>& leaves) const {
    auto [first, last] = map_.equal_range(hash);
    for (auto it = first; it != last; ++it)
      if (it->second.matches(n, device, leaves)) return it->second.exe;
    return Executable(nullptr);
  }
  void insert(uint64_t hash, const Node& n, const Device& device, const std::vector<Node*>& leaves, Executable exe) {
    if (find(hash, n, device, leaves).impl()) return;
    if (map_.size() >= kCapacity) map_.erase(map_.begin());
    OpEntry e{n.def, device, {}, {}, {}, {}, n.attrs, std::move(exe)};
    for (const auto& in : n.inputs) e.input_leaves.push_back(leaf_of(leaves, in.get()));
    for (const Node* leaf : leaves) {
      e.leaf_dtypes.push_back(leaf->dtype);
      e.leaf_devices.push_back(leaf->value.device());
      e.leaf_dims.push_back(static_dims(leaf->shape));
    }
    map_.emplace(hash, std::move(e));
  }
  void clear() { map_.clear(); }
  size_t size() const { return map_.size(); }

 private:
  std::unordered_multimap<uint64_t, OpEntry> map_;
};

std::mutex g_mu;
StructureCache g_structures;
OpCache g_ops;

}  // namespace

EagerKey eager_key(const NodeRef& node, const Device& device) {
  EagerKey key;
  if (is_one_op(*node)) {
    key.one_op = true;
    key.leaves.reserve(node->inputs.size());
    for (const auto& in : node->inputs)  // topo_order's numbering: each value once, by first use
      if (std::find(key.leaves.begin(), key.leaves.end(), in.get()) == key.leaves.end()) key.leaves.push_back(in.get());
    key.hash = op_hash(*node, device, key.leaves);
    return key;
  }
  key.structure = structural_key(node, device, key.leaves);
  return key;
}

Executable find_eager(const EagerKey& key, const Node& node, const Device& device) {
  std::lock_guard<std::mutex> lock(g_mu);
  return key.one_op ? g_ops.find(key.hash, node, device, key.leaves) : g_structures.find(key.structure);
}

void insert_eager(const EagerKey& key, const Node& node, const Device& device, Executable exe) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (key.one_op) g_ops.insert(key.hash, node, device, key.leaves, std::move(exe));
  else g_structures.insert(key.structure, std::move(exe));
}

size_t eager_cache_size() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_ops.size() + g_structures.size();
}

void clear_eager_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_ops.clear();
  g_structures.clear();
}

}  // namespace tripy::compiler

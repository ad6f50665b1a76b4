// Reading a ModelProto's records into the structs of onnx_model.h (field numbers from onnx.proto),
// and making tensors of the data it holds: raw bytes are borrowed where aligned, typed fields
// (float_data, int32_data, ...) are converted, external data is mapped from files inside the
// model's folder. Damage anywhere is thrown as Damage with the path of the record that holds it
// and caught once, in parse_onnx.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

#include "common/safe_file.h"
#include "onnx/onnx_graph.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_wire.h"

namespace tripy::onnx {
namespace {

struct Damage {
  std::string what;
};

struct ElemInfo {
  int32_t type;
  const char* name;
  int size;  // bytes per element; 0 for strings
};
constexpr ElemInfo kElems[] = {
    {kUndefined, "UNDEFINED", 0}, {kFloat, "FLOAT", 4},     {kUint8, "UINT8", 1},       {kInt8, "INT8", 1},
    {kUint16, "UINT16", 2},       {kInt16, "INT16", 2},     {kInt32, "INT32", 4},       {kInt64, "INT64", 8},
    {kString, "STRING", 0},       {kBool, "BOOL", 1},       {kFloat16, "FLOAT16", 2},   {kDouble, "DOUBLE", 8},
    {kUint32, "UINT32", 4},       {kUint64, "UINT64", 8},   {kComplex64, "COMPLEX64", 8},
    {kComplex128, "COMPLEX128", 16}, {kBFloat16, "BFLOAT16", 2}, {kFloat8E4M3FN, "FLOAT8E4M3FN", 1},
};
const ElemInfo* elem_info(int32_t t) {
  for (const ElemInfo& e : kElems)
    if (e.type == t) return &e;
  return nullptr;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s.substr(0, 200)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out + (s.size() > 200 ? "...'" : "'");
}

// A mapped external data file, unmapped when the last tensor over it goes.
struct Mapped {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> owner;
};

class Parser {
 public:
  Parser(std::string directory, std::shared_ptr<void> keep_alive)
      : directory_(std::move(directory)), keep_alive_(std::move(keep_alive)) {}

  Model model(Bytes bytes) {
    Model m;
    bool has_graph = false;
    Bytes graph;
    for_each(bytes, "the model", [&](const Field& f) {
      switch (f.tag) {
        case 1: m.ir_version = static_cast<int64_t>(varint(f, "ir_version")); break;
        case 2: m.producer_name = text(f, "producer_name"); break;
        case 3: m.producer_version = text(f, "producer_version"); break;
        case 7: graph = bytes_of(f, "graph"); has_graph = true; break;
        case 8: m.opsets.push_back(opset(bytes_of(f, "opset_import"))); break;
        default: break;  // doc strings, metadata, functions, training info: not needed to run
      }
    });
    if (!has_graph) throw Damage{"it has no graph (is it an ONNX model?)"};
    m.graph = this->graph(graph, "the graph", 0);
    return m;
  }

 private:
  template <class F>
  void for_each(Bytes bytes, const std::string& where, F&& on_field) {
    WireReader r(bytes);
    Field f;
    while (r.next(f)) on_field(f);
    if (!r.error().empty()) throw Damage{"its protobuf data is damaged in " + where + ": " + r.error()};
  }

  static void expect(const Field& f, WireType t, const char* field) {
    if (f.type != t) throw Damage{std::string("the field ") + field + " has the wrong protobuf wire type"};
  }
  static uint64_t varint(const Field& f, const char* field) {
    expect(f, WireType::kVarint, field);
    return f.number;
  }
  static Bytes bytes_of(const Field& f, const char* field) {
    expect(f, WireType::kBytes, field);
    return f.bytes;
  }
  static std::string text(const Field& f, const char* field) { return bytes_of(f, field).str(); }

  // Appends a repeated varint field's values, packed or one per record.
  template <class T>
  static void varints(const Field& f, std::vector<T>& out, const char* field) {
    if (f.type == WireType::kVarint) {
      out.push_back(static_cast<T>(f.number));
      return;
    }
    bytes_of(f, field);  // checks the wire type
    const uint8_t* p = f.bytes.data;
    const uint8_t* end = p + f.bytes.size;
    while (p < end) {
      uint64_t v = 0;
      int shift = 0;
      for (;;) {
        if (p == end || shift >= 64) throw Damage{std::string("the packed list ") + field + " is cut off"};
        const uint8_t b = *p++;
        v |= static_cast<uint64_t>(b & 0x7f) << shift;
        shift += 7;
        if ((b & 0x80) == 0) break;
      }
      out.push_back(static_cast<T>(v));
    }
  }

  // Appends a repeated fixed-width field's raw little-endian values (4 or 8 bytes each).
  static void fixeds(const Field& f, std::vector<uint64_t>& out, size_t width, const char* field) {
    const WireType single = width == 4 ? WireType::kFixed32 : WireType::kFixed64;
    if (f.type == single) {
      out.push_back(f.number);
      return;
    }
    Bytes b = bytes_of(f, field);
    if (b.size % width != 0) throw Damage{std::string("the packed list ") + field + " is not whole numbers"};
    for (size_t i = 0; i < b.size; i += width) {
      uint64_t v = 0;
      for (size_t k = 0; k < width; ++k) v |= static_cast<uint64_t>(b.data[i + k]) << (8 * k);
      out.push_back(v);
    }
  }

  static double as_float(uint64_t bits) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }

  OpsetImport opset(Bytes bytes) {
    OpsetImport o;
    for_each(bytes, "an opset_import", [&](const Field& f) {
      if (f.tag == 1) o.domain = text(f, "opset_import.domain");
      if (f.tag == 2) o.version = static_cast<int64_t>(varint(f, "opset_import.version"));
    });
    return o;
  }

  Graph graph(Bytes bytes, const std::string& where, int depth) {
    if (depth > kOnnxMaxGraphDepth)
      throw Damage{"its graphs nest more than " + std::to_string(kOnnxMaxGraphDepth) + " deep (in " + where + ")"};
    Graph g;
    std::vector<ValueInfo> declared;
    for_each(bytes, where, [&](const Field& f) {
      switch (f.tag) {
        case 1: g.nodes.push_back(node(bytes_of(f, "node"), where + ", node " + std::to_string(g.nodes.size()), depth)); break;
        case 2: g.name = text(f, "graph.name"); break;
        case 5: g.initializers.push_back(tensor(bytes_of(f, "initializer"), where + ", initializer " + std::to_string(g.initializers.size()))); break;
        case 11: declared.push_back(value_info(bytes_of(f, "input"), where + ", an input")); break;
        case 12: g.outputs.push_back(value_info(bytes_of(f, "output"), where + ", an output")); break;
        case 15: throw Damage{"it has sparse initializers in " + where + ", which Tripy does not read"};
        default: break;  // value_info, doc strings, quantization annotations
      }
    });
    check_graph(g, declared, where);
    return g;
  }

  Node node(Bytes bytes, const std::string& where, int depth) {
    Node n;
    std::vector<Bytes> attrs;
    for_each(bytes, where, [&](const Field& f) {
      switch (f.tag) {
        case 1: n.inputs.push_back(text(f, "node.input")); break;
        case 2: n.outputs.push_back(text(f, "node.output")); break;
        case 3: n.name = text(f, "node.name"); break;
        case 4: n.op_type = text(f, "node.op_type"); break;
        case 5: attrs.push_back(bytes_of(f, "node.attribute")); break;
        case 7: n.domain = text(f, "node.domain"); break;
        default: break;
      }
    });
    const std::string named = "node " + quoted(n.name) + " (" + quoted(n.op_type) + ")";
    for (Bytes a : attrs) n.attributes.push_back(attribute(a, named, depth));
    return n;
  }

  Attribute attribute(Bytes bytes, const std::string& node, int depth) {
    Attribute a;
    const std::string where = "an attribute of " + node;
    for_each(bytes, where, [&](const Field& f) {
      switch (f.tag) {
        case 1: a.name = text(f, "attribute.name"); break;
        case 20: a.type = static_cast<int32_t>(varint(f, "attribute.type")); break;
        case 2: expect(f, WireType::kFixed32, "attribute.f"); a.f = as_float(f.number); break;
        case 3: a.i = static_cast<int64_t>(varint(f, "attribute.i")); break;
        case 4: a.s = text(f, "attribute.s"); break;
        case 5: a.t = tensor(bytes_of(f, "attribute.t"), where); break;
        case 6: a.g = std::make_shared<Graph>(graph(bytes_of(f, "attribute.g"), "a graph of " + node, depth + 1)); break;
        case 7: {
          std::vector<uint64_t> bits;
          fixeds(f, bits, 4, "attribute.floats");
          for (uint64_t b : bits) a.floats.push_back(as_float(b));
          break;
        }
        case 8: varints(f, a.ints, "attribute.ints"); break;
        case 9: a.strings.push_back(text(f, "attribute.strings")); break;
        case 10: a.tensors.push_back(tensor(bytes_of(f, "attribute.tensors"), where)); break;
        case 11:
          a.graphs.push_back(std::make_shared<Graph>(graph(bytes_of(f, "attribute.graphs"), "a graph of " + node, depth + 1)));
          break;
        default: break;  // sparse tensors and type protos: refused by type below
      }
    });
    if (a.type == kAttrUndefined) {  // IR version 1 files leave the type out: infer it from what is set
      a.type = a.g ? kAttrGraph : a.t.elem_type != kUndefined ? kAttrTensor : !a.floats.empty() ? kAttrFloats
               : !a.ints.empty() ? kAttrInts : !a.strings.empty() ? kAttrStrings : kAttrUndefined;
    }
    if (a.type < kAttrFloat || a.type > kAttrTypeProtos)
      throw Damage{"the attribute " + quoted(a.name) + " of " + node + " has no valid type (" + std::to_string(a.type) + ")"};
    return a;
  }

  ValueInfo value_info(Bytes bytes, const std::string& where) {
    ValueInfo v;
    for_each(bytes, where, [&](const Field& f) {
      if (f.tag == 1) v.name = text(f, "value_info.name");
      if (f.tag == 2) type(bytes_of(f, "value_info.type"), v, where);
    });
    return v;
  }

  // A TypeProto: a tensor's element type and shape, reached through sequence and optional types
  // (each named in v.container); maps, sparse tensors and opaque values are only named.
  void type(Bytes bytes, ValueInfo& v, const std::string& where, int depth = 0) {
    if (depth > kOnnxMaxTypeDepth)
      throw Damage{"the type of " + quoted(v.name) + " nests more than " + std::to_string(kOnnxMaxTypeDepth) + " deep"};
    for_each(bytes, where, [&](const Field& f) {
      const char* kind = f.tag == 4 ? "sequence" : f.tag == 9 ? "optional" : f.tag == 5 ? "map"
                         : f.tag == 8 ? "sparse tensor" : f.tag == 7 ? "opaque" : nullptr;
      if (kind != nullptr) v.container += (v.container.empty() ? "" : " ") + std::string(kind);
      if (f.tag == 4 || f.tag == 9) {  // Sequence / Optional { TypeProto elem_type = 1; }
        for_each(bytes_of(f, "type.elem_type"), where, [&](const Field& e) {
          if (e.tag == 1) type(bytes_of(e, "type.elem_type"), v, where, depth + 1);
        });
        return;
      }
      if (f.tag != 1) return;
      for_each(bytes_of(f, "type.tensor_type"), where, [&](const Field& t) {
        if (t.tag == 1) v.elem_type = static_cast<int32_t>(varint(t, "tensor_type.elem_type"));
        if (t.tag != 2) return;
        v.has_shape = true;
        for_each(bytes_of(t, "tensor_type.shape"), where, [&](const Field& d) {
          if (d.tag != 1) return;
          if (v.dims.size() == kOnnxMaxRank)
            throw Damage{"the value " + quoted(v.name) + " has more than " + std::to_string(kOnnxMaxRank) + " dims"};
          DimInfo dim;
          for_each(bytes_of(d, "shape.dim"), where, [&](const Field& x) {
            if (x.tag == 1) dim.has_value = true, dim.value = static_cast<int64_t>(varint(x, "dim_value"));
            if (x.tag == 2) dim.param = text(x, "dim_param");
          });
          v.dims.push_back(std::move(dim));
        });
      });
    });
  }

  // A TensorProto: its fields, then its data made into a tensor where Tripy has the dtype.
  TensorValue tensor(Bytes bytes, const std::string& where) {
    TensorValue v;
    Bytes raw;
    bool has_raw = false, external = false;
    std::vector<uint64_t> fixed_data;  // float_data (4 bytes) or double_data / uint64_data (8 bytes)
    std::vector<int64_t> int_data;     // int32_data or int64_data
    size_t typed = 0;                  // how many typed values were given
    std::vector<std::pair<std::string, std::string>> ext;
    for_each(bytes, where, [&](const Field& f) {
      switch (f.tag) {
        case 1: varints(f, v.dims, "tensor.dims"); if (v.dims.size() > kOnnxMaxRank) throw Damage{"a tensor in " + where + " has more than " + std::to_string(kOnnxMaxRank) + " dims"}; break;
        case 2: v.elem_type = static_cast<int32_t>(varint(f, "tensor.data_type")); break;
        case 3: throw Damage{"a tensor in " + where + " is split into segments, which Tripy does not read"};
        case 4: fixeds(f, fixed_data, 4, "tensor.float_data"); break;
        case 5: varints(f, int_data, "tensor.int32_data"); break;
        case 6: ++typed; break;  // string_data: STRING tensors are refused by dtype
        case 7: varints(f, int_data, "tensor.int64_data"); break;
        case 8: v.name = text(f, "tensor.name"); break;
        case 9: raw = bytes_of(f, "tensor.raw_data"); has_raw = true; break;
        case 10: fixeds(f, fixed_data, 8, "tensor.double_data"); break;
        case 11: {
          std::vector<uint64_t> u;
          varints(f, u, "tensor.uint64_data");
          for (uint64_t x : u) int_data.push_back(static_cast<int64_t>(x));
          break;
        }
        case 13: {
          std::pair<std::string, std::string> kv;
          for_each(bytes_of(f, "tensor.external_data"), where, [&](const Field& e) {
            if (e.tag == 1) kv.first = text(e, "external_data.key");
            if (e.tag == 2) kv.second = text(e, "external_data.value");
          });
          ext.push_back(std::move(kv));
          break;
        }
        case 14: external = varint(f, "tensor.data_location") == 1; break;
        default: break;
      }
    });
    const std::string named = "the tensor " + quoted(v.name) + " (in " + where + ")";
    uint64_t numel = 1;
    for (int64_t d : v.dims) {
      if (d < 0) throw Damage{named + " has a negative dim (" + std::to_string(d) + ")"};
      if (d != 0 && numel > kOnnxMaxElements / static_cast<uint64_t>(d))
        throw Damage{named + " has more than 2^40 elements"};
      numel *= static_cast<uint64_t>(d);
    }
    const ElemInfo* info = elem_info(v.elem_type);
    if (info == nullptr || v.elem_type == kUndefined)
      throw Damage{named + " has no valid data type (" + std::to_string(v.elem_type) + ")"};
    typed += fixed_data.size() + int_data.size();
    if (info->size == 0) return v;  // STRING: the frontend refuses the dtype by name
    const uint64_t nbytes = numel * static_cast<uint64_t>(info->size);
    DType dtype;
    const bool known = tripy_dtype(v.elem_type, dtype);
    const std::string shape = "dims " + dims_str(v.dims) + " of " + info->name + " need " + std::to_string(nbytes) + " bytes";
    if (external) {
      if (has_raw || typed) throw Damage{named + " has external data and data in the file both"};
      Bytes data = external_data(ext, named);
      if (data.size != nbytes)
        throw Damage{named + " has " + std::to_string(data.size) + " bytes of external data, but its " + shape};
      if (known) v.tensor = borrow_or_copy(data, dtype, v.dims, external_owner_);
      return v;
    }
    if (has_raw) {
      if (typed) throw Damage{named + " has raw_data and typed data both"};
      if (raw.size != nbytes) throw Damage{named + " has " + std::to_string(raw.size) + " bytes of raw_data, but its " + shape};
      if (known) v.tensor = borrow_or_copy(raw, dtype, v.dims, keep_alive_);
      return v;
    }
    if (typed != numel)
      throw Damage{named + " holds " + std::to_string(typed) + " values, but its dims " + dims_str(v.dims) + " have " +
                   std::to_string(numel) + " elements"};
    if (!known) return v;
    const bool floats = v.elem_type == kFloat, wide = v.elem_type == kInt64;
    if ((floats && fixed_data.size() != numel) || (!floats && int_data.size() != numel))
      throw Damage{named + " holds its values in a field that does not match its data type " + info->name};
    v.tensor = Tensor::empty_host(dtype, v.dims);
    uint8_t* out = static_cast<uint8_t*>(v.tensor.data());
    for (uint64_t i = 0; i < numel; ++i) {
      if (floats) {
        const uint32_t b = static_cast<uint32_t>(fixed_data[i]);
        std::memcpy(out + 4 * i, &b, 4);
      } else if (wide) {
        std::memcpy(out + 8 * i, &int_data[i], 8);
      } else if (info->size == 4) {
        const int32_t x = static_cast<int32_t>(int_data[i]);
        std::memcpy(out + 4 * i, &x, 4);
      } else if (info->size == 2) {  // FLOAT16 / BFLOAT16: the bits, in the low half of an int32
        const uint16_t x = static_cast<uint16_t>(int_data[i]);
        std::memcpy(out + 2 * i, &x, 2);
      } else {  // INT8, BOOL, FLOAT8
        out[i] = v.elem_type == kBool ? static_cast<uint8_t>(int_data[i] != 0) : static_cast<uint8_t>(int_data[i]);
      }
    }
    return v;
  }

  static Tensor borrow_or_copy(Bytes data, DType dtype, const std::vector<int64_t>& dims, std::shared_ptr<void> owner) {
    const size_t align = static_cast<size_t>(dtype_size(dtype));
    if (owner && reinterpret_cast<uintptr_t>(data.data) % align == 0)
      return Tensor::borrow(const_cast<uint8_t*>(data.data), dtype, dims, Device{}, std::move(owner));
    // Misaligned elements (raw_data sits wherever protobuf put it), or no owner to keep: copied.
    Tensor t = Tensor::empty_host(dtype, dims);
    if (data.size) std::memcpy(t.data(), data.data, data.size);
    return t;
  }

  // The bytes an external_data list names: `location` (a file inside the model's folder), `offset`
  // and `length`, checked against the file.
  Bytes external_data(const std::vector<std::pair<std::string, std::string>>& ext, const std::string& named) {
    std::string location;
    uint64_t offset = 0, length = 0;
    bool has_length = false;
    for (const auto& [key, value] : ext) {
      if (key == "location") location = value;
      if (key == "offset" || key == "length") {
        char* end = nullptr;
        errno = 0;
        const unsigned long long n = value.empty() || value[0] == '-' ? 0 : std::strtoull(value.c_str(), &end, 10);
        if (value.empty() || value[0] == '-' || errno != 0 || end == nullptr || *end != '\0')
          throw Damage{named + " has an external data " + key + " that is not a number: " + quoted(value)};
        (key == "offset" ? offset : length) = n;
        has_length |= key == "length";
      }
    }
    if (location.empty()) throw Damage{named + " has external data without a location"};
    const Mapped& m = map_external(location, named);
    if (offset > m.size) throw Damage{named + " starts past the end of its external data file " + quoted(location)};
    if (!has_length) length = m.size - offset;
    if (length > m.size - offset)
      throw Damage{named + " reads past the end of its external data file " + quoted(location) + " (offset " +
                   std::to_string(offset) + ", length " + std::to_string(length) + ", file " + std::to_string(m.size) + " bytes)"};
    external_owner_ = m.owner;
    return Bytes{m.data + offset, static_cast<size_t>(length)};
  }

  const Mapped& map_external(const std::string& location, const std::string& named) {
    auto found = mapped_.find(location);
    if (found != mapped_.end()) return found->second;
    if (directory_.empty()) throw Damage{named + " has external data, which needs the model's folder"};
    bool inside = !location.empty() && location[0] != '/' && location.find('\0') == std::string::npos;
    for (size_t start = 0; inside && start <= location.size();) {
      const size_t slash = std::min(location.find('/', start), location.size());
      const std::string part = location.substr(start, slash - start);
      inside = part != ".." && !(part.empty() && slash != location.size());
      start = slash + 1;
    }
    if (!inside)
      throw Damage{named + " names the external data file " + quoted(location) + ", which is not a path inside the model's folder"};
    const std::string path = directory_ + "/" + location;
    // A link inside the folder may point outside it: the real paths must agree too.
    char real_dir[PATH_MAX], real_file[PATH_MAX];
    if (::realpath(directory_.c_str(), real_dir) == nullptr || ::realpath(path.c_str(), real_file) == nullptr)
      throw Damage{named + " names the external data file " + quoted(location) + ", which cannot be opened (" +
                   std::strerror(errno) + ")"};
    const std::string dir_text = real_dir, file_text = real_file;
    if (file_text.compare(0, dir_text.size() + 1, dir_text + "/") != 0)
      throw Damage{named + " names the external data file " + quoted(location) + ", which lies outside the model's folder"};
    RegularFile file = open_regular_file(file_text, /*follow_links=*/false);
    if (!file.opened())
      throw Damage{named + " names the external data file " + quoted(location) + ", which " +
                   (file.not_regular() ? "is " + file_kind(file.info.st_mode) : "cannot be opened (" + std::string(std::strerror(file.error)) + ")")};
    Mapped m;
    m.size = static_cast<size_t>(file.info.st_size);
    if (m.size > 0) {
      void* addr = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd.get(), 0);
      if (addr == MAP_FAILED) throw Damage{named + ": cannot map its external data file " + quoted(location)};
      const size_t size = m.size;
      m.owner = std::shared_ptr<void>(addr, [size](void* p) { ::munmap(p, size); });
      m.data = static_cast<const uint8_t*>(addr);
    }
    return mapped_.emplace(location, std::move(m)).first->second;
  }

  void check_graph(Graph& g, std::vector<ValueInfo>& declared, const std::string& where) {
    // A subgraph (an If's branch, a Loop's body) may read names of the graphs around it.
    std::string error = order_graph(g, declared, /*may_read_outer=*/where != "the graph");
    if (!error.empty()) throw Damage{error + " (in " + where + ")"};
  }

  std::string directory_;
  std::shared_ptr<void> keep_alive_;
  std::shared_ptr<void> external_owner_;
  std::map<std::string, Mapped> mapped_;
};

}  // namespace

std::string elem_type_name(int32_t elem_type) {
  const ElemInfo* info = elem_info(elem_type);
  return info ? info->name : "DataType(" + std::to_string(elem_type) + ")";
}

bool tripy_dtype(int32_t elem_type, DType& out) {
  switch (elem_type) {
    case kFloat: out = DType::kFloat32; return true;
    case kFloat16: out = DType::kFloat16; return true;
    case kBFloat16: out = DType::kBFloat16; return true;
    case kFloat8E4M3FN: out = DType::kFloat8E4M3; return true;
    case kInt8: out = DType::kInt8; return true;
    case kInt32: out = DType::kInt32; return true;
    case kInt64: out = DType::kInt64; return true;
    case kBool: out = DType::kBool; return true;
    default: return false;
  }
}

StatusOr<Model> parse_onnx(const uint8_t* data, size_t size, const std::string& file, const std::string& directory,
                           std::shared_ptr<void> keep_alive) {
  static const uint8_t kEmpty = 0;
  const std::string what = "Cannot load the ONNX model '" + file + "': ";
  try {
    Parser parser(directory, std::move(keep_alive));
    return parser.model(Bytes{data ? data : &kEmpty, data ? size : 0});
  } catch (const Damage& d) {
    return Status(StatusCode::kDataLoss, what + d.what + ".");
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, what + "out of memory.");
  }
}

StatusOr<Model> read_onnx(const std::string& path) {
  const std::string what = "Cannot load the ONNX model '" + path + "'";
  if (path.find('\0') != std::string::npos)
    return Status(StatusCode::kInvalidArgument, "Cannot load an ONNX model: its path contains a NUL byte.");
  RegularFile file = open_regular_file(path, /*follow_links=*/true);
  if (file.not_regular())
    return Status(StatusCode::kInvalidArgument, what + ": it is " + file_kind(file.info.st_mode) + ", not a regular file.");
  if (!file.opened())
    return Status(file.error == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  what + ": " + std::strerror(file.error) + ".");
  const size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const size_t size = static_cast<size_t>(file.info.st_size);
  if (size == 0) return parse_onnx(nullptr, 0, path, directory, nullptr);
  void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd.get(), 0);
  if (addr == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted, what + ": cannot map it (" + std::strerror(errno) + ").");
  std::shared_ptr<void> mapping(addr, [size](void* p) { ::munmap(p, size); });
  return parse_onnx(static_cast<const uint8_t*>(addr), size, path, directory, std::move(mapping));
}

}  // namespace tripy::onnx

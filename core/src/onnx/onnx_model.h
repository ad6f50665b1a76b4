// ONNX models (.onnx files) read into plain structs: the first step of tp.onnx.load, which then
// builds Trace graphs from them through the Python frontend's ops (python/tripy/onnx/). The file is
// the protobuf message ModelProto of onnx/onnx.proto (read with onnx_wire.h, no generated code).
//
// A file may come from anywhere, so the reader trusts nothing: every length, type, name, dim and
// data size is checked, and a defect is a Status naming the file and the node or tensor, never a
// crash or a read outside the file. On top of the format, the graph is checked as a graph: every
// name a node reads is defined before (nodes are returned in an order that makes it so, or a cycle
// is named), no name is defined twice, and every graph output is defined.
//
// Initializers become tensors that borrow the mapped file (or a mapped external data file): no
// byte is copied unless the data is misaligned for its dtype or stored in typed fields.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tripy/status.h"
#include "tripy/tensor.h"

namespace tripy::onnx {

// TensorProto.DataType numbers of onnx.proto.
enum ElemType : int32_t {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
  kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kComplex64 = 14,
  kComplex128 = 15, kBFloat16 = 16, kFloat8E4M3FN = 17,
};
// "FLOAT", "DOUBLE", ... as onnx.proto names them; "DataType(N)" for numbers it does not have.
std::string elem_type_name(int32_t elem_type);
// The Tripy dtype of an ONNX element type, or false where Tripy has none (DOUBLE, UINT8, STRING, ...).
bool tripy_dtype(int32_t elem_type, DType& out);

// A tensor value of the file (an initializer, a Constant's attribute). `tensor` is defined when
// Tripy has the dtype; otherwise only the element type and dims are known (the frontend names it in
// its error).
struct TensorValue {
  std::string name;
  int32_t elem_type = kUndefined;
  std::vector<int64_t> dims;
  Tensor tensor;
};

// One dim of a declared shape: a size, a name (dim_param), or neither (unknown).
struct DimInfo {
  bool has_value = false;
  int64_t value = 0;
  std::string param;
};

// A graph input or output: its name, element type and shape as declared. A sequence or an optional
// names its kinds in `container`, outermost first ("sequence", "optional sequence"), with the
// element type and shape of the tensors inside; a map, a sparse tensor or an opaque value names
// that kind and leaves the element type undefined.
struct ValueInfo {
  std::string name;
  int32_t elem_type = kUndefined;
  std::string container;  // empty for a tensor
  bool has_shape = false;
  std::vector<DimInfo> dims;
};

struct Graph;

// AttributeProto.AttributeType numbers of onnx.proto.
enum AttrType : int32_t {
  kAttrUndefined = 0, kAttrFloat = 1, kAttrInt = 2, kAttrString = 3, kAttrTensor = 4, kAttrGraph = 5,
  kAttrFloats = 6, kAttrInts = 7, kAttrStrings = 8, kAttrTensors = 9, kAttrGraphs = 10,
  kAttrSparseTensor = 11, kAttrSparseTensors = 12, kAttrTypeProto = 13, kAttrTypeProtos = 14,
};

struct Attribute {
  std::string name;
  int32_t type = kAttrUndefined;
  double f = 0;
  int64_t i = 0;
  std::string s;
  TensorValue t;
  std::shared_ptr<Graph> g;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<TensorValue> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // an empty input name is an omitted optional input
  std::vector<Attribute> attributes;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;  // in an order where every name is defined before it is read
  std::vector<TensorValue> initializers;
  std::vector<ValueInfo> inputs;   // the runtime inputs: declared inputs that are not initializers
  std::vector<ValueInfo> outputs;
};

struct OpsetImport {
  std::string domain;  // "" (or "ai.onnx") for the standard ops
  int64_t version = 0;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer_name, producer_version;
  std::vector<OpsetImport> opsets;
  Graph graph;
};

// Limits past which a file is refused as damaged or hostile.
inline constexpr size_t kOnnxMaxRank = 64;
inline constexpr int kOnnxMaxGraphDepth = 16;  // graphs inside attributes inside graphs ...
inline constexpr int kOnnxMaxTypeDepth = 16;  // sequence and optional types inside each other
inline constexpr uint64_t kOnnxMaxElements = uint64_t{1} << 40;

// Parses the `size` bytes at `data` as a ModelProto. Tensors borrow those bytes with `keep_alive`
// as their owner. External data files are looked up in `directory` (the model's folder; only files
// inside it are read); with an empty `directory` external data is refused. `file` names the model
// in errors. Never throws.
StatusOr<Model> parse_onnx(const uint8_t* data, size_t size, const std::string& file, const std::string& directory,
                           std::shared_ptr<void> keep_alive);

// Maps the file at `path` (a regular file; FIFOs and devices are refused without blocking) and
// parses it, with the file's folder as the place of its external data.
StatusOr<Model> read_onnx(const std::string& path);

}  // namespace tripy::onnx

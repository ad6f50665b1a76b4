// Program <-> JSON. Writing is direct; reading checks the presence and type of every field and
// names the offending one ("program.kernels[3].attrs.instrs[2].op: unknown op 'mull'"). A kernel's
// attributes are read and written from their field lists (fields.h), the same code for every kind.
#include "runtime/program_json.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace tripy::rt {

using nlohmann::json;

namespace {

constexpr const char* kShapeOps[] = {"const",   "input_dim", "add", "sub", "mul", "floordiv",
                                     "ceildiv", "mod",       "max", "min", "input_value"};
constexpr const char* kInputKinds[] = {"tensor", "shape_value"};
constexpr const char* kCheckKinds[] = {"equal", "broadcast"};
constexpr const char* kBufferKinds[] = {"input", "constant", "temp", "output", "alias"};
static_assert(std::size(kShapeOps) == static_cast<size_t>(ShapeInstr::Op::kInputValue) + 1);
static_assert(std::size(kInputKinds) == static_cast<size_t>(InputSpec::Kind::kShapeValue) + 1);
static_assert(std::size(kBufferKinds) == static_cast<size_t>(BufferDesc::Kind::kAlias) + 1);

template <typename E, size_t N>
std::string name_of(const char* const (&names)[N], E value) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : "invalid:" + std::to_string(i);
}

template <typename E, size_t N>
E parse_name(const char* const (&names)[N], const json& value, const std::string& path) {
  const std::string text = json_string(value, path);
  for (size_t i = 0; i < N; ++i)
    if (text == names[i]) return static_cast<E>(i);
  throw JsonFieldError{path + ": unknown name '" + text + "'"};
}

EwOp parse_ew_op(const json& value, const std::string& path) {
  const std::string text = json_string(value, path);
  for (int i = 0; i < static_cast<int>(EwOp::kNumOps); ++i)
    if (text == ew_op_name(static_cast<EwOp>(i))) return static_cast<EwOp>(i);
  throw JsonFieldError{path + ": unknown op '" + text + "'"};
}

int32_t json_i32(const json& value, const std::string& path) {
  const int64_t v = json_int(value, path);
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw JsonFieldError{path + " is out of range for a 32-bit index"};
  return static_cast<int32_t>(v);
}

std::vector<int32_t> json_i32_list(const json& value, const std::string& path) {
  std::vector<int32_t> out;
  const json& list = json_array(value, path);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(json_i32(list[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

std::vector<std::string> json_string_list(const json& value, const std::string& path) {
  std::vector<std::string> out;
  const json& list = json_array(value, path);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(json_string(list[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

std::string dt(DType t) { return std::string(dtype_name(t)); }

// Non-finite immediates (-inf starts a max-reduction) have no JSON number form.
json imm_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double imm_from_json(const json& v, const std::string& path) {
  if (v.is_number()) return v.get<double>();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  throw JsonFieldError{path + " is not a number"};
}

// Optional members: absent means the default value.
const json* optional_field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool json_flag(const json& object, const char* key, const std::string& path) {
  const json& v = json_field(object, key, path);
  if (!v.is_boolean()) throw JsonFieldError{path + "." + key + " is not true or false"};
  return v.get<bool>();
}

template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};

// Any described attribute (fields.h) to JSON: an object of the fields that differ from their
// defaults (a reader takes a missing field as its default), enums by name.
template <class T>
json field_to_json(const T& v) {
  if constexpr (has_fields<T>::value) {
    json j = json::object();
    static const T defaults{};
    T::visit_fields(
        [&](const char* name, const auto& f, const auto& d) {
          if (!fields_equal(f, d)) j[name] = field_to_json(f);
        },
        v, defaults);
    return j;
  } else if constexpr (std::is_same_v<T, DType>) {
    return dt(v);
  } else if constexpr (std::is_same_v<T, EwOp>) {
    return ew_op_name(v);
  } else if constexpr (std::is_enum_v<T>) {
    const char* name = enum_names(v)[static_cast<size_t>(v)];
    return name ? json(name) : json("invalid:" + std::to_string(static_cast<int>(v)));
  } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_floating_point_v<T>) {
    return imm_to_json(v);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<int64_t>(v);
  } else {
    json list = json::array();
    for (const auto& e : v) list.push_back(field_to_json(e));
    return list;
  }
}

// JSON to any described attribute, checking the type and range of every field and naming the
// offending one; unknown fields are rejected (a file this build did not write).
template <class T>
void field_from_json(const json& j, const std::string& path, T& out) {
  if constexpr (has_fields<T>::value) {
    if (!j.is_object()) throw JsonFieldError{path + " is not an object"};
    size_t known = 0;
    std::vector<std::string> names;
    T::visit_fields(
        [&](const char* name, auto& f) {
          names.push_back(name);
          if (auto it = j.find(name); it != j.end()) {
            field_from_json(*it, path + "." + name, f);
            ++known;
          }
        },
        out);
    if (known != j.size())
      for (const auto& item : j.items())
        if (std::find(names.begin(), names.end(), item.key()) == names.end())
          throw JsonFieldError{path + " has an unknown field '" + item.key() + "'"};
  } else if constexpr (std::is_same_v<T, DType>) {
    out = json_dtype(j, path);
  } else if constexpr (std::is_same_v<T, EwOp>) {
    out = parse_ew_op(j, path);
  } else if constexpr (std::is_enum_v<T>) {
    const std::string text = json_string(j, path);
    const EnumNames names = enum_names(T{});
    for (size_t i = 0; i < names.count; ++i)
      if (text == names[i]) {
        out = static_cast<T>(i);
        return;
      }
    throw JsonFieldError{path + ": unknown name '" + text + "'"};
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) throw JsonFieldError{path + " is not true or false"};
    out = j.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = json_string(j, path);
  } else if constexpr (std::is_floating_point_v<T>) {
    out = imm_from_json(j, path);
  } else if constexpr (std::is_integral_v<T>) {
    const int64_t v = json_int(j, path);
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
      throw JsonFieldError{path + " is out of range"};
    out = static_cast<T>(v);
  } else {
    const json& list = json_array(j, path);
    if constexpr (is_std_array<T>::value) {
      if (list.size() != out.size()) throw JsonFieldError{path + " must have " + std::to_string(out.size()) + " entries"};
    } else {
      out.resize(list.size());
    }
    for (size_t i = 0; i < list.size(); ++i) field_from_json(list[i], path + "[" + std::to_string(i) + "]", out[i]);
  }
}

json kernel_to_json(const Kernel& k) {
  json j = {{"kind", kernel_kind_name(k.kind)}, {"name", k.name}, {"inputs", k.inputs}, {"outputs", k.outputs}};
  json attrs = visit_kind_attrs(k, [](const auto& a) { return field_to_json(a); });
  if (!attrs.empty()) j["attrs"] = std::move(attrs);
  if (k.source != -1) j["source"] = k.source;
  return j;
}

Kernel kernel_from_json(const json& j, const std::string& path) {
  Kernel k;
  field_from_json(json_field(j, "kind", path), path + ".kind", k.kind);
  k.name = json_string(json_field(j, "name", path), path + ".name");
  k.inputs = json_i32_list(json_field(j, "inputs", path), path + ".inputs");
  k.outputs = json_i32_list(json_field(j, "outputs", path), path + ".outputs");
  if (const json* a = optional_field(j, "attrs"))
    visit_kind_attrs(k, [&](auto& attrs) { field_from_json(*a, path + ".attrs", attrs); });
  if (const json* v = optional_field(j, "source")) k.source = json_i32(*v, path + ".source");
  return k;
}

// Applies `read` to each element of the array at object[key], with an indexed path.
template <typename Fn>
void for_each_in(const json& object, const char* key, const std::string& path, Fn read) {
  const std::string p = path + "." + key;
  const json& list = json_array(json_field(object, key, path), p);
  for (size_t i = 0; i < list.size(); ++i) read(list[i], p + "[" + std::to_string(i) + "]");
}

}  // namespace

const json& json_field(const json& object, const char* key, const std::string& path) {
  if (!object.is_object()) throw JsonFieldError{path + " is not an object"};
  auto it = object.find(key);
  if (it == object.end()) throw JsonFieldError{path + "." + key + " is missing"};
  return *it;
}

int64_t json_int(const json& value, const std::string& path) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw JsonFieldError{path + " is too large"};
  if (!value.is_number_integer()) throw JsonFieldError{path + " is not an integer"};
  return value.get<int64_t>();
}

std::string json_string(const json& value, const std::string& path) {
  if (!value.is_string()) throw JsonFieldError{path + " is not a string"};
  return value.get<std::string>();
}

const json& json_array(const json& value, const std::string& path) {
  if (!value.is_array()) throw JsonFieldError{path + " is not a list"};
  return value;
}

std::vector<int64_t> json_int_list(const json& value, const std::string& path) {
  std::vector<int64_t> out;
  const json& list = json_array(value, path);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(json_int(list[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

DType json_dtype(const json& value, const std::string& path) {
  const std::string text = json_string(value, path);
  auto dtype = dtype_from_name(text);
  if (!dtype) throw JsonFieldError{path + ": unknown dtype '" + text + "'"};
  return *dtype;
}


json program_to_json(const Program& p) {
  json shape_program = json::array();
  for (const ShapeInstr& in : p.shape_program) shape_program.push_back({name_of(kShapeOps, in.op), in.a, in.b});
  json inputs = json::array();
  for (const InputSpec& in : p.inputs) {
    json j = {{"name", in.name}, {"dtype", dt(in.dtype)}, {"dim_min", in.dim_min},
              {"dim_opt", in.dim_opt}, {"dim_max", in.dim_max}, {"dim_names", in.dim_names}};
    // Tensors, the common kind, leave "kind" out (as files written before shape values did).
    if (in.kind != InputSpec::Kind::kTensor) {
      j["kind"] = name_of(kInputKinds, in.kind);
      j["value_bounds"] = {in.value_min, in.value_opt, in.value_max};
    }
    if (in.donated) j["donated"] = true;
    inputs.push_back(std::move(j));
  }
  json checks = json::array();
  for (const ShapeCheck& c : p.checks)
    checks.push_back({{"kind", name_of(kCheckKinds, c.kind)}, {"a", c.a}, {"b", c.b}, {"message", c.message}, {"source", c.source}});
  json buffers = json::array();
  for (const BufferDesc& b : p.buffers) {
    json j = {{"kind", name_of(kBufferKinds, b.kind)}, {"index", b.index}, {"dtype", dt(b.dtype)}, {"shape", b.shape}};
    if (b.offset != 0 || b.kind == BufferDesc::Kind::kTemp) j["offset"] = b.offset;
    if (b.max_bytes != 0 || b.kind == BufferDesc::Kind::kTemp) j["max_bytes"] = b.max_bytes;
    if (b.donor != -1) j["donor"] = b.donor;
    buffers.push_back(std::move(j));
  }
  json kernels = json::array();
  for (const Kernel& k : p.kernels) kernels.push_back(kernel_to_json(k));
  json sources = json::array();
  for (const SourceInfo& info : p.sources) {
    json frames = json::array();
    for (const SourceFrame& f : info)
      frames.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}, {"col", f.col}, {"end_col", f.end_col}});
    sources.push_back(std::move(frames));
  }
  return {{"inputs", inputs},   {"input_shapes", p.input_shapes}, {"shape_program", shape_program},
          {"checks", checks},   {"buffers", buffers},             {"outputs", p.outputs},
          {"output_names", p.output_names}, {"kernels", kernels}, {"arena_bytes", p.arena_bytes},
          {"sources", sources}};
}

Status program_from_json(const json& j, Program* out) {
  const std::string path = "program";
  try {
    Program p;
    for_each_in(j, "inputs", path, [&](const json& v, const std::string& at) {
      InputSpec in;
      in.name = json_string(json_field(v, "name", at), at + ".name");
      in.dtype = json_dtype(json_field(v, "dtype", at), at + ".dtype");
      in.dim_min = json_int_list(json_field(v, "dim_min", at), at + ".dim_min");
      in.dim_opt = json_int_list(json_field(v, "dim_opt", at), at + ".dim_opt");
      in.dim_max = json_int_list(json_field(v, "dim_max", at), at + ".dim_max");
      in.dim_names = json_string_list(json_field(v, "dim_names", at), at + ".dim_names");
      if (const json* kind = optional_field(v, "kind")) in.kind = parse_name<InputSpec::Kind>(kInputKinds, *kind, at + ".kind");
      if (in.kind == InputSpec::Kind::kShapeValue) {
        const std::vector<int64_t> b = json_int_list(json_field(v, "value_bounds", at), at + ".value_bounds");
        if (b.size() != 3) throw JsonFieldError{at + ".value_bounds must be [min, opt, max]"};
        in.value_min = b[0];
        in.value_opt = b[1];
        in.value_max = b[2];
      }
      if (optional_field(v, "donated")) in.donated = json_flag(v, "donated", at);
      p.inputs.push_back(std::move(in));
    });
    for_each_in(j, "input_shapes", path, [&](const json& v, const std::string& at) { p.input_shapes.push_back(json_i32_list(v, at)); });
    for_each_in(j, "shape_program", path, [&](const json& v, const std::string& at) {
      const json& row = json_array(v, at);
      if (row.size() != 3) throw JsonFieldError{at + " must be [op, a, b]"};
      p.shape_program.push_back({parse_name<ShapeInstr::Op>(kShapeOps, row[0], at + "[0]"), json_int(row[1], at + "[1]"), json_int(row[2], at + "[2]")});
    });
    for_each_in(j, "checks", path, [&](const json& v, const std::string& at) {
      p.checks.push_back({parse_name<ShapeCheck::Kind>(kCheckKinds, json_field(v, "kind", at), at + ".kind"),
                          json_i32(json_field(v, "a", at), at + ".a"), json_i32(json_field(v, "b", at), at + ".b"),
                          json_string(json_field(v, "message", at), at + ".message"),
                          json_i32(json_field(v, "source", at), at + ".source")});
    });
    for_each_in(j, "buffers", path, [&](const json& v, const std::string& at) {
      BufferDesc b;
      b.kind = parse_name<BufferDesc::Kind>(kBufferKinds, json_field(v, "kind", at), at + ".kind");
      b.index = json_i32(json_field(v, "index", at), at + ".index");
      b.dtype = json_dtype(json_field(v, "dtype", at), at + ".dtype");
      b.shape = json_i32_list(json_field(v, "shape", at), at + ".shape");
      if (const json* o = optional_field(v, "offset")) b.offset = json_int(*o, at + ".offset");
      if (const json* m = optional_field(v, "max_bytes")) b.max_bytes = json_int(*m, at + ".max_bytes");
      if (const json* d = optional_field(v, "donor")) b.donor = json_i32(*d, at + ".donor");
      p.buffers.push_back(std::move(b));
    });
    p.outputs = json_i32_list(json_field(j, "outputs", path), path + ".outputs");
    p.output_names = json_string_list(json_field(j, "output_names", path), path + ".output_names");
    for_each_in(j, "kernels", path, [&](const json& v, const std::string& at) { p.kernels.push_back(kernel_from_json(v, at)); });
    p.arena_bytes = json_int(json_field(j, "arena_bytes", path), path + ".arena_bytes");
    for_each_in(j, "sources", path, [&](const json& v, const std::string& at) {
      SourceInfo info;
      for (size_t i = 0; i < json_array(v, at).size(); ++i) {
        const json& f = v[i];
        const std::string fp = at + "[" + std::to_string(i) + "]";
        info.push_back({json_string(json_field(f, "file", fp), fp + ".file"), json_i32(json_field(f, "line", fp), fp + ".line"),
                        json_string(json_field(f, "function", fp), fp + ".function"),
                        json_i32(json_field(f, "col", fp), fp + ".col"), json_i32(json_field(f, "end_col", fp), fp + ".end_col")});
      }
      p.sources.push_back(std::move(info));
    });
    p.constants = std::move(out->constants);
    *out = std::move(p);
    return ok_status();
  } catch (const JsonFieldError& e) {
    return data_loss("Corrupt executable metadata: " + e.message + ".");
  } catch (const std::exception& e) {
    return data_loss(std::string("Corrupt executable metadata: ") + e.what());
  }
}

}  // namespace tripy::rt

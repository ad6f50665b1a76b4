// Program <-> JSON. Writing is direct; reading checks the presence and type of every field and
// names the offending one ("program.kernels[3].fused.instrs[2][0]: unknown op 'mull'").
#include "runtime/program_json.h"

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
constexpr const char* kPoolKinds[] = {"max", "avg"};
constexpr const char* kActivations[] = {"none", "relu", "gelu", "silu"};
constexpr const char* kLayouts[] = {"channels_first", "channels_last"};
static_assert(std::size(kLayouts) == static_cast<size_t>(Layout::kChannelsLast) + 1);
static_assert(std::size(kActivations) == static_cast<size_t>(Activation::kSilu) + 1);
static_assert(std::size(kShapeOps) == static_cast<size_t>(ShapeInstr::Op::kInputValue) + 1);
static_assert(std::size(kInputKinds) == static_cast<size_t>(InputSpec::Kind::kShapeValue) + 1);
static_assert(std::size(kBufferKinds) == static_cast<size_t>(BufferDesc::Kind::kAlias) + 1);
static_assert(std::size(kPoolKinds) == static_cast<size_t>(PoolAttrs::Kind::kAvg) + 1);
constexpr const char* kMaskKinds[] = {"none", "bool", "additive"};
constexpr const char* kAttentionOperands[] = {"q", "k", "v", "mask", "out"};
static_assert(std::size(kMaskKinds) == static_cast<size_t>(MaskKind::kAdditive) + 1);
static_assert(std::size(kAttentionOperands) == AttentionAttrs::kNumOperands);

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

json kernel_to_json(const Kernel& k) {
  json j = {{"kind", name_of(kKernelKindNames, k.kind)}, {"name", k.name}, {"inputs", k.inputs}, {"outputs", k.outputs}};
  const FusedProgram& f = k.fused;
  if (k.kind == KernelKind::kFused || !f.domain.empty() || f.reduce_from != 0 || !f.input_axes.empty() ||
      !f.instrs.empty() || !f.output_regs.empty()) {
    json instrs = json::array();
    for (const Instr& in : f.instrs)
      instrs.push_back({ew_op_name(in.op), dt(in.dtype), in.a, in.b, in.c, imm_to_json(in.imm)});
    j["fused"] = {{"domain", f.domain}, {"reduce_from", f.reduce_from}, {"input_axes", f.input_axes},
                  {"instrs", instrs}, {"output_regs", f.output_regs}};
    if (!f.input_windows.empty()) {
      json windows = json::array();
      for (const FusedProgram::Window& w : f.input_windows) windows.push_back({w.starts, w.sizes});
      j["fused"]["input_windows"] = windows;
    }
  }
  const DotAttrs& d = k.dot;
  if (k.kind == KernelKind::kDot || d.transpose_lhs || d.transpose_rhs || d.has_bias || d.activation != Activation::kNone)
    j["dot"] = {{"transpose_lhs", d.transpose_lhs}, {"transpose_rhs", d.transpose_rhs},
                {"has_bias", d.has_bias}, {"activation", name_of(kActivations, d.activation)}};
  if (k.kind == KernelKind::kAttention) {
    const AttentionAttrs& a = k.attention;
    json at = {{"causal", a.causal}, {"scale", imm_to_json(a.scale)}, {"mask", name_of(kMaskKinds, a.mask)}};
    // Layouts only where they differ from the identity (most kernels read dense operands).
    for (int x = 0; x < AttentionAttrs::kNumOperands; ++x)
      if (a.perms[x] != AttentionAttrs::Perm{0, 1, 2, 3})
        at[std::string(kAttentionOperands[x]) + "_perm"] = std::vector<int>(a.perms[x].begin(), a.perms[x].end());
    for (int x = 0; x < AttentionAttrs::kNumOperands; ++x)
      if (a.heads[x] != AttentionAttrs::HeadWindow{})
        at[std::string(kAttentionOperands[x]) + "_heads"] = std::vector<int64_t>{a.heads[x].start, a.heads[x].count};
    j["attention"] = std::move(at);
  }
  if (k.kind == KernelKind::kConv) {
    const ConvAttrs& c = k.conv;
    j["conv"] = {{"stride", c.stride}, {"pad_before", c.pad_before}, {"pad_after", c.pad_after},
                 {"dilation", c.dilation}, {"output_padding", c.output_padding}, {"groups", c.groups},
                 {"transposed", c.transposed}, {"has_bias", c.has_bias}, {"has_residual", c.has_residual},
                 {"activation", name_of(kActivations, c.activation)}};
    // Written only where it is not the default, so files without it read as channels-first.
    if (c.layout != Layout::kChannelsFirst) j["conv"]["layout"] = name_of(kLayouts, c.layout);
  }
  if (k.kind == KernelKind::kPlugin) {
    const PluginAttrs& p = k.plugin;
    j["plugin"] = {{"name", p.name}, {"fields", p.fields}, {"cuda_source", p.cuda_source},
                   {"cuda_entry", p.cuda_entry}, {"block", p.block}};
  }
  if (k.kind == KernelKind::kPool) {
    const PoolAttrs& a = k.pool;
    j["pool"] = {{"kind", name_of(kPoolKinds, a.kind)}, {"window", a.window}, {"stride", a.stride},
                 {"pad_before", a.pad_before}, {"pad_after", a.pad_after}, {"count_include_pad", a.count_include_pad}};
    if (a.layout != Layout::kChannelsFirst) j["pool"]["layout"] = name_of(kLayouts, a.layout);
  }
  if (!k.perm.empty()) j["perm"] = k.perm;
  if (!k.starts.empty()) j["starts"] = k.starts;
  if (!k.steps.empty()) j["steps"] = k.steps;
  if (k.axis != 0) j["axis"] = k.axis;
  if (k.source != -1) j["source"] = k.source;
  return j;
}

Kernel kernel_from_json(const json& j, const std::string& path) {
  Kernel k;
  k.kind = parse_name<KernelKind>(kKernelKindNames, json_field(j, "kind", path), path + ".kind");
  k.name = json_string(json_field(j, "name", path), path + ".name");
  k.inputs = json_i32_list(json_field(j, "inputs", path), path + ".inputs");
  k.outputs = json_i32_list(json_field(j, "outputs", path), path + ".outputs");
  if (const json* f = optional_field(j, "fused")) {
    const std::string fp = path + ".fused";
    k.fused.domain = json_i32_list(json_field(*f, "domain", fp), fp + ".domain");
    k.fused.reduce_from = json_i32(json_field(*f, "reduce_from", fp), fp + ".reduce_from");
    const json& axes = json_array(json_field(*f, "input_axes", fp), fp + ".input_axes");
    for (size_t i = 0; i < axes.size(); ++i)
      k.fused.input_axes.push_back(json_i32_list(axes[i], fp + ".input_axes[" + std::to_string(i) + "]"));
    const json& instrs = json_array(json_field(*f, "instrs", fp), fp + ".instrs");
    for (size_t i = 0; i < instrs.size(); ++i) {
      const std::string ip = fp + ".instrs[" + std::to_string(i) + "]";
      const json& row = json_array(instrs[i], ip);
      if (row.size() != 6) throw JsonFieldError{ip + " must be [op, dtype, a, b, c, imm]"};
      k.fused.instrs.push_back({parse_ew_op(row[0], ip + "[0]"), json_dtype(row[1], ip + "[1]"),
                                json_i32(row[2], ip + "[2]"), json_i32(row[3], ip + "[3]"),
                                json_i32(row[4], ip + "[4]"), imm_from_json(row[5], ip + "[5]")});
    }
    k.fused.output_regs = json_i32_list(json_field(*f, "output_regs", fp), fp + ".output_regs");
    if (const json* windows = optional_field(*f, "input_windows")) {
      const json& ws = json_array(*windows, fp + ".input_windows");
      for (size_t i = 0; i < ws.size(); ++i) {
        const std::string wp = fp + ".input_windows[" + std::to_string(i) + "]";
        const json& w = json_array(ws[i], wp);
        if (w.size() != 2) throw JsonFieldError{wp + " must be [starts, sizes]"};
        k.fused.input_windows.push_back({json_i32_list(w[0], wp + "[0]"), json_i32_list(w[1], wp + "[1]")});
      }
    }
  }
  if (const json* d = optional_field(j, "dot")) {
    const std::string dp = path + ".dot";
    k.dot.transpose_lhs = json_flag(*d, "transpose_lhs", dp);
    k.dot.transpose_rhs = json_flag(*d, "transpose_rhs", dp);
    k.dot.has_bias = json_flag(*d, "has_bias", dp);
    k.dot.activation = parse_name<Activation>(kActivations, json_field(*d, "activation", dp), dp + ".activation");
  }
  if (const json* a = optional_field(j, "attention")) {
    const std::string ap = path + ".attention";
    const json& causal = json_field(*a, "causal", ap);
    if (!causal.is_boolean()) throw JsonFieldError{ap + ".causal is not true or false"};
    k.attention.causal = causal.get<bool>();
    k.attention.scale = imm_from_json(json_field(*a, "scale", ap), ap + ".scale");
    k.attention.mask = parse_name<MaskKind>(kMaskKinds, json_field(*a, "mask", ap), ap + ".mask");
    for (int x = 0; x < AttentionAttrs::kNumOperands; ++x) {
      const std::string key = std::string(kAttentionOperands[x]) + "_perm";
      const json* p = optional_field(*a, key.c_str());
      if (!p) continue;
      const std::vector<int64_t> perm = json_int_list(*p, ap + "." + key);
      if (perm.size() != 4) throw JsonFieldError{ap + "." + key + " must have 4 entries"};
      for (int i = 0; i < 4; ++i) {
        if (perm[i] < 0 || perm[i] > 3) throw JsonFieldError{ap + "." + key + " has an entry outside [0, 3]"};
        k.attention.perms[x][i] = static_cast<int8_t>(perm[i]);
      }
    }
    for (int x = 0; x < AttentionAttrs::kNumOperands; ++x) {
      const std::string key = std::string(kAttentionOperands[x]) + "_heads";
      const json* h = optional_field(*a, key.c_str());
      if (!h) continue;
      const std::vector<int64_t> w = json_int_list(*h, ap + "." + key);
      // Whether the window fits its buffer is checked per run, with the buffer's sizes.
      if (w.size() != 2 || w[0] < 0 || w[1] < 1 || w[0] > (int64_t{1} << 40) || w[1] > (int64_t{1} << 40))
        throw JsonFieldError{ap + "." + key + " must be [start >= 0, count >= 1]"};
      k.attention.heads[x] = {w[0], w[1]};
    }
  }
  if (const json* c = optional_field(j, "conv")) {
    const std::string cp = path + ".conv";
    auto ints = [&](const char* key) { return json_int_list(json_field(*c, key, cp), cp + "." + key); };
    k.conv.stride = ints("stride");
    k.conv.pad_before = ints("pad_before");
    k.conv.pad_after = ints("pad_after");
    k.conv.dilation = ints("dilation");
    k.conv.output_padding = ints("output_padding");
    k.conv.groups = json_int(json_field(*c, "groups", cp), cp + ".groups");
    k.conv.transposed = json_flag(*c, "transposed", cp);
    k.conv.has_bias = json_flag(*c, "has_bias", cp);
    k.conv.has_residual = json_flag(*c, "has_residual", cp);
    k.conv.activation = parse_name<Activation>(kActivations, json_field(*c, "activation", cp), cp + ".activation");
    if (const json* l = optional_field(*c, "layout")) k.conv.layout = parse_name<Layout>(kLayouts, *l, cp + ".layout");
  }
  if (const json* p = optional_field(j, "plugin")) {
    const std::string pp = path + ".plugin";
    k.plugin.name = json_string(json_field(*p, "name", pp), pp + ".name");
    k.plugin.fields = json_string(json_field(*p, "fields", pp), pp + ".fields");
    k.plugin.cuda_source = json_string(json_field(*p, "cuda_source", pp), pp + ".cuda_source");
    k.plugin.cuda_entry = json_string(json_field(*p, "cuda_entry", pp), pp + ".cuda_entry");
    k.plugin.block = json_i32(json_field(*p, "block", pp), pp + ".block");
  }
  if (const json* c = optional_field(j, "pool")) {
    const std::string pp = path + ".pool";
    auto ints = [&](const char* key) { return json_int_list(json_field(*c, key, pp), pp + "." + key); };
    k.pool.kind = parse_name<PoolAttrs::Kind>(kPoolKinds, json_field(*c, "kind", pp), pp + ".kind");
    k.pool.window = ints("window");
    k.pool.stride = ints("stride");
    k.pool.pad_before = ints("pad_before");
    k.pool.pad_after = ints("pad_after");
    k.pool.count_include_pad = json_flag(*c, "count_include_pad", pp);
    if (const json* l = optional_field(*c, "layout")) k.pool.layout = parse_name<Layout>(kLayouts, *l, pp + ".layout");
  }
  if (const json* v = optional_field(j, "perm")) k.perm = json_int_list(*v, path + ".perm");
  if (const json* v = optional_field(j, "starts")) k.starts = json_i32_list(*v, path + ".starts");
  if (const json* v = optional_field(j, "steps")) k.steps = json_i32_list(*v, path + ".steps");
  if (const json* v = optional_field(j, "axis")) k.axis = json_int(*v, path + ".axis");
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

StatusOr<Device> device_from_string(const std::string& text) {
  if (text == "cpu") return Device{Device::Kind::kCpu, 0};
  if (text.rfind("gpu:", 0) == 0 && text.size() > 4 && text.size() <= 8 &&
      text.find_first_not_of("0123456789", 4) == std::string::npos)
    return Device{Device::Kind::kGpu, std::stoi(text.substr(4))};
  return data_loss("Unknown device '" + text + "' (expected 'cpu' or 'gpu:N').");
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

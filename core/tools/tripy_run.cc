// tripy-run: loads a saved executable with the runtime alone (no Python, no compiler), describes
// its inputs, and optionally runs it on .npy files or on zeros of each input's `opt` shape.
// Shape values (tp.DimensionInputInfo) are given as numbers; --zeros gives them their `opt` value.
//
//   tripy-run model.tpy [--input name=path.npy ...] [--input name=VALUE ...] [--zeros]
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "tripy/executable.h"

namespace {

using namespace tripy;

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// .npy version 1-3: magic, version, header length, a Python-dict header, then the raw data.
StatusOr<Tensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& why) { return invalid_argument("Cannot read '" + path + "': " + why + "."); };
  if (!in && !in.eof()) return bad("cannot open the file");
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return bad("truncated header");
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const size_t data_at = 8 + len_bytes + header_len;
  if (data_at > bytes.size()) return bad("truncated header");
  const std::string header = bytes.substr(8 + len_bytes, header_len);

  static const std::map<std::string, DType> kDescr = {{"<f4", DType::kFloat32}, {"<f2", DType::kFloat16},
                                                      {"<i4", DType::kInt32},   {"<i8", DType::kInt64},
                                                      {"|b1", DType::kBool},    {"|i1", DType::kInt8}};
  const size_t d = header.find("'descr':");
  const size_t q1 = header.find('\'', d + 8), q2 = header.find('\'', q1 + 1);
  if (d == std::string::npos || q2 == std::string::npos || !kDescr.count(header.substr(q1 + 1, q2 - q1 - 1)))
    return bad("unsupported dtype (little-endian float32/float16/int32/int64/int8/bool only)");
  if (header.find("'fortran_order': False") == std::string::npos) return bad("Fortran-ordered arrays are not supported");
  const size_t s = header.find("'shape':"), open = header.find('(', s), close = header.find(')', open);
  if (s == std::string::npos || close == std::string::npos) return bad("no shape");
  // Dims are checked before anything is allocated: the data must fill the rest of the file exactly.
  std::vector<int64_t> shape;
  int64_t numel = 1;
  bool overflow = false;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(dims, item, ',');) {
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    if (first == std::string::npos) continue;  // the empty item after a trailing comma
    const std::string digits = item.substr(first, last - first + 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return bad("the shape has a dim '" + digits + "'");
    if (digits.size() > 18) return bad("the shape has a dim too large (" + digits + ")");
    const int64_t dim = std::stoll(digits);
    overflow = overflow || (dim != 0 && numel > INT64_MAX / dim);
    numel = overflow ? numel : numel * dim;
    shape.push_back(dim);
  }
  const DType dtype = kDescr.at(header.substr(q1 + 1, q2 - q1 - 1));
  const size_t data_bytes = bytes.size() - data_at;
  if (overflow || numel > static_cast<int64_t>(data_bytes / dtype_size(dtype)) ||
      static_cast<size_t>(numel * dtype_size(dtype)) != data_bytes)
    return bad("the data has " + std::to_string(data_bytes) + " bytes, the shape " + dims_str(shape) + " needs " +
               (overflow ? "more than 2**63" : std::to_string(numel * dtype_size(dtype))));
  Tensor t = Tensor::empty_host(dtype, shape);
  std::memcpy(t.data(), bytes.data() + data_at, static_cast<size_t>(t.nbytes()));
  return t;
}

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

// The first few values, enough to eyeball a result.
std::string head_values(const Tensor& t, int64_t count = 8) {
  std::ostringstream out;
  const int64_t n = std::min(count, t.numel());
  for (int64_t i = 0; i < n; ++i) {
    if (i) out << ", ";
    switch (t.dtype()) {
      case DType::kFloat32: out << static_cast<const float*>(t.data())[i]; break;
      case DType::kFloat16: out << half_to_float(static_cast<const uint16_t*>(t.data())[i]); break;
      case DType::kInt32: out << static_cast<const int32_t*>(t.data())[i]; break;
      case DType::kInt64: out << static_cast<const int64_t*>(t.data())[i]; break;
      case DType::kInt8: out << static_cast<int>(static_cast<const int8_t*>(t.data())[i]); break;
      case DType::kBool: out << (static_cast<const uint8_t*>(t.data())[i] ? "true" : "false"); break;
      default: return "(" + std::string(dtype_name(t.dtype())) + " values not shown)";
    }
  }
  return out.str() + (t.numel() > n ? ", ..." : "");
}

int fail(const Status& st) {
  std::cerr << format_error(st) << "\n";
  return 1;
}

constexpr const char* kUsage = "usage: tripy-run FILE [--input NAME=PATH.npy | --input NAME=VALUE ...] [--zeros]";
constexpr const char* kHelp = R"help(
Loads an executable saved by tp.Executable.save (or tp.compile(...).save), lists its inputs with
their dtypes and [min, opt, max] sizes, and, given inputs, runs it and prints each output's dtype,
shape and first values. Needs neither Python nor the compiler.

  FILE                   the saved executable (.tpy)
  --input NAME=PATH.npy  the input NAME from a .npy file (little-endian float32, float16, int32,
                         int64, int8 or bool; C order); repeat once per input
  --input NAME=VALUE     a shape value input (tp.DimensionInputInfo) given as a number
  --zeros                every input not given with --input: zeros of its `opt` shape (shape
                         values: their `opt` value)
  -h, --help             this text

Example:
  python -c "import numpy as np; np.save('x.npy', np.ones((2, 8), np.float32))"
  tripy-run mlp.tpy --input x=x.npy
Exit status: 0 on success, 1 with the error on stderr otherwise.
)help";

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  std::map<std::string, std::string> npy;  // input name -> path
  bool zeros = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage << "\n" << kHelp;
      return 0;
    } else if (arg == "--zeros") {
      zeros = true;
    } else if (arg == "--input" && i + 1 < argc && std::strchr(argv[i + 1], '=')) {
      const std::string spec = argv[++i];
      npy[spec.substr(0, spec.find('='))] = spec.substr(spec.find('=') + 1);
    } else if (file.empty() && arg[0] != '-') {
      file = arg;
    } else {
      std::cerr << kUsage << " (see --help)\n";
      return 1;
    }
  }
  if (file.empty()) {
    std::cerr << kUsage << " (see --help)\n";
    return 1;
  }

  auto exe = Executable::load(file);
  if (!exe.ok()) return fail(exe.status());
  std::cout << file << " (" << exe->device().str() << ")\ninputs: name: dtype [min, opt, max] per dim\n";
  for (const InputDesc& in : exe->inputs()) {
    if (in.kind == InputDesc::Kind::kShapeValue) {
      std::cout << "  " << in.name << ": shape value " << list_str({in.value_min, in.value_opt, in.value_max}) << "\n";
      continue;
    }
    std::cout << "  " << in.name << ": " << dtype_name(in.dtype) << " [";
    for (size_t d = 0; d < in.dim_min.size(); ++d)
      std::cout << (d ? ", " : "") << list_str({in.dim_min[d], in.dim_opt[d], in.dim_max[d]});
    std::cout << "]\n";
  }
  if (npy.empty() && !zeros) return 0;
  for (const auto& [name, path] : npy) {
    if (std::any_of(exe->inputs().begin(), exe->inputs().end(), [&](const InputDesc& in) { return in.name == name; }))
      continue;
    std::string names;
    for (const InputDesc& in : exe->inputs()) names += (names.empty() ? "'" : ", '") + in.name + "'";
    return fail(invalid_argument("This executable has no input named '" + name + "'; its inputs are " +
                                 (names.empty() ? "none" : names) + "."));
  }

  std::vector<Tensor> inputs;
  for (const InputDesc& in : exe->inputs()) {
    auto it = npy.find(in.name);
    if (in.kind == InputDesc::Kind::kShapeValue && (it != npy.end() || zeros)) {
      int64_t value = in.value_opt;
      if (it != npy.end()) {
        size_t used = 0;
        try {
          value = std::stoll(it->second, &used);
        } catch (const std::exception&) {
        }
        if (used == 0 || used != it->second.size())
          return fail(invalid_argument("'" + in.name + "' is a shape value: give it as --input " + in.name +
                                       "=NUMBER."));
      }
      inputs.push_back(Tensor::host_int64(value));
    } else if (it != npy.end()) {
      auto t = read_npy(it->second);
      if (!t.ok()) return fail(t.status());
      inputs.push_back(std::move(t).value());
    } else if (zeros) {
      Tensor t = Tensor::empty_host(in.dtype, in.dim_opt);
      std::memset(t.data(), 0, static_cast<size_t>(t.nbytes()));
      inputs.push_back(std::move(t));
    } else {
      return fail(invalid_argument("No --input given for '" + in.name + "' (or pass --zeros)."));
    }
  }
  // Inputs are read into host memory; a GPU executable gets them copied over, and its outputs back.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (exe->inputs()[i].kind == InputDesc::Kind::kShapeValue) continue;  // read on the host
    auto moved = copy_to(inputs[i], exe->device());
    if (!moved.ok()) return fail(moved.status());
    inputs[i] = std::move(moved).value();
  }
  auto outputs = exe->run(inputs);
  if (!outputs.ok()) return fail(outputs.status());
  for (size_t i = 0; i < outputs->size(); ++i) {
    auto host = copy_to((*outputs)[i], Device{});
    if (!host.ok()) return fail(host.status());
    const Tensor& t = host.value();
    std::cout << exe->output_names()[i] << ": " << dtype_name(t.dtype()) << " " << dims_str(t.shape()) << " = ["
              << head_values(t) << "]\n";
  }
  return 0;
}

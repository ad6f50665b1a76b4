// tripy-run: loads a saved executable with the runtime alone (no Python, no compiler), describes
// its inputs, and optionally runs it on .npy files or on zeros of each input's `opt` shape.
// Shape values (tp.DimensionInputInfo) are given as numbers; --zeros gives them their `opt` value.
// An executable of several optimization profiles lists each profile's ranges, and says which ran.
//
//   tripy-run model.tpy [--input name=path.npy ...] [--input name=VALUE ...] [--zeros [--profile N]]
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "npy_reader.h"
#include "tripy/executable.h"

namespace {

using namespace tripy;

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
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

constexpr const char* kUsage =
    "usage: tripy-run FILE [--input NAME=PATH.npy | --input NAME=VALUE ...] [--zeros [--profile N]]";
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
  --profile N            with --zeros, the `opt` shapes of optimization profile N (default 0);
                         the run itself uses the first profile whose ranges hold the inputs
  -h, --help             this text

An executable compiled with several optimization profiles lists each profile's ranges, in the
order runs try them, and prints which profile a run used.

Example (mlp.tpy as the README saves it: one input x of shape [1..64, 2]):
  tripy-run mlp.tpy
  python -c "import numpy as np; np.save('x.npy', np.ones((8, 2), np.float32))"
  tripy-run mlp.tpy --input x=x.npy
Exit status: 0 on success, 1 with the error on stderr otherwise.
)help";

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  std::map<std::string, std::string> given;  // input name -> path or value
  bool zeros = false;
  long profile = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage << "\n" << kHelp;
      return 0;
    } else if (arg == "--zeros") {
      zeros = true;
    } else if (arg == "--profile" && i + 1 < argc) {
      char* end = nullptr;
      profile = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || profile < 0) {
        std::cerr << "--profile takes a profile number (0, 1, ...)\n";
        return 1;
      }
    } else if (arg == "--input" && i + 1 < argc && std::strchr(argv[i + 1], '=')) {
      const std::string spec = argv[++i];
      given[spec.substr(0, spec.find('='))] = spec.substr(spec.find('=') + 1);
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
  const size_t profiles = exe->num_profiles();
  std::cout << file << " (" << exe->device().str() << ")\ninputs: name: dtype [min, opt, max] per dim\n";
  if (profiles > 1)
    std::cout << profiles << " optimization profiles; a run uses the first whose ranges hold its inputs\n";
  for (size_t p = 0; p < profiles; ++p) {
    if (profiles > 1) std::cout << "profile " << p << ":\n";
    for (const InputDesc& in : exe->profile_inputs(p)) {
      if (in.kind == InputDesc::Kind::kShapeValue) {
        std::cout << "  " << in.name << ": shape value " << list_str({in.value_min, in.value_opt, in.value_max}) << "\n";
        continue;
      }
      std::cout << "  " << in.name << ": " << dtype_name(in.dtype) << " [";
      for (size_t d = 0; d < in.dim_min.size(); ++d)
        std::cout << (d ? ", " : "") << list_str({in.dim_min[d], in.dim_opt[d], in.dim_max[d]});
      std::cout << "]\n";
    }
  }
  if (static_cast<size_t>(profile) >= profiles)
    return fail(invalid_argument("--profile " + std::to_string(profile) + ": this executable has " +
                                 std::to_string(profiles) + " optimization profile(s), numbered from 0."));
  if (given.empty() && !zeros) return 0;
  for (const auto& [name, path] : given) {
    if (std::any_of(exe->inputs().begin(), exe->inputs().end(), [&](const InputDesc& in) { return in.name == name; }))
      continue;
    std::string names;
    for (const InputDesc& in : exe->inputs()) names += (names.empty() ? "'" : ", '") + in.name + "'";
    return fail(invalid_argument("This executable has no input named '" + name + "'; its inputs are " +
                                 (names.empty() ? "none" : names) + "."));
  }

  std::vector<Tensor> inputs;
  for (const InputDesc& in : exe->profile_inputs(static_cast<size_t>(profile))) {
    auto it = given.find(in.name);
    if (in.kind == InputDesc::Kind::kShapeValue && (it != given.end() || zeros)) {
      int64_t value = in.value_opt;
      if (it != given.end()) {
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
    } else if (it != given.end()) {
      auto t = npy::read_npy(it->second);
      if (!t.ok()) return fail(t.status());
      inputs.push_back(std::move(t).value());
    } else if (zeros) {
      auto zeros_or = Tensor::try_empty_host(in.dtype, in.dim_opt, "--zeros input '" + in.name + "'");
      if (!zeros_or.ok()) return fail(zeros_or.status());
      Tensor t = std::move(zeros_or).value();
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
  if (profiles > 1) std::cout << "ran profile " << exe->select_profile(inputs).value() << "\n";
  for (size_t i = 0; i < outputs->size(); ++i) {
    auto host = copy_to((*outputs)[i], Device{});
    if (!host.ok()) return fail(host.status());
    const Tensor& t = host.value();
    std::cout << exe->output_names()[i] << ": " << dtype_name(t.dtype()) << " " << dims_str(t.shape()) << " = ["
              << head_values(t) << "]\n";
  }
  return 0;
}

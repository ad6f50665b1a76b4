// Serialises the CUDA backend's artifacts (JSON metadata + two binary blobs) and checks them on load.
#include "backend/cuda/cuda_artifacts.h"

#include <nlohmann/json.hpp>

namespace tripy::rt::cuda {
namespace {

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

bool from_hex(const std::string& s, std::vector<uint8_t>& out) {
  if (s.size() % 2) return false;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out.clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = val(s[i]), lo = val(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

Artifacts serialize_artifacts(const CudaArtifacts& a) {
  Artifacts out;
  std::vector<uint8_t>& cubin = out["cuda.cubin"];
  std::vector<uint8_t>& ptx = out["cuda.ptx"];
  nlohmann::json meta;
  meta["version"] = CudaArtifacts::kVersion;
  meta["arch"] = a.arch;
  meta["cublaslt"] = a.cublaslt_version;
  meta["layout_module"] = a.layout_module;
  nlohmann::json mods = nlohmann::json::array();
  for (const CompiledModule& m : a.modules) {
    while (cubin.size() % 16) cubin.push_back(0);  // cuModuleLoadData wants aligned images
    mods.push_back({{"cubin", {cubin.size(), m.cubin.size()}}, {"ptx", {ptx.size(), m.ptx.size()}}});
    cubin.insert(cubin.end(), m.cubin.begin(), m.cubin.end());
    ptx.insert(ptx.end(), m.ptx.begin(), m.ptx.end());
  }
  meta["modules"] = mods;
  meta["kernel_module"] = a.kernel_module;
  meta["kernel_function"] = a.kernel_function;
  nlohmann::json algos = nlohmann::json::object();
  for (const auto& [k, v] : a.algos) algos[std::to_string(k)] = to_hex(v);
  meta["algos"] = algos;
  std::string text = meta.dump(1);
  out["cuda.meta"] = std::vector<uint8_t>(text.begin(), text.end());
  return out;
}

StatusOr<CudaArtifacts> parse_artifacts(const Artifacts& artifacts, size_t num_kernels) {
  auto bad = [](const std::string& why) {
    return Status(StatusCode::kDataLoss, "the executable's CUDA code is corrupt: " + why);
  };
  auto meta_it = artifacts.find("cuda.meta");
  auto cubin_it = artifacts.find("cuda.cubin");
  auto ptx_it = artifacts.find("cuda.ptx");
  if (meta_it == artifacts.end() || cubin_it == artifacts.end() || ptx_it == artifacts.end())
    return bad("a cuda.* section is missing");
  const std::vector<uint8_t>& cubin = cubin_it->second;
  const std::vector<uint8_t>& ptx = ptx_it->second;
  nlohmann::json meta = nlohmann::json::parse(meta_it->second.begin(), meta_it->second.end(), nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) return bad("cuda.meta is not JSON");
  CudaArtifacts a;
  try {
    if (meta.at("version").get<int>() != CudaArtifacts::kVersion)
      return bad("unknown cuda.meta version " + meta.at("version").dump());
    a.arch = meta.at("arch").get<int>();
    a.cublaslt_version = meta.at("cublaslt").get<std::string>();
    a.layout_module = meta.at("layout_module").get<int32_t>();
    for (const auto& m : meta.at("modules")) {
      auto range = [&](const char* key, size_t limit, uint64_t& off, uint64_t& size) {
        off = m.at(key).at(0).get<uint64_t>();
        size = m.at(key).at(1).get<uint64_t>();
        return off <= limit && size <= limit - off;
      };
      uint64_t co, cs, po, ps;
      if (!range("cubin", cubin.size(), co, cs) || !range("ptx", ptx.size(), po, ps))
        return bad("a module lies outside its section");
      CompiledModule cm;
      cm.cubin.assign(cubin.begin() + co, cubin.begin() + co + cs);
      cm.ptx.assign(ptx.begin() + po, ptx.begin() + po + ps);
      a.modules.push_back(std::move(cm));
    }
    a.kernel_module = meta.at("kernel_module").get<std::vector<int32_t>>();
    a.kernel_function = meta.at("kernel_function").get<std::vector<std::string>>();
    for (const auto& [k, v] : meta.at("algos").items()) {
      std::vector<uint8_t> bytes;
      if (!from_hex(v.get<std::string>(), bytes)) return bad("a GEMM algorithm is not hex");
      a.algos[std::stoi(k)] = std::move(bytes);
    }
  } catch (const std::exception& e) {
    return bad(std::string("cuda.meta: ") + e.what());
  }
  if (a.layout_module < 0 || static_cast<size_t>(a.layout_module) >= a.modules.size())
    return bad("layout module index out of range");
  if (a.kernel_module.size() != num_kernels || a.kernel_function.size() != num_kernels)
    return bad("kernel table does not match the program");
  for (int32_t m : a.kernel_module)
    if (m < -1 || m >= static_cast<int32_t>(a.modules.size())) return bad("kernel module index out of range");
  return a;
}

}  // namespace tripy::rt::cuda

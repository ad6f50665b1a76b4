// One small text file per problem, named by a hash of its whole key:
//   tripy-tuning 1
//   <context>\t<problem>
//   <the algorithm's bytes in hex>
// The key is stored in full, so a hash collision or a file from another context reads as a miss.
#include "backend/cuda/codegen/cuda_tuning_cache.h"

#include "backend/cuda/codegen/cuda_cache_files.h"
#include "backend/cuda/codegen/cuda_compile.h"

namespace tripy::rt::cuda {
namespace {

constexpr const char* kHeader = "tripy-tuning 1\n";
// Tuned algorithms are a few dozen bytes; anything near this is not ours.
constexpr size_t kMaxAlgoBytes = 4096, kMaxFileBytes = 64 * 1024;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

TuningCache::TuningCache(std::string dir, std::string context) : dir_(std::move(dir)), context_(std::move(context)) {
  // Keys are lines of the file: a line break inside one would break the format.
  for (char& c : context_)
    if (c == '\n' || c == '\t') c = ' ';
}

std::optional<std::string> TuningCache::key_of(const std::string& problem) const {
  if (dir_.empty() || problem.find('\n') != std::string::npos) return std::nullopt;
  return context_ + "\t" + problem;
}

std::string TuningCache::path_of(const std::string& key) const { return dir_ + "/" + hash_hex(key) + ".txt"; }

std::optional<std::vector<uint8_t>> TuningCache::find(const std::string& problem) const {
  const std::optional<std::string> key = key_of(problem);
  std::string text;
  if (!key || !read_file(path_of(*key), text, kMaxFileBytes)) return std::nullopt;
  const std::string head = kHeader + *key + "\n";
  if (text.compare(0, head.size(), head) != 0) return std::nullopt;
  const size_t end = text.find('\n', head.size());
  if (end == std::string::npos || end + 1 != text.size()) return std::nullopt;
  const size_t digits = end - head.size();
  if (digits == 0 || digits % 2 != 0 || digits / 2 > kMaxAlgoBytes) return std::nullopt;
  std::vector<uint8_t> algo(digits / 2);
  for (size_t i = 0; i < algo.size(); ++i) {
    const int hi = hex_digit(text[head.size() + 2 * i]), lo = hex_digit(text[head.size() + 2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    algo[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return algo;
}

void TuningCache::store(const std::string& problem, const std::vector<uint8_t>& algo) const {
  const std::optional<std::string> key = key_of(problem);
  if (!key || algo.empty() || algo.size() > kMaxAlgoBytes) return;
  static const char kHex[] = "0123456789abcdef";
  std::string text = kHeader + *key + "\n";
  for (uint8_t b : algo) {
    text += kHex[b >> 4];
    text += kHex[b & 15];
  }
  text += "\n";
  write_file_atomic(path_of(*key), text.data(), text.size());
}

std::string tuning_cache_dir() {
  const std::string kernels = kernel_cache_dir();
  if (kernels.empty()) return "";
  const std::string dir = kernels + "/tuning";
  return make_dirs(dir) ? dir : "";
}

}  // namespace tripy::rt::cuda

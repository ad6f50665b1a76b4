// Tuned algorithms kept across processes, beside the compiled kernels ($TRIPY_CACHE_DIR/tuning):
// a compile that meets a GEMM or convolution timed before, on the same GPU with the same libraries
// and tuner, takes the stored choice instead of timing it again. A file that does not parse, holds
// another problem or is not a regular file (a link, a FIFO) is ignored and rewritten after timing;
// the runtime checks a stored choice again when it loads it, as it checks an executable's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tripy::rt::cuda {

class TuningCache {
 public:
  // `dir` "" turns the cache off. `context` is what else decides a choice: the GPU, the library
  // versions, the tuner's version and the switches that change its candidates.
  TuningCache(std::string dir, std::string context);

  // A GEMM's AlgoBytes or a convolution's ConvAlgo, as the tuner returned it.
  std::optional<std::vector<uint8_t>> find(const std::string& problem) const;
  void store(const std::string& problem, const std::vector<uint8_t>& algo) const;

 private:
  // "<context>\t<problem>", or nullopt when the cache is off or a line break in the problem would
  // break the file's format.
  std::optional<std::string> key_of(const std::string& problem) const;
  std::string path_of(const std::string& key) const;

  std::string dir_, context_;
};

// kernel_cache_dir() + "/tuning" (made if missing), or "" when caching is off.
std::string tuning_cache_dir();

}  // namespace tripy::rt::cuda

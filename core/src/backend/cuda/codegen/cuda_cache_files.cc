// The caches' files go through common/safe_file.h: the cache directory may be shared or planted
// with links and FIFOs, and a cache must then miss, never follow, hang or report an error.
#include "backend/cuda/codegen/cuda_cache_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <exception>

#include "common/safe_file.h"

namespace tripy::rt::cuda {

bool read_file(const std::string& path, std::string& out, size_t max_bytes) {
  // Not following a link: a cache entry is a file the cache wrote, never one it points to.
  RegularFile file = open_regular_file(path, /*follow_links=*/false);
  if (!file.opened() || file.info.st_size < 0 || static_cast<uint64_t>(file.info.st_size) > max_bytes) return false;
  const size_t size = static_cast<size_t>(file.info.st_size);
  try {
    out.resize(size);
  } catch (const std::exception&) {
    return false;
  }
  // A file cut short while it was read is a miss; one that grew is read up to its size at open.
  return read_fully(file.fd.get(), out.data(), size) == static_cast<ssize_t>(size);
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  // A cache is best effort: a failed write leaves a miss for next time, and no temporary file.
  (void)replace_file(path, data, size, /*durable=*/false);
}

bool make_dirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur += path[i];
  }
  // The cache holds compiled code that is loaded and run: a directory another user owns, or that
  // everyone may write to (a shared TRIPY_CACHE_DIR under /tmp, or a link to one), could hand this
  // process someone else's kernels. Such a directory is no cache at all.
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & S_IWOTH) == 0;
}

}  // namespace tripy::rt::cuda

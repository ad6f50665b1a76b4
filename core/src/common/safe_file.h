// Reading and replacing files in directories others may write to: the executable format
// (runtime/file_format.cc) and the CUDA compile caches (backend/cuda/codegen/cuda_cache_files.cc)
// share these, so neither follows a planted link, blocks on a FIFO or leaves half a file.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace tripy {

// Owns a file descriptor and closes it.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_;
};

// What open_regular_file found at a path.
struct RegularFile {
  ScopedFd fd;       // open for reading when the path is a regular file
  struct stat info {};  // the file's status; when it is not a regular file, what it is instead
  int error = 0;     // errno of the call that failed; 0 when opened, or when refused as not regular

  bool opened() const { return fd.get() >= 0; }
  bool not_regular() const { return !opened() && error == 0; }
};

// Opens `path` for reading only if it is a regular file. Anything else (a FIFO, a device, a
// directory; with `follow_links` false, also a symbolic link) is refused before it is opened where
// stat can tell, and always before a byte is read: O_NONBLOCK keeps open() from waiting for a
// FIFO's writer, and fstat() then sees what was really opened.
RegularFile open_regular_file(const std::string& path, bool follow_links);

// What a path that is not a regular file names ("a directory", "a FIFO (named pipe)", ...), for
// the error that refuses it.
std::string file_kind(mode_t mode);

// Reads until `size` bytes are in `data` or the file ends; the count read, or -1 with errno set.
ssize_t read_fully(int fd, void* data, size_t size);

// Makes `path` hold exactly `data`: written to a private temporary file beside it (created with
// O_EXCL | O_NOFOLLOW under a random name, so nothing planted there is opened or followed), then
// renamed over it, so a reader sees the old file or the whole new one, and a link at `path` is
// replaced, never written through. With `durable`, the file and the rename are synced to the disk
// first. False with errno set on failure, leaving no temporary file.
bool replace_file(const std::string& path, const void* data, size_t size, bool durable);

// One piece of a file that replace_file writes: `size` bytes at `data`.
struct FilePart {
  const void* data;
  size_t size;
};
// replace_file for a file written in pieces, one after another (a checkpoint's header, then each
// tensor's bytes), so that a large file is never assembled in memory first.
bool replace_file(const std::string& path, const std::vector<FilePart>& parts, bool durable);

}  // namespace tripy

// File access that a planted link, FIFO or name cannot subvert (see safe_file.h).
#include "common/safe_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <random>

namespace tripy {

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int ScopedFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void ScopedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

// Writes everything or returns false with errno set.
bool write_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A suffix another process cannot guess: O_EXCL already makes a planted name harmless (it is
// never opened), and an unguessable one keeps a planter from making every attempt fail.
std::string random_suffix() {
  static const uint64_t seed = [] {
    try {
      std::random_device device;
      return static_cast<uint64_t>(device()) << 32 | device();
    } catch (...) {
      return uint64_t{0};  // no entropy source: the clock and the counter below still differ
    }
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t v = seed ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) << 40) ^ static_cast<uint64_t>(::getpid());
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

// Creates ".<name>.<random>.tmp" beside `path` that no one else has opened: O_EXCL never opens
// what exists, O_NOFOLLOW never follows a link planted under the name. Its descriptor, or -1
// with errno set.
int create_private_temp(const std::string& path, std::string* tmp) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  // Short enough that ".<name>.<suffix>.tmp" stays within NAME_MAX (255) for any file name.
  const std::string name = path.substr(dir.size()).substr(0, 200);
  for (int attempt = 0; attempt < 64; ++attempt) {
    *tmp = dir + "." + name + "." + random_suffix() + ".tmp";
    const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

RegularFile open_regular_file(const std::string& path, bool follow_links) {
  RegularFile file;
  // Refused before it is opened where possible, since opening some devices does something.
  const int looked = follow_links ? ::stat(path.c_str(), &file.info) : ::lstat(path.c_str(), &file.info);
  if (looked == 0 && !S_ISREG(file.info.st_mode)) return file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    file.error = errno;
    return file;
  }
  ScopedFd owned(fd);
  if (::fstat(fd, &file.info) != 0) {
    file.error = errno;
    return file;
  }
  // Replaced since stat: still refused, and nothing was read from it.
  if (!S_ISREG(file.info.st_mode)) return file;
  file.fd = std::move(owned);
  return file;
}

ssize_t read_fully(int fd, void* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, static_cast<uint8_t*>(data) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

bool replace_file(const std::string& path, const void* data, size_t size, bool durable) {
  return replace_file(path, std::vector<FilePart>{{data, size}}, durable);
}

bool replace_file(const std::string& path, const std::vector<FilePart>& parts, bool durable) {
  std::string tmp;
  const int fd = create_private_temp(path, &tmp);
  if (fd < 0) return false;
  bool written = true;
  for (const FilePart& part : parts) written = written && write_all(fd, static_cast<const uint8_t*>(part.data), part.size);
  written = written && (!durable || ::fsync(fd) == 0);
  int err = errno;
  if (::close(fd) != 0 && written) {
    written = false;
    err = errno;
  }
  // rename() replaces the name itself: a link or file that is there is neither followed nor
  // written to.
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = false;
    err = errno;
  }
  if (!written) {
    ::unlink(tmp.c_str());
    errno = err;
    return false;
  }
  if (durable) {
    // Make the rename itself durable (best effort: some file systems cannot sync a directory).
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }
  return true;
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace tripy
